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
#include <algorithm>
#include <deque>
#include <map>
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
      endpoints_.push_back(std::make_unique<Endpoint>(*this, ends, h));
      messages_.attach(host_nodes_[h], *endpoints_.back());
    }
    messages_.on_undelivered([this](const Packet& p, NodeId from, NodeId to) {
      undelivered_packets_ += p.packets;
      if (in_order_) arrived(from, to, p, /*delivered=*/false);
    });
  }

  void to_switch(std::size_t host, const Packet& p, bool /*forwarded*/, bool lost) override {
    to_switch_at(host, switch_node_, p, lost);
  }
  // Delivers the bursts between two nodes in the order they were sent (two-level aggregation).
  // On a route whose first link is faster than a later one (a switch's uplink, then a host's
  // access link in another rack), the egress paces bursts at the first link's speed, so they
  // overlap on the slower link, and the flow backend may then end two of them at one instant
  // in either order. A rack's flushed partial and the retransmission behind it would then reach
  // the PS swapped, which a PS cannot untangle (it would count the worker twice); a real path
  // keeps them in order (one queue per port). Off by default: the one-switch runs stay as they
  // were measured.
  void keep_order() { in_order_ = true; }
  void from_switch(std::size_t host, const Packet& p, bool lost) override {
    from_switch_at(switch_node_, host, p, lost);
  }
  // Two-level aggregation (aggregation_levels.hpp): a rack's switch hosts a program too
  // (`program` must outlive the path), and bursts go between hosts and any hosting switch, and
  // between switches (a rack's partial up to the root, a result down).
  void host_program(NodeId switch_node, SwitchProgram<Packet>& program) {
    programs_.push_back(std::make_unique<Program>(*this, switch_node, program));
    messages_.host(switch_node, *programs_.back());
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
    Endpoint(NetworkPath& path, HostEnds& ends, std::size_t host)
        : path_(path), ends_(ends), host_(host) {}
    void on_message(const Packet& p, NodeId from) override {
      if (path_.in_order_)
        path_.arrived(from, path_.host_nodes_[host_], p, /*delivered=*/true);
      else
        deliver(p, from);
    }
    void deliver(const Packet& p, NodeId) { ends_.at_host(host_, p); }

   private:
    NetworkPath& path_;
    HostEnds& ends_;
    std::size_t host_;
  };
  // A hosted program, behind the path (keep_order).
  class Program final : public SwitchProgram<Packet> {
   public:
    Program(NetworkPath& path, NodeId node, SwitchProgram<Packet>& inner)
        : path_(path), node_(node), inner_(inner) {}
    void on_message(const Packet& p, NodeId from) override {
      if (path_.in_order_)
        path_.arrived(from, node_, p, /*delivered=*/true);
      else
        inner_.on_message(p, from);
    }
    Time pipeline_latency() const override { return inner_.pipeline_latency(); }
    SwitchProgram<Packet>& inner() { return inner_; }
    NodeId node() const { return node_; }

   private:
    NetworkPath& path_;
    NodeId node_;
    SwitchProgram<Packet>& inner_;
  };
  // keep_order: per (from, to), the bursts sent and not yet handed on, in send order; one that
  // arrives early waits for those sent before it (or for their failure).
  struct InFlight {
    Packet p;
    bool arrived = false;
  };
  static bool same(const Packet& a, const Packet& b) {
    return a.seq == b.seq && a.sum == b.sum && a.bitmap == b.bitmap && a.job == b.job &&
           a.worker == b.worker && a.packets == b.packets && a.priority == b.priority &&
           a.kind == b.kind && a.resend == b.resend && a.ecn == b.ecn && a.evicted == b.evicted &&
           a.fell_back == b.fell_back;
  }
  void send(NodeId from, NodeId to, Bytes bytes, const Packet& p) {
    if (in_order_) pending_[{from, to}].push_back({p, false});
    messages_.send(from, to, bytes, p);
  }
  // `p` from `from` reached `to` (or failed on the way): hands on, in send order, every burst
  // of the pair that has arrived and has none sent before it still on the way.
  void arrived(NodeId from, NodeId to, const Packet& p, bool delivered) {
    auto& queue = pending_[{from, to}];
    auto it = std::find_if(queue.begin(), queue.end(),
                           [&](const InFlight& f) { return !f.arrived && same(f.p, p); });
    MLSIM_CHECK(it != queue.end(), "a burst that was not sent on this pair");
    if (delivered)
      it->arrived = true;
    else
      queue.erase(it);  // undelivered: counted; nothing behind it waits for it
    while (!queue.empty() && queue.front().arrived) {
      const Packet next = queue.front().p;
      queue.pop_front();
      hand_on(from, to, next);
    }
  }
  void hand_on(NodeId from, NodeId to, const Packet& p) {
    for (const auto& prog : programs_)
      if (prog->node() == to) return prog->inner().on_message(p, from);
    for (std::size_t h = 0; h < host_nodes_.size(); ++h)
      if (host_nodes_[h] == to) return endpoints_[h]->deliver(p, from);
    MLSIM_CHECK(false, "a burst for a node without a receiver");
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
  std::vector<std::unique_ptr<Program>> programs_;
  std::uint64_t undelivered_packets_ = 0;
  bool in_order_ = false;
  std::map<std::pair<NodeId, NodeId>, std::deque<InFlight>> pending_;
};

}  // namespace mlsim::ina
