#pragma once
// The `ns3` backend: mlsim's topology as ns-3 nodes, point-to-point links and drop-tail queues;
// each transfer is a TCP bulk flow or a paced UDP flow (RDMA-like: no congestion control)
// following mlsim's route, delivered when its last byte reaches the receiver.
//
// Clock: a conservative bridge. mlsim's engine owns time; ns-3 runs only while packets are in
// flight, never past the engine's next event, and stops right after the event that completes a
// flow, so every delivery reaches the engine at its exact nanosecond and whatever the delivery
// triggers starts at that date in ns-3 too. The alternative (ns-3 owning the clock, the engine's
// events rescheduled through Simulator::Schedule) would tie every model to ns-3; the bridge keeps
// the models unchanged and costs one ns-3 Stop/Run per engine event while flows are active.
//
// ns-3's Simulator is a process-wide singleton: at most one Ns3Network at a time per process.
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "sim_core/network/network.hpp"
#include "sim_core/network/ns3/packet_simulation.hpp"
#include "sim_core/network/routing.hpp"

namespace mlsim {

struct Ns3Options {
  ns3_bridge::PacketOptions packets;
  // Warn on stderr once the packets estimated from bytes / MTU exceed this (packet-level
  // simulation runs at some 30-50 k packets per wall second).
  std::uint64_t warn_packets = 1'000'000;
};

// Data packets needed to move `bytes` with the given MTU and TCP/IP headers.
std::uint64_t estimated_packets(Bytes bytes, std::uint32_t mtu);

class Ns3Network final : public Network, private ExternalClock {
 public:
  Ns3Network(Engine& engine, const Topology& topology, Ns3Options options);
  ~Ns3Network() override;
  Ns3Network(const Ns3Network&) = delete;
  Ns3Network& operator=(const Ns3Network&) = delete;

  std::string_view backend_name() const override { return "ns3"; }
  TransferId start_transfer(NodeId src, NodeId dst, Bytes bytes, DeliveryCallback done,
                            std::uint64_t flow_label = 0) override;
  bool cancel_transfer(TransferId id) override;
  void set_link_bandwidth(LinkId link, Bandwidth bw) override;
  // One point-to-point channel carries both directions of a cable: a change applies to both
  // (the events loader rejects one-way latency changes on this backend).
  void set_link_latency(LinkId link, Time latency) override;
  bool latency_per_direction() const override { return false; }
  void set_link_up(LinkId link, bool up) override;
  LinkStats link_stats(LinkId link) const override;
  NetworkTotals totals() const override { return totals_; }

  ns3_bridge::PacketCounters packet_counters() const { return packets_.counters(); }
  std::uint64_t estimated_packets_so_far() const { return estimated_packets_; }

 private:
  struct Transfer {
    NodeId src = 0, dst = 0;
    Bytes bytes;
    Time started;
    DeliveryCallback done;
    std::uint64_t label = 0;
    std::vector<LinkId> path, reverse_path;
    bool in_ns3 = false;      // a flow runs in ns-3 (not a local or empty transfer)
    bool completing = false;  // its delivery or failure event is scheduled
  };
  struct LinkState {
    int active = 0;
    Time busy_since;
    double busy_seconds = 0;
    std::int64_t bytes_carried = 0;
  };

  Time next_event_time() override;
  void advance_to(Time t) override;

  std::int64_t ns3_time(Time t) const { return (t - origin_).count_ns(); }
  Time engine_time(std::int64_t ns3_ns) const { return origin_ + Time::ns(ns3_ns); }
  void sync_ns3_clock();
  std::vector<LinkId> route(NodeId src, NodeId dst, std::uint64_t label);
  std::vector<LinkId> reverse_of(const std::vector<LinkId>& path, NodeId src, NodeId dst,
                                 std::uint64_t label);
  void mark_active(const std::vector<LinkId>& path, int delta);
  void schedule_finish(TransferId id, Time at, bool failed);
  void finish(TransferId id, bool failed);

  Engine& engine_;
  const Topology& topology_;
  Ns3Options options_;
  Router router_;
  ns3_bridge::PacketSimulation packets_;
  Time origin_;  // engine time of ns-3's time zero
  std::unordered_map<TransferId, Transfer> transfers_;
  std::vector<LinkState> links_;
  std::size_t flows_in_ns3_ = 0;
  std::uint64_t estimated_packets_ = 0;
  bool warned_ = false;
  TransferId next_id_ = 1;
  NetworkTotals totals_;
};

}  // namespace mlsim
