#include "sim_core/collectives/point_to_point.hpp"

#include "sim_core/base/error.hpp"

namespace mlsim::collectives {
namespace {
// A call in flight: its counts are not yet in the totals.
bool live(const auto& slot) {
  return slot.collective && !slot.collective->done() && !slot.collective->cancelled();
}
}  // namespace

PointToPoint::PointToPoint(Engine& engine, Network& network, Options options,
                           const LinkConditions* links)
    : engine_(engine), network_(network), options_(std::move(options)), links_(links) {
  options_.host.send_clock = &clock_;
}

PointToPoint::~PointToPoint() = default;  // each Collective cancels itself

void PointToPoint::cancel() {
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    // A done collective's slot is free or its callback is running (it frees it on return).
    if (!s.collective || s.collective->done() || s.collective->cancelled()) continue;
    s.collective->cancel();
    const CollectiveResult r = s.collective->result();
    sent_ += r.bytes_sent.count;
    delivered_ += r.bytes_delivered.count;
    wire_ += r.wire_bytes.count;
    cancelled_ += r.bytes_cancelled.count;
    failed_ += r.failed_transfers;
    s.done = nullptr;
    free_.push_back(i);
  }
}

void PointToPoint::send(NodeId from, NodeId to, Bytes bytes, Done done, std::uint64_t flow_label) {
  MLSIM_CHECK(from != to, "a point-to-point message needs two distinct nodes");
  CollectiveSpec spec;
  spec.operation = Operation::kSendRecv;
  spec.algorithm = Algorithm::kDirect;
  spec.bytes = bytes;
  spec.flow_label = flow_label;
  spec.costs = options_.costs;
  spec.host = options_.host;
  std::size_t i = 0;
  if (free_.empty()) {
    i = slots_.size();
    slots_.emplace_back();
  } else {
    // Its callback returned and the stack that ran it has unwound: the old collective can go.
    i = free_.back();
    free_.pop_back();
  }
  Slot& s = slots_[i];
  s.done = std::move(done);
  s.collective = std::make_unique<Collective>(
      engine_, network_, std::vector<NodeId>{from, to}, spec,
      [this, i](const CollectiveResult& r) { finished(i, r); }, links_);
  if (on_failed_)
    s.collective->set_failure_callback([this](const CollectiveResult&) { on_failed_(); });
  ++calls_;
  s.collective->start();
}

void PointToPoint::finished(std::size_t i, const CollectiveResult& r) {
  sent_ += r.bytes_sent.count;
  delivered_ += r.bytes_delivered.count;
  wire_ += r.wire_bytes.count;
  Done done = std::move(slots_[i].done);
  done(r);  // may send again: into another slot, as this one is not free yet
  // Free once the callback returned; the collective (still on the stack that called this) is
  // replaced only by a later send(), after that stack has unwound.
  free_.push_back(i);
}

std::int64_t PointToPoint::bytes_sent() const {
  std::int64_t b = sent_;
  for (const Slot& s : slots_)
    if (live(s)) b += s.collective->result().bytes_sent.count;
  return b;
}

std::int64_t PointToPoint::bytes_delivered() const {
  std::int64_t b = delivered_;
  for (const Slot& s : slots_)
    if (live(s)) b += s.collective->result().bytes_delivered.count;
  return b;
}

std::int64_t PointToPoint::wire_bytes() const {
  std::int64_t b = wire_;
  for (const Slot& s : slots_)
    if (live(s)) b += s.collective->result().wire_bytes.count;
  return b;
}

std::uint64_t PointToPoint::failed_transfers() const {
  std::uint64_t f = failed_;  // a finished call had none
  for (const Slot& s : slots_)
    if (live(s)) f += s.collective->result().failed_transfers;
  return f;
}

}  // namespace mlsim::collectives
