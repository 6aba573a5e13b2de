#pragma once
// The packet-level data path (data_path.hpp): the model's own host <-> switch links on a
// one-switch star, one PacketLink per direction of each host's cable. INA traffic is millions of
// small packets whose per-packet timing (window round trips, aggregator hold times, ECN from
// queue depth) is the mechanism under study; this path keeps it exactly. A lost packet still
// occupies its link (it is dropped at the far end).
#include <vector>

#include "models/ina/data_path.hpp"
#include "models/ina/packet_link.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/network/switch_program.hpp"

namespace mlsim::ina {

class PacketPath final : public DataPath {
 public:
  // A host cable of `bandwidth` and one-way `latency` per entry of `packet_bytes` (host h's
  // packets are packet_bytes[h] on the wire: its job's format); ECN marks a burst that finds
  // more than `ecn_threshold_bytes` queued at a switch egress.
  PacketPath(Engine& engine, HostEnds& ends, SwitchProgram<Packet>& program, Bandwidth bandwidth,
             Time latency, const std::vector<Bytes>& packet_bytes, double ecn_threshold_bytes)
      : engine_(engine), ends_(ends), program_(program), ecn_threshold_(ecn_threshold_bytes) {
    ports_.reserve(packet_bytes.size());
    for (const Bytes b : packet_bytes)
      ports_.push_back({PacketLink(bandwidth, latency, b), PacketLink(bandwidth, latency, b)});
  }

  void to_switch(std::size_t host, const Packet& p, bool forwarded, bool lost) override {
    PacketLink& up = ports_[host].up;
    const Time now = engine_.now();
    const Time at = (forwarded ? up.forward(now, p.packets) : up.send(now, p.packets)) +
                    program_.pipeline_latency();
    if (lost) return;
    SwitchProgram<Packet>* program = &program_;
    engine_.schedule_at(at, [program, p] { program->on_message(p, 0); });
  }

  void from_switch(std::size_t host, const Packet& p, bool lost) override {
    PacketLink& down = ports_[host].down;
    Packet q = p;
    if (down.queued_bytes(engine_.now()) > ecn_threshold_) q.ecn = true;
    const Time at = down.forward(engine_.now(), p.packets);
    if (lost) return;
    HostEnds* ends = &ends_;
    engine_.schedule_at(at, [ends, host, q] { ends->at_host(host, q); });
  }

 private:
  struct Ports {
    PacketLink up, down;  // host -> switch, switch -> host
  };
  Engine& engine_;
  HostEnds& ends_;
  SwitchProgram<Packet>& program_;
  double ecn_threshold_;
  std::vector<Ports> ports_;
};

}  // namespace mlsim::ina
