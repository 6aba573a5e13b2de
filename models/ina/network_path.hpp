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
#include <utility>
#include <vector>

#include "models/ina/data_path.hpp"
#include "sim_core/base/error.hpp"
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
    host_program(switch_node_, program);
    endpoints_.reserve(host_nodes_.size());
    for (std::size_t h = 0; h < host_nodes_.size(); ++h) {
      endpoints_.push_back(std::make_unique<Endpoint>(ends, h));
      messages_.attach(host_nodes_[h], *endpoints_.back());
    }
    messages_.on_undelivered(
        [this](const Packet& p, NodeId, NodeId) { undelivered_packets_ += p.packets; });
  }

  void to_switch(std::size_t host, const Packet& p, bool /*forwarded*/, bool lost) override {
    to_switch_at(host, switch_node_, p, lost);
  }
  void from_switch(std::size_t host, const Packet& p, bool lost) override {
    from_switch_at(switch_node_, host, p, lost);
  }
  // Two-level aggregation (aggregation_levels.hpp): a rack's switch hosts a program too
  // (`program` must outlive the path), and bursts go between hosts and any hosting switch, and
  // between switches (a rack's partial up to the root, a result down).
  void host_program(NodeId switch_node, SwitchProgram<Packet>& program) {
    messages_.host(switch_node, program);
  }
  void to_switch_at(std::size_t host, NodeId sw, const Packet& p, bool lost) {
    if (lost) return;
    send(host_nodes_[host], sw, wire_bytes(host, p), p);
  }
  void from_switch_at(NodeId sw, std::size_t host, const Packet& p, bool lost) {
    Packet q = p;
    if (messages_.egress_backlog_bytes(sw, host_nodes_[host]) > ecn_threshold_) q.ecn = true;
    if (lost) return;
    send(sw, host_nodes_[host], wire_bytes(host, q), q);
  }
  // `host` names the job whose packet format the burst has (any of its hosts). ECN is marked
  // on the way down only, as a result's copies to the workers are.
  void between_switches(NodeId from, NodeId to, std::size_t host, const Packet& p, bool down) {
    Packet q = p;
    if (down && messages_.egress_backlog_bytes(from, to) > ecn_threshold_) q.ecn = true;
    send(from, to, wire_bytes(host, q), q);
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

  // MessageNetwork hands on the bursts between two nodes in the order they were sent
  // (switch_program.hpp, "Delivery order"): a rack's flushed partial and the retransmission
  // behind it reach the PS in that order, as on a real path.
  void send(NodeId from, NodeId to, Bytes bytes, const Packet& p) {
    messages_.send(from, to, bytes, p);
  }

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
