#pragma once
// Switch programs: code that runs on a switch node (an in-network aggregation pool, ...) and the
// network layer that hosts it there.
//
// A program receives every message addressed to its switch node and sends onward (to hosts, or
// back to itself) through the same MessageNetwork. Messages travel as transfers of the
// scenario's Network backend: one message = one transfer of its wire size from the sender's node
// to the addressee's node, so the program's traffic shares links (and their failures, bandwidth
// changes and statistics) with everything else on that backend. On delivery at a switch node the
// message waits the program's pipeline latency, then the program sees it; on delivery at a host it
// goes straight to the receiver attached there.
//
// Whether a backend can end and start transfers at a switch node is a property of the backend
// (BackendInfo::hosts_switch_programs in network_factory.hpp); a model that needs a switch
// program checks it at prepare time and refuses the scenario otherwise.
//
// A transfer that fails (no route left, e.g. a failed host link) is not delivered: the message
// goes to the `undelivered` handler, as a loss the model recovers from (or reports).
//
// Egress order (Egress::kFifo, the default): a node's port sends one message after another, as
// a NIC or a switch egress queue does. Messages from a node whose route starts on the same link
// are started one at a time, each when the previous one has left at that link's nominal
// bandwidth (kept in picoseconds, so a stream of 308-byte packets does not drift by rounding);
// the backend then times each transfer on its route. Without it (Egress::kShared), a window of
// N messages sent at once becomes N simultaneous transfers that a fluid backend shares max-min:
// all of them arrive together at the end of the window instead of one after another, which
// turns a pipelined window protocol into stop-and-go. The egress link is taken from a router of
// the nominal topology: after a link failure or a bandwidth change the pacing still uses the
// original first hop and speed, while the backend routes and times the transfer as it is now
// (a slowed link then shares between the paced messages, a rerouted one is paced on its old
// first hop).
//
// Delivery order: the messages from one node to another on one flow label (one route) are
// handed to the receiver in the order they were sent, as one queue per port keeps them on a
// real path. The backend alone does not: pacing uses the first link's speed, so on a route whose
// later link is slower (a ToR's uplink, then a host's access link in another rack) two messages
// overlap there, and a fluid backend may finish a short one sent second before a long one sent
// first (tests/network/switch_program_test.cpp, by hand; the analytic backend, which shares
// nothing, too). A message that arrives early waits for those sent before it on its path and is
// handed on at the instant the last of them arrives; a failed one no longer holds back those
// behind it. Messages on different flow labels may take different routes and keep no order.
//
// Memory: per path, the messages sent and not yet handed on; a path is forgotten when its last
// message is handed on (or lost), so it follows the messages in flight, not every (sender,
// addressee, flow label) a long run has used.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "sim_core/base/error.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/network/network.hpp"
#include "sim_core/network/routing.hpp"
#include "sim_core/network/topology.hpp"

namespace mlsim {

template <class Message>
class MessageReceiver {
 public:
  virtual ~MessageReceiver() = default;
  virtual void on_message(const Message& m, NodeId from) = 0;
};

template <class Message>
class SwitchProgram : public MessageReceiver<Message> {
 public:
  // From a message's arrival at the switch to the program seeing it (the switch pipeline).
  virtual Time pipeline_latency() const = 0;
};

enum class Egress { kFifo, kShared };

template <class Message>
class MessageNetwork {
  // A delivery callback holds this, a path and a ticket (the message waits in in_flight_): no
  // allocation. Messages are copied into the path's queue, so they stay small.
  static_assert(std::is_trivially_copyable_v<Message> && sizeof(Message) <= 32,
                "MessageNetwork carries small trivially copyable messages");

 public:
  using Undelivered = std::function<void(const Message&, NodeId from, NodeId to)>;

  // `engine`, `network` and `topology` must outlive this object.
  MessageNetwork(Engine& engine, Network& network, const Topology& topology,
                 Egress egress = Egress::kFifo)
      : engine_(engine),
        network_(network),
        topology_(topology),
        receivers_(topology.nodes().size(), nullptr),
        programs_(topology.nodes().size(), nullptr),
        fifo_(egress == Egress::kFifo) {
    if (fifo_) {
      router_ = std::make_unique<Router>(topology);
      ports_.resize(topology.links().size());
      for (LinkId l = 0; l < topology.links().size(); ++l)
        ports_[l].ps_per_byte = 1e12 / topology.link(l).bandwidth.bytes_per_s;
    }
  }
  MessageNetwork(const MessageNetwork&) = delete;
  MessageNetwork& operator=(const MessageNetwork&) = delete;

