#pragma once
// Per-participant send queues with a window: the one place where collective algorithms touch the
// network. Algorithms hand messages over; the sender starts at most `window` transfers per
// participant at a time (0 = no limit), in the order they were handed over, and reports each
// delivered message to the algorithm.
//
// Costs (costs.hpp), all zero by default: a message first waits for its sender's CPU/NIC
// overhead (paid one message after another per participant, or per host on a shared
// HostSendClock), then for the message latency (overlapping other messages), then moves bytes /
// efficiency on the wire, and is reported hop_latency after its last byte arrived; its send slot
// stays taken until then. A per-byte copy cost (HostCosts::per_byte_ns) is booked on the same
// clock right after the overhead and runs beside the transfer: the message is reported no
// earlier than its copy ends plus the message latency (plus hop_latency).
//
// cancel() (and the destructor) cancel everything the sender has in flight: its transfers in the
// network (each then ends failed there, so the network's bytes stay accounted) and its pending
// engine events (delayed starts, hop latencies, and the events its collective deferred through
// defer()). Nothing it handed out calls back afterwards: the network's failure callbacks of the
// cancelled transfers find the sender's guard disowned and do nothing.
#include <boost/smart_ptr/intrusive_ptr.hpp>
#include <boost/smart_ptr/intrusive_ref_counter.hpp>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "sim_core/collectives/costs.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/network/network.hpp"

namespace mlsim::collectives {

// A message between participants (indices into the collective's participant list).
struct Message {
  std::uint32_t from = 0, to = 0;
  std::uint64_t tag = 0;  // what the algorithm needs to know on delivery (step, piece, phase)
  Bytes bytes;
};

class MessageSink {
 public:
  virtual ~MessageSink() = default;
  virtual void on_message(const Message& m) = 0;
};

// The ECMP label of every transfer from participant `from` to `to`: one label per (src, dst)
// pair, like one connection per peer. Planners use it to know which route a message will take.
std::uint64_t transfer_label(std::uint64_t flow_label, std::uint32_t from, std::uint32_t to);

class Sender {
 public:
  // `nodes[i]` is participant i's node. Engine and network must outlive the sender. Senders
  // from index `hosts` on (a switch reducing in the network) have no window and no host
  // overhead.
  Sender(Engine& engine, Network& network, std::vector<NodeId> nodes, int window,
         std::uint64_t flow_label, const ProtocolCost& protocol = {}, const HostCosts& host = {},
         std::uint32_t hosts = std::numeric_limits<std::uint32_t>::max());
  ~Sender();
  Sender(const Sender&) = delete;
  Sender& operator=(const Sender&) = delete;
  void set_sink(MessageSink* sink) { sink_ = sink; }
  // Runs after each transfer that fails in the network (no route left), which the sink never
  // hears of; not for the transfers cancel() ends.
  void set_on_failed(InlineFunction<void(), 16> f) { on_failed_ = std::move(f); }
  // The protocol's costs for messages handed over from now on (before the first one).
  void set_protocol(const ProtocolCost& protocol);

  void send(const Message& m);

  // Runs `f` at `at` as an engine event that cancel() drops (an algorithm's or a collective's
  // own delays: launch latency, parameter-server aggregation).
  template <typename F>
  void defer(Time at, F f) {
    const std::uint32_t slot = track(Bytes{});
    pending_[slot].event = engine_.schedule_at(at, [this, slot, f] {
      release(slot);
      f();
    });
  }

  // Cancels every transfer in flight and drops every pending event and queued message; their
  // payload (handed to the network or waiting to be) is counted in bytes_cancelled(). The
  // sink hears of none of them. Messages sent afterwards start afresh.
  void cancel();
  // Transfers and events not yet ended (0 once cancelled).
  std::size_t pending() const { return pending_.size() - free_pending_.size(); }

  // Payload handed to the network, and what it put on the wire (payload / efficiency).
  Bytes bytes_sent() const { return bytes_sent_; }
  Bytes wire_bytes() const { return wire_bytes_; }
  // Payload of the messages delivered so far.
  Bytes bytes_delivered() const { return bytes_delivered_; }
  // Payload of the messages cancelled after they were handed to the network (bytes_sent counts
  // them): bytes_sent = bytes_delivered + bytes_failed + bytes_cancelled + payload in flight.
  Bytes bytes_cancelled() const { return bytes_cancelled_; }
  Bytes bytes_failed() const { return bytes_failed_; }
  std::uint64_t transfers() const { return transfers_; }
  std::uint64_t failed() const { return failed_; }

 private:
  // Messages waiting for a send slot, per participant: a vector consumed from `head`.
  struct Queue {
    std::vector<Message> messages;
    std::size_t head = 0;
    bool empty() const { return head == messages.size(); }
  };

  // What cancel() must end: a message's transfer in the network (transfer != 0) or an engine
  // event (a delayed start, a hop latency, a deferred call). Slots are reused.
  struct Pending {
    TransferId transfer = 0;
    EventHandle event;
    Bytes payload;  // of the message, counted in bytes_sent_; 0 for deferred calls
    Time copied;    // the sender's copy of the payload ends then (+ message latency)
    bool live = false;
  };
  // Owned by the sender and by every network callback it handed out (not thread-safe counts:
  // one engine runs on one thread); owner is null once those callbacks must do nothing.
  struct Guard : boost::intrusive_ref_counter<Guard, boost::thread_unsafe_counter> {
    explicit Guard(Sender* s) : owner(s) {}
    Sender* owner;
  };

  std::uint32_t track(Bytes payload);
  void release(std::uint32_t slot);
  void pump(std::uint32_t participant);
  void transmit(const Message& m);
  void start_transfer(const Message& m, Bytes wire, std::uint32_t slot);
  void on_arrived(const Message& m, std::uint32_t slot, bool failed);
  void on_delivered(const Message& m, std::uint32_t slot, bool failed);

  Engine& engine_;
  Network& network_;
  std::vector<NodeId> nodes_;
  InlineFunction<void(), 16> on_failed_;
  std::uint32_t window_;
  std::uint32_t hosts_;
  std::uint64_t flow_label_;
  Time hop_latency_;
  double efficiency_;
  Time message_overhead_;
  Time message_latency_;
  double per_byte_ns_;
  HostSendClock* send_clock_;  // null: host_free_ below
  bool unlimited_;             // window 0: no queues, no slot counts
  MessageSink* sink_ = nullptr;
  std::vector<Queue> queues_;             // empty when unlimited_
  std::vector<std::uint32_t> in_flight_;  // empty when unlimited_
  std::vector<Time> host_free_;           // when each participant's CPU/NIC overhead is paid up to
  std::vector<Pending> pending_;
  std::vector<std::uint32_t> free_pending_;
  boost::intrusive_ptr<Guard> guard_;
  Bytes bytes_sent_, wire_bytes_, bytes_delivered_, bytes_failed_, bytes_cancelled_;
  std::uint64_t transfers_ = 0, failed_ = 0;
};

}  // namespace mlsim::collectives
