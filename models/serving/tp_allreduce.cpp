#include "models/serving/tp_allreduce.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "sim_core/base/error.hpp"
#include "sim_core/collectives/collective.hpp"
#include "sim_core/collectives/hierarchical.hpp"

namespace mlsim::serving {

HostRoutes::HostRoutes(const LinkConditions& links, std::vector<std::vector<NodeId>> groups,
                       std::string replica)
    : links_(&links), groups_(std::move(groups)), replica_(std::move(replica)) {
  MLSIM_CHECK(!groups_.empty(), "host routes without a group");
  for (const auto& g : groups_) MLSIM_CHECK(g.size() >= 2, "a group across hosts has two hosts");
}

collectives::RingRoutes HostRoutes::now() const {
  if (version_ && *version_ == links_->version()) return cached_;
  ++reads_;
  collectives::RingRoutes out{Bandwidth{0}, Time::zero()};
  bool first = true;
  for (const auto& hosts : groups_) {
    const collectives::RingRoutes rr = collectives::ring_routes(*links_, hosts, 0);
    if (rr.narrowest.bytes_per_s <= 0)
      throw std::runtime_error(
          "serving replica " + replica_ +
          ": its tensor-parallel group across hosts has no route left between its hosts (a "
          "link or node event cut them apart); waiting for a repair is not modelled");
    out.narrowest.bytes_per_s = first
                                    ? rr.narrowest.bytes_per_s
                                    : std::min(out.narrowest.bytes_per_s, rr.narrowest.bytes_per_s);
    out.longest_latency = std::max(out.longest_latency, rr.longest_latency);
    first = false;
  }
  cached_ = out;
  version_ = links_->version();
  return cached_;
}

namespace {

// The route between the hosts as it is now.
std::pair<Bandwidth, Time> route_of(const TpAllReduce::AcrossHosts& a) {
  if (a.live) {
    const collectives::RingRoutes rr = a.live->now();
    return {rr.narrowest, rr.longest_latency};
  }
  return {a.route, a.route_latency};
}

}  // namespace

Time TpAllReduce::time(int tp, Bytes payload) const {
  if (tp <= 1) return Time::zero();
  if (across) {
    const auto [route, latency] = route_of(*across);
    MLSIM_CHECK(tp % across->gpus_per_host == 0, "a group across hosts takes whole hosts");
    collectives::HostGroup group;
    group.hosts = tp / across->gpus_per_host;
    group.gpus_per_host = across->gpus_per_host;
    group.intra = bandwidth;
    group.intra_latency = route_latency;
    group.inter = route;
    group.inter_latency = latency;
    return collectives::hierarchical_all_reduce_cost(costs, group, payload).time;
  }
  return collectives::collective_cost(costs, collectives::Operation::kAllReduce,
                                      collectives::Algorithm::kRing, tp, /*arity=*/2, payload,
                                      bandwidth, route_latency)
      .time;
}

Time TpAllReduce::collective(collectives::Operation op, int n, Bytes bytes) const {
  if (n <= 1) return Time::zero();
  Bandwidth b = bandwidth;
  Time latency = route_latency;
  if (across) {
    // One flat closed form over the slowest link: a GPU's share of the route, or its own link.
    const auto [route, route_latency_now] = route_of(*across);
    MLSIM_CHECK(route.bytes_per_s > 0, "a route between the hosts");
    const double share = route.bytes_per_s / across->gpus_per_host;
    b.bytes_per_s = b.bytes_per_s > 0 ? std::min(b.bytes_per_s, share) : share;
    latency = std::max(latency, route_latency_now);
  }
  return collectives::collective_cost(costs, op, collectives::algorithms_for(op).front(), n,
                                      /*arity=*/2, bytes, b, latency)
      .time;
}

TpAllReduce TpAllReduce::across_hosts(Bandwidth route, Time route_latency, int gpus_per_host,
                                      std::shared_ptr<const HostRoutes> live) const {
  MLSIM_CHECK((route.bytes_per_s > 0 || live) && gpus_per_host >= 1, "a route between the hosts");
  TpAllReduce out = *this;
  out.across = AcrossHosts{gpus_per_host, route, route_latency, std::move(live)};
  return out;
}

}  // namespace mlsim::serving