  // Hosts `program` on a switch node: it receives what is addressed to that node.
  void host(NodeId switch_node, SwitchProgram<Message>& program) {
    MLSIM_CHECK(topology_.node(switch_node).kind == NodeKind::kSwitch,
                "a switch program hosted on a host node");
    MLSIM_CHECK(!programs_.at(switch_node) && !receivers_.at(switch_node),
                "a node with two receivers");
    programs_[switch_node] = &program;
  }
  // Attaches the receiver of what is addressed to a host node.
  void attach(NodeId host_node, MessageReceiver<Message>& receiver) {
    MLSIM_CHECK(topology_.node(host_node).kind == NodeKind::kHost,
                "a host receiver attached to a switch node");
    MLSIM_CHECK(!programs_.at(host_node) && !receivers_.at(host_node), "a node with two receivers");
    receivers_[host_node] = &receiver;
  }
  void on_undelivered(Undelivered f) { undelivered_handler_ = std::move(f); }

  // Sends `m` now as one transfer of `wire_bytes` from `from` to `to` (which must have a receiver
  // or a program). `flow_label` picks among equal-cost paths.
  void send(NodeId from, NodeId to, Bytes wire_bytes, const Message& m,
            std::uint64_t flow_label = 0) {
    MLSIM_CHECK(programs_.at(to) || receivers_.at(to), "a message to a node nobody listens on");
    ++sent_;
    const std::uint64_t ticket = next_ticket_++;
    in_flight_[PathKey{from, to, flow_label}].push_back({ticket, false, m});
    if (fifo_ && from != to) {
      const auto route = router_->route(from, to, flow_label);
      MLSIM_CHECK(route.has_value(), "no route in the nominal topology");
      const LinkId l = route->links.front();
      Port& port = ports_[l];
      const std::int64_t now_ps = engine_.now().count_ns() * 1000;
      const auto serialise = static_cast<std::int64_t>(
          std::llround(static_cast<double>(wire_bytes.count) * port.ps_per_byte));
      if (port.waiting.empty() && port.free_ps <= now_ps) {
        port.free_ps = now_ps + serialise;
      } else {
        port.waiting.push_back({m, from, to, wire_bytes, flow_label, serialise, ticket});
        port.waiting_bytes += wire_bytes.count;
        arm(l);
        return;
      }
    }
    start(from, to, wire_bytes, flow_label, ticket);
  }

  // Bytes queued at the egress port a message from `from` to `to` would leave by: not yet
  // serialised at that link's nominal speed (what an ECN threshold compares against). Always 0
  // with Egress::kShared.
  double egress_backlog_bytes(NodeId from, NodeId to, std::uint64_t flow_label = 0) {
    if (!fifo_ || from == to) return 0;
    const auto route = router_->route(from, to, flow_label);
    if (!route) return 0;
    const Port& port = ports_[route->links.front()];
    const std::int64_t now_ps = engine_.now().count_ns() * 1000;
    const double leaving =
        port.free_ps > now_ps ? static_cast<double>(port.free_ps - now_ps) / port.ps_per_byte : 0;
    return leaving + static_cast<double>(port.waiting_bytes);
  }

  std::uint64_t sent() const { return sent_; }
  std::uint64_t undelivered() const { return undelivered_; }
  // Paths (sender, addressee, flow label) with a message sent and not yet handed on.
  std::size_t paths_in_flight() const { return in_flight_.size(); }
  Network& network() { return network_; }

