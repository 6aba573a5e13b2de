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
      send_clock_(host.send_clock),
      unlimited_(window <= 0) {
  // Without a window no message ever waits for a send slot: no queues to keep (a training job
  // builds a collective per gradient chunk).
  if (!unlimited_) {
    queues_.resize(nodes_.size());
    in_flight_.assign(nodes_.size(), 0);
  }
  MLSIM_CHECK(efficiency_ > 0 && efficiency_ <= 1, "protocol efficiency outside (0, 1]");
  if (message_overhead_ > Time::zero() && send_clock_ == nullptr)
    host_free_.assign(nodes_.size(), Time::zero());
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
  if (m.from >= hosts_ || (message_overhead_ == Time::zero() && message_latency_ == Time::zero())) {
    start_transfer(m, wire);
    return;
  }
  Time leaves = engine_.now();
  if (message_overhead_ > Time::zero()) {
    if (send_clock_ != nullptr) {
      leaves = send_clock_->book(nodes_[m.from], leaves, message_overhead_);
    } else {
      Time& free = host_free_[m.from];
      free = std::max(free, leaves) + message_overhead_;
      leaves = free;
    }
  }
  leaves += message_latency_;
  engine_.schedule_at(leaves, [this, m, wire] { start_transfer(m, wire); });
}

void Sender::start_transfer(const Message& m, Bytes wire) {
  const std::uint64_t label = transfer_label(flow_label_, m.from, m.to);
  network_.start_transfer(
      nodes_[m.from], nodes_[m.to], wire,
      [this, m](const TransferResult& r) { on_arrived(m, r.failed); }, label);
}

void Sender::on_arrived(const Message& m, bool failed) {
  if (failed || hop_latency_ == Time::zero()) {
    on_delivered(m, failed);
  } else {
    engine_.schedule_in(hop_latency_, [this, m] { on_delivered(m, false); });
  }
}

void Sender::on_delivered(const Message& m, bool failed) {
  if (!unlimited_) --in_flight_[m.from];
  if (!failed) bytes_delivered_ += m.bytes;
  if (failed) {
    ++failed_;  // the algorithm never hears of it: what depends on it never happens
  } else if (sink_) {
    sink_->on_message(m);
  }
  pump(m.from);
}

}  // namespace mlsim::collectives
