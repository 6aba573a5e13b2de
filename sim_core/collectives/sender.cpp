#include "sim_core/collectives/sender.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim_core/base/error.hpp"
#include "sim_core/engine/random.hpp"

namespace mlsim::collectives {

std::uint64_t transfer_label(std::uint64_t flow_label, std::uint32_t from, std::uint32_t to) {
  return mix64(flow_label ^ ((std::uint64_t{from} << 32) | to));
}

Sender::Sender(Engine& engine, Network& network, std::vector<NodeId> nodes, int window,
               std::uint64_t flow_label, const ProtocolCost& protocol, const HostCosts& host,
               std::uint32_t hosts)
    : engine_(engine),
      network_(network),
      nodes_(std::move(nodes)),
      window_(window <= 0 ? std::numeric_limits<std::uint32_t>::max()
                          : static_cast<std::uint32_t>(window)),
      hosts_(hosts),
      flow_label_(flow_label),
      hop_latency_(protocol.hop_latency),
      efficiency_(protocol.efficiency),
      message_overhead_(host.message_overhead),
      message_latency_(host.message_latency),
      per_byte_ns_(host.per_byte_ns),
      send_clock_(host.send_clock),
      unlimited_(window <= 0),
      guard_(new Guard(this)) {  // owned from here on (intrusive_ptr has no make function)
  // Without a window no message ever waits for a send slot: no queues to keep (a training job
  // builds a collective per gradient chunk).
  if (!unlimited_) {
    queues_.resize(nodes_.size());
    in_flight_.assign(nodes_.size(), 0);
  }
  MLSIM_CHECK(efficiency_ > 0 && efficiency_ <= 1, "protocol efficiency outside (0, 1]");
  MLSIM_CHECK(per_byte_ns_ >= 0, "negative per-byte host cost");
  if ((message_overhead_ > Time::zero() || per_byte_ns_ > 0) && send_clock_ == nullptr)
    host_free_.assign(nodes_.size(), Time::zero());
}

Sender::~Sender() {
  cancel();
  guard_->owner = nullptr;
}

std::uint32_t Sender::track(Bytes payload) {
  std::uint32_t slot = 0;
  if (free_pending_.empty()) {
    slot = static_cast<std::uint32_t>(pending_.size());
    pending_.emplace_back();
  } else {
    slot = free_pending_.back();
    free_pending_.pop_back();
  }
  pending_[slot] = Pending{0, EventHandle{}, payload, Time::zero(), true};
  return slot;
}

void Sender::release(std::uint32_t slot) {
  pending_[slot].live = false;
  free_pending_.push_back(slot);
}

void Sender::cancel() {
  // A message waits in a queue only while its sender has one in flight: nothing pending,
  // nothing to end (and no callback out there to disown).
  if (pending() == 0) return;
  // Callbacks already handed to the network (the failures reported for the transfers cancelled
  // below among them) find the old guard disowned; later messages get a new one.
  guard_->owner = nullptr;
  guard_ = boost::intrusive_ptr<Guard>(new Guard(this));
  for (Pending& p : pending_) {
    if (!p.live) continue;
    if (p.transfer != 0) {
      network_.cancel_transfer(p.transfer);
    } else if (p.event.valid()) {
      engine_.cancel(p.event);
    }
    bytes_cancelled_ += p.payload;
    p.live = false;
  }
  pending_.clear();
  free_pending_.clear();
  for (Queue& q : queues_) {
    q.messages.clear();
    q.head = 0;
  }
  std::fill(in_flight_.begin(), in_flight_.end(), 0);
}

void Sender::set_protocol(const ProtocolCost& protocol) {
  MLSIM_CHECK(protocol.efficiency > 0 && protocol.efficiency <= 1,
              "protocol efficiency outside (0, 1]");
  MLSIM_CHECK(transfers_ == 0, "the protocol is chosen before the first message");
  hop_latency_ = protocol.hop_latency;
  efficiency_ = protocol.efficiency;
}

void Sender::send(const Message& m) {
  MLSIM_CHECK(m.from < nodes_.size() && m.to < nodes_.size() && m.from != m.to,
              "collective message between bad participants");
  if (unlimited_) {
    transmit(m);
    return;
  }
  Queue& q = queues_[m.from];
  if (q.empty() && (in_flight_[m.from] < window_ || m.from >= hosts_)) {
    transmit(m);
  } else {
    q.messages.push_back(m);
  }
}

void Sender::pump(std::uint32_t p) {
  if (unlimited_) return;
  Queue& q = queues_[p];
  while (!q.empty() && in_flight_[p] < window_) transmit(q.messages[q.head++]);
  if (q.empty()) {  // keeps the storage for the next messages
    q.messages.clear();
    q.head = 0;
  }
}

void Sender::transmit(const Message& m) {
  if (!unlimited_) ++in_flight_[m.from];
  ++transfers_;
  bytes_sent_ += m.bytes;
  const Bytes wire = efficiency_ < 1 ? Bytes{static_cast<std::int64_t>(std::ceil(
                                           static_cast<double>(m.bytes.count) / efficiency_))}
                                     : m.bytes;
  wire_bytes_ += wire;
  const std::uint32_t slot = track(m.bytes);
  if (m.from >= hosts_ || (message_overhead_ == Time::zero() && message_latency_ == Time::zero() &&
                           per_byte_ns_ == 0)) {
    start_transfer(m, wire, slot);
    return;
  }
  // The payload's copy, rounded up to whole ns (it is done only once every byte is).
  const Time copy =
      per_byte_ns_ > 0
          ? Time::from_seconds_ceil(static_cast<double>(m.bytes.count) * per_byte_ns_ / 1e9)
          : Time::zero();
  const Time busy = message_overhead_ + copy;
  Time leaves = engine_.now();
  Time copied = leaves;
  if (busy > Time::zero()) {
    if (send_clock_ != nullptr) {
      copied = send_clock_->book(nodes_[m.from], leaves, busy);
    } else {
      Time& free = host_free_[m.from];
      free = std::max(free, leaves) + busy;
      copied = free;
    }
    leaves = copied - copy;  // the overhead is paid; the copy runs beside the transfer
  }
  leaves += message_latency_;
  if (copy > Time::zero()) pending_[slot].copied = copied + message_latency_;
  pending_[slot].event =
      engine_.schedule_at(leaves, [this, m, wire, slot] { start_transfer(m, wire, slot); });
}

void Sender::start_transfer(const Message& m, Bytes wire, std::uint32_t slot) {
  const std::uint64_t label = transfer_label(flow_label_, m.from, m.to);
  // The callback never runs inside this call (Network's contract), so the id is recorded
  // before it can.
  pending_[slot].event = EventHandle{};
  pending_[slot].transfer = network_.start_transfer(
      nodes_[m.from], nodes_[m.to], wire,
      [guard = guard_, m, slot](const TransferResult& r) {
        if (guard->owner != nullptr) guard->owner->on_arrived(m, slot, r.failed);
      },
      label);
}

void Sender::on_arrived(const Message& m, std::uint32_t slot, bool failed) {
  pending_[slot].transfer = 0;
  // A message whose bytes outran its sender's copy (the copy is slower than the route) is
  // complete only once its last byte is copied.
  const Time complete = std::max(engine_.now(), pending_[slot].copied) + hop_latency_;
  if (failed || complete == engine_.now()) {
    on_delivered(m, slot, failed);
  } else {
    pending_[slot].event =
        engine_.schedule_at(complete, [this, m, slot] { on_delivered(m, slot, false); });
  }
}

void Sender::on_delivered(const Message& m, std::uint32_t slot, bool failed) {
  release(slot);
  if (!unlimited_) --in_flight_[m.from];
  if (!failed) bytes_delivered_ += m.bytes;
  if (failed) {
    bytes_failed_ += m.bytes;
    ++failed_;  // the algorithm never hears of it: what depends on it never happens
  } else if (sink_) {
    sink_->on_message(m);
  }
  pump(m.from);
  if (failed && on_failed_) on_failed_();
}

}  // namespace mlsim::collectives