 private:
  struct Waiting {
    Message m;
    NodeId from, to;
    Bytes bytes;
    std::uint64_t label;
    std::int64_t serialise_ps;
    std::uint64_t ticket;
  };
  // One path (sender, addressee, flow label) whose messages are handed on in send order.
  struct PathKey {
    NodeId from, to;
    std::uint64_t label;
    bool operator==(const PathKey&) const = default;
  };
  struct PathHash {
    std::size_t operator()(const PathKey& k) const {
      std::uint64_t h = k.label * 0x9e3779b97f4a7c15ULL;
      h ^= (static_cast<std::uint64_t>(k.from) << 32) ^ static_cast<std::uint64_t>(k.to);
      return static_cast<std::size_t>(h * 0xff51afd7ed558ccdULL);
    }
  };
  // A message sent on a path and not yet handed on: `arrived` once the backend delivered it.
  struct InFlight {
    std::uint64_t ticket;
    bool arrived;
    Message m;
  };
  // A node's egress onto one link: when its last message finishes leaving, and what waits.
  struct Port {
    double ps_per_byte = 0;
    std::int64_t free_ps = 0;
    bool armed = false;
    std::int64_t waiting_bytes = 0;
    std::deque<Waiting> waiting;
  };
  void arm(LinkId l) {
    Port& port = ports_[l];
    if (port.armed) return;
    port.armed = true;
    const std::int64_t start_ns = (port.free_ps + 999) / 1000;
    engine_.schedule_at(std::max(engine_.now(), Time::ns(start_ns)), [this, l] { leave(l); });
  }
  // The head of a port's queue starts now (its turn came).
  void leave(LinkId l) {
    Port& port = ports_[l];
    port.armed = false;
    const Waiting w = port.waiting.front();
    port.waiting.pop_front();
    port.waiting_bytes -= w.bytes.count;
    port.free_ps = std::max(port.free_ps, engine_.now().count_ns() * 1000) + w.serialise_ps;
    if (!port.waiting.empty()) arm(l);
    start(w.from, w.to, w.bytes, w.label, w.ticket);
  }
  void start(NodeId from, NodeId to, Bytes wire_bytes, std::uint64_t flow_label,
             std::uint64_t ticket) {
    network_.start_transfer(
        from, to, wire_bytes,
        [this, key = PathKey{from, to, flow_label}, ticket](const TransferResult& r) {
          arrived(key, ticket, r.failed);
        },
        flow_label);
  }
  // The backend ended the transfer of message `ticket` on `key`: hands on, in send order, every
  // message of the path that has arrived with none sent before it still on the way. A path whose
  // queue empties is erased, so the map holds the paths with messages in flight, not every path
  // ever used (a long run over many job placements and flow labels would otherwise keep them all).
  void arrived(const PathKey& key, std::uint64_t ticket, bool failed) {
    {
      const auto path = in_flight_.find(key);
      MLSIM_CHECK(path != in_flight_.end(), "a message delivered twice or never sent");
      auto& queue = path->second;
      auto it = std::find_if(queue.begin(), queue.end(),
                             [ticket](const InFlight& f) { return f.ticket == ticket; });
      MLSIM_CHECK(it != queue.end(), "a message delivered twice or never sent");
      if (failed) {
        const Message m = it->m;
        queue.erase(it);
        undelivered(m, key.from, key.to);
      } else {
        it->arrived = true;
      }
    }
    // The path is looked up anew for each message: a receiver (or the undelivered handler) may
    // send on any path while this runs, this one included, so no reference is held across it.
    for (;;) {
      const auto path = in_flight_.find(key);
      if (path == in_flight_.end()) return;
      auto& queue = path->second;
      if (queue.empty()) {
        in_flight_.erase(path);
        return;
      }
      if (!queue.front().arrived) return;
      const Message m = queue.front().m;
      queue.pop_front();
      deliver(m, key.from, key.to);
    }
  }
  void deliver(const Message& m, NodeId from, NodeId to) {
    if (MessageReceiver<Message>* r = receivers_[to]) {
      r->on_message(m, from);
      return;
    }
    SwitchProgram<Message>* p = programs_[to];
    const Time latency = p->pipeline_latency();
    if (latency == Time::zero())
      p->on_message(m, from);
    else
      engine_.schedule_in(latency, [p, m, from] { p->on_message(m, from); });
  }
  void undelivered(const Message& m, NodeId from, NodeId to) {
    ++undelivered_;
    if (undelivered_handler_) undelivered_handler_(m, from, to);
  }

  Engine& engine_;
  Network& network_;
  const Topology& topology_;
  std::vector<MessageReceiver<Message>*> receivers_;
  std::vector<SwitchProgram<Message>*> programs_;
  Undelivered undelivered_handler_;
  std::uint64_t sent_ = 0, undelivered_ = 0;
  bool fifo_;
  std::unique_ptr<Router> router_;  // the nominal topology's first hops (kFifo)
  std::vector<Port> ports_;         // by link (kFifo)
  std::uint64_t next_ticket_ = 0;
  std::unordered_map<PathKey, std::deque<InFlight>, PathHash> in_flight_;
};

}  // namespace mlsim
