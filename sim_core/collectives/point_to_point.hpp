#pragma once
// Point-to-point messages through the collective layer: each send() is one send_recv call
// (Operation::kSendRecv, Algorithm::kDirect) between two nodes, as ncclSend/ncclRecv calls on a
// communicator, so it pays what every collective pays (docs/collectives.md, "Costs"): the
// per-call launch latency, the protocol chosen for its size (bytes / efficiency on the wire,
// hop latency after the last byte), the sender's per-message host overhead and message latency,
// and it moves its bytes through the scenario's Network backend like any collective's message.
// All costs are zero by default: a send is then exactly one network transfer.
//
// One HostSendClock is shared by every call of a PointToPoint, so a host pays its per-message
// overhead one message after another across all of them (one communication thread per host,
// as the training core's strategies do). A call whose transfer fails never completes (its
// callback never runs, as for any collective: what depends on it never happens); it is counted
// in failed_transfers().
//
// Calls are kept in slots and their Collective rebuilt in a slot once its callback returned, so
// a model with a bounded number of messages in flight allocates a bounded number of slots.
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "sim_core/collectives/collective.hpp"
#include "sim_core/collectives/host_send_clock.hpp"

namespace mlsim::collectives {

class PointToPoint {
 public:
  using Done = InlineFunction<void(const CollectiveResult&), 48>;
  struct Options {
    CostModel costs;  // launch, protocols (several protocols need the link conditions)
    HostCosts host;   // message_overhead, message_latency (send_clock is set here)
    std::uint64_t flow_label = 0;
  };
  // `links` must outlive this when the cost model enables more than one protocol (the protocol
  // is chosen per call from the route between the two nodes, as for any collective).
  PointToPoint(Engine& engine, Network& network, Options options,
               const LinkConditions* links = nullptr);
  PointToPoint(const PointToPoint&) = delete;
  PointToPoint& operator=(const PointToPoint&) = delete;
  ~PointToPoint();  // cancels the calls in flight

  // Sends `bytes` from `from` to `to` (distinct nodes) now; `done` runs when they arrived. The
  // call's ECMP label is Options::flow_label, or `flow_label` where given (a caller that routes
  // each message as another simulator does, e.g. workload/flow_labels.hpp's message_label).
  void send(NodeId from, NodeId to, Bytes bytes, Done done) {
    send(from, to, bytes, std::move(done), options_.flow_label);
  }
  void send(NodeId from, NodeId to, Bytes bytes, Done done, std::uint64_t flow_label);

  // Runs at the first failed transfer of any call (a link down with no route left), from inside
  // the network's delivery, as Collective::set_failure_callback: the callee must not destroy
  // this object from it. Set before the calls it should watch.
  using Failed = InlineFunction<void(), 16>;
  void set_failure_callback(Failed f) { on_failed_ = std::move(f); }

  // Cancels every call in flight (Collective::cancel: their transfers cancelled in the network,
  // their events dropped); their callbacks never run. The destructor does the same.
  void cancel();

  // Traffic so far over every call: payload handed to the network, payload delivered, what
  // the network carried (payload / efficiency), calls made, transfers that failed.
  std::int64_t bytes_sent() const;
  std::int64_t bytes_delivered() const;
  std::int64_t wire_bytes() const;
  // Payload of cancelled calls that was in flight when they were cancelled.
  std::int64_t bytes_cancelled() const { return cancelled_; }
  std::uint64_t calls() const { return calls_; }
  std::uint64_t failed_transfers() const;
  // Calls whose callback has not run yet.
  std::size_t in_flight() const { return slots_.size() - free_.size(); }

 private:
  struct Slot {
    std::unique_ptr<Collective> collective;
    Done done;
  };
  void finished(std::size_t slot, const CollectiveResult& r);

  Engine& engine_;
  Network& network_;
  Options options_;
  const LinkConditions* links_;
  HostSendClock clock_;
  std::deque<Slot> slots_;         // stable addresses: a callback may send again
  std::vector<std::size_t> free_;  // slots whose callback returned
  // Of the calls that finished or were cancelled.
  std::int64_t sent_ = 0, delivered_ = 0, wire_ = 0, cancelled_ = 0;
  std::uint64_t failed_ = 0;  // transfers of cancelled calls that had failed
  std::uint64_t calls_ = 0;
  Failed on_failed_;
};

}  // namespace mlsim::collectives
