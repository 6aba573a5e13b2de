#include "models/serving/point_to_point.hpp"

#include "sim_core/base/error.hpp"
#include "sim_core/collectives/costs.hpp"

namespace mlsim::serving {

PointToPoint::PointToPoint(Engine& engine, Network& network, const LinkConditions* links,
                           collectives::CostModel costs)
    : engine_(engine), network_(network), links_(links), costs_(std::move(costs)) {}

PointToPoint::~PointToPoint() = default;

Time PointToPoint::within_host(Bytes bytes, const HostLink& link) const {
  MLSIM_CHECK(link.bandwidth.bytes_per_s > 0, "a transfer within a host needs its intra_node link");
  return collectives::collective_cost(costs_, collectives::Operation::kSendRecv,
                                      collectives::Algorithm::kDirect, /*participants=*/2,
                                      /*arity=*/2, bytes, link.bandwidth, link.latency)
      .time;
}

std::uint64_t PointToPoint::failed() const {
  std::uint64_t n = failed_;
  for (const auto& [id, t] : in_flight_)
    if (t.collective && t.collective->result().failed_transfers > 0) ++n;
  return n;
}

void PointToPoint::send(NodeId from, NodeId to, Bytes bytes, const HostLink& host_link, Done done,
                        int lanes) {
  MLSIM_CHECK(lanes >= 1, "at least one GPU pair sends");
  ++transfers_;
  bytes_sent_ += bytes.count;
  if (from == to) {
    const std::int64_t n = bytes.count;
    const Bytes per_lane{(bytes.count + lanes - 1) / lanes};
    engine_.schedule_in(within_host(per_lane, host_link), [this, n, d = std::move(done)]() mutable {
      bytes_delivered_ += n;
      d();
    });
    return;
  }
  collectives::CollectiveSpec spec;
  spec.operation = collectives::Operation::kSendRecv;
  spec.algorithm = collectives::Algorithm::kDirect;
  spec.bytes = bytes;
  spec.costs = costs_;
  const std::uint64_t id = next_id_++;
  spec.flow_label = id;
  auto& slot = in_flight_[id];
  slot.done = std::move(done);
  slot.bytes = bytes.count;
  slot.collective = std::make_unique<collectives::Collective>(
      engine_, network_, std::vector<NodeId>{from, to}, spec,
      [this, id](const collectives::CollectiveResult& r) { on_network_done(id, r); }, links_);
  slot.collective->start();
}

void PointToPoint::on_network_done(std::uint64_t id, const collectives::CollectiveResult& result) {
  auto it = in_flight_.find(id);
  MLSIM_CHECK(it != in_flight_.end(), "unknown transfer");
  if (result.failed_transfers > 0) ++failed_;
  bytes_delivered_ += it->second.bytes;
  Done done = std::move(it->second.done);
  // The collective is inside its own callback: it is destroyed on an event of its own.
  engine_.schedule_in(Time::zero(), [this, id] { in_flight_.erase(id); });
  done();
}

}  // namespace mlsim::serving
