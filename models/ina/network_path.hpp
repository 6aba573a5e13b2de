#pragma once
// The data path over the scenario's Network backend (data_path.hpp): the policy with its
// aggregator pool is a switch program hosted on a switch node (MessageNetwork,
// sim_core/network/switch_program.hpp), and every burst of k packets is one transfer of k wire
// packets' bytes between a host node and that switch node. Workers' chunks go to the switch;
// the program aggregates and sends results (or partials, fallbacks) onward as transfers; a PS's
// results come back to the switch, which multicasts them as one transfer per worker.
//
// What changes against the packet path, by construction of the backends:
// - Timing is the backend's: on flow, bursts sharing a link share it max-min (fluid) instead of
//   queueing FIFO, and a burst's latency is paid once per transfer; a lone packet-accurate burst
//   takes the same time as on the packet path (latency + bytes / bandwidth, rounded to the ns).
//   In batched mode the switch does not cut through: a burst forwarded by the switch costs k
//   serialisation times on the egress link, where the packet path pipelines it (one).
// - Queues: messages leave each port FIFO (MessageNetwork's Egress::kFifo), and ECN marks a
//   burst that finds more than the threshold queued at the switch's egress port, as on the packet
//   path; the backend itself may queue further (ns-3) or share (flow) on the links beyond.
// - A packet the loss model drops is not sent at all (it occupies no link).
// - A transfer the backend fails (no route left after a link failure) is undelivered, counted,
//   and recovered like a loss by the senders' timeouts.
// Hosts can sit anywhere in the topology (e.g. two racks with the program on one ToR); the
// traffic then crosses the links between them.
#include <memory>
#include <vector>

#include "models/ina/data_path.hpp"
#include "sim_core/network/switch_program.hpp"

namespace mlsim::ina {

class NetworkPath final : public DataPath {
 public:
  // `host_nodes[h]` is the topology node of host h, whose packets are `packet_bytes[h]` on the
  // wire (its job's format); the program is hosted on `switch_node`.
  NetworkPath(Engine& engine, Network& network, const Topology& topology, NodeId switch_node,
              std::vector<NodeId> host_nodes, HostEnds& ends, SwitchProgram<Packet>& program,
              std::vector<Bytes> packet_bytes, double ecn_threshold_bytes)
      : messages_(engine, network, topology),
        switch_node_(switch_node),
        host_nodes_(std::move(host_nodes)),
        packet_bytes_(std::move(packet_bytes)),
        ecn_threshold_(ecn_threshold_bytes) {
    messages_.host(switch_node_, program);
    endpoints_.reserve(host_nodes_.size());
    for (std::size_t h = 0; h < host_nodes_.size(); ++h) {
      endpoints_.push_back(std::make_unique<Endpoint>(ends, h));
      messages_.attach(host_nodes_[h], *endpoints_.back());
    }
    messages_.on_undelivered(
        [this](const Packet& p, NodeId, NodeId) { undelivered_packets_ += p.packets; });
  }

  void to_switch(std::size_t host, const Packet& p, bool /*forwarded*/, bool lost) override {
    if (lost) return;
    messages_.send(host_nodes_[host], switch_node_, wire_bytes(host, p), p);
  }
  void from_switch(std::size_t host, const Packet& p, bool lost) override {
    Packet q = p;
    if (messages_.egress_backlog_bytes(switch_node_, host_nodes_[host]) > ecn_threshold_)
      q.ecn = true;
    if (lost) return;
    messages_.send(switch_node_, host_nodes_[host], wire_bytes(host, q), q);
  }
  std::uint64_t undelivered_packets() const override { return undelivered_packets_; }

 private:
  class Endpoint final : public MessageReceiver<Packet> {
   public:
    Endpoint(HostEnds& ends, std::size_t host) : ends_(ends), host_(host) {}
    void on_message(const Packet& p, NodeId) override { ends_.at_host(host_, p); }

   private:
    HostEnds& ends_;
    std::size_t host_;
  };
  Bytes wire_bytes(std::size_t host, const Packet& p) const {
    return Bytes{packet_bytes_[host].count * p.packets};
  }

  MessageNetwork<Packet> messages_;
  NodeId switch_node_;
  std::vector<NodeId> host_nodes_;
  std::vector<Bytes> packet_bytes_;  // per host
  double ecn_threshold_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  std::uint64_t undelivered_packets_ = 0;
};

}  // namespace mlsim::ina
