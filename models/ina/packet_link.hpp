#pragma once
// One direction of a host<->switch cable at packet level: FIFO serialisation at the sender plus a
// propagation latency, with an unbounded (lossless) queue whose depth drives ECN marking.
//
// The link keeps its own clock in picoseconds: a 308-byte packet takes 24.64 ns at 100 Gbps, and
// rounding each packet to whole nanoseconds would drift by 1.5%. Only the arrival times handed
// to the engine are rounded (up) to nanoseconds.
//
// Bursts (batched mode) are pipelined like the packets they stand for: a burst forwarded as it
// arrives (its first packet arrived (k-1) serialisation times before its last) finishes leaving
// at max(link free + k*s, now + s), exactly when k store-and-forward packets would, as long as the
// links on the path have the same speed.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "sim_core/base/time.hpp"
#include "sim_core/base/units.hpp"

namespace mlsim::ina {

class PacketLink {
 public:
  PacketLink(Bandwidth bw, Time latency, Bytes packet_bytes)
      : latency_(latency),
        per_packet_ps_(
            std::llround(static_cast<double>(packet_bytes.count) / bw.bytes_per_s * 1e12)),
        bytes_per_ps_(bw.bytes_per_s * 1e-12) {}

  // A burst whose packets are all ready now (sent by a host). Returns the arrival time of its
  // last packet at the far end.
  Time send(Time now, int packets) {
    return depart(std::max(busy_until_ps_, ps(now)) + per_packet_ps_ * packets, packets);
  }
  // A burst being forwarded while it arrives (`now` = arrival of its last packet).
  Time forward(Time now, int packets) {
    return depart(std::max(busy_until_ps_ + per_packet_ps_ * packets, ps(now) + per_packet_ps_),
                  packets);
  }
  // Bytes waiting to be serialised at `now` (what an ECN threshold compares against).
  double queued_bytes(Time now) const {
    return busy_until_ps_ > ps(now) ? static_cast<double>(busy_until_ps_ - ps(now)) * bytes_per_ps_
                                    : 0.0;
  }
  std::uint64_t packets_carried() const { return packets_; }
  double busy_seconds() const { return static_cast<double>(busy_ps_) * 1e-12; }

 private:
  static std::int64_t ps(Time t) { return t.count_ns() * 1000; }
  Time depart(std::int64_t last_bit_leaves_ps, int packets) {
    busy_ps_ += per_packet_ps_ * packets;
    busy_until_ps_ = last_bit_leaves_ps;
    packets_ += static_cast<std::uint64_t>(packets);
    return Time::ns((last_bit_leaves_ps + 999) / 1000) + latency_;
  }
  Time latency_;
  std::int64_t per_packet_ps_;
  double bytes_per_ps_;
  std::int64_t busy_until_ps_ = 0;
  std::int64_t busy_ps_ = 0;
  std::uint64_t packets_ = 0;
};

}  // namespace mlsim::ina
