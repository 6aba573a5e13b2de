#include "models/serving/tp_allreduce.hpp"

#include <algorithm>

#include "sim_core/base/error.hpp"
#include "sim_core/collectives/collective.hpp"

namespace mlsim::serving {

Time TpAllReduce::time(int tp, Bytes payload) const {
  if (tp <= 1) return Time::zero();
  return collectives::collective_cost(costs, collectives::Operation::kAllReduce,
                                      collectives::Algorithm::kRing, tp, /*arity=*/2, payload,
                                      bandwidth, route_latency)
      .time;
}

Time TpAllReduce::collective(collectives::Operation op, int n, Bytes bytes) const {
  if (n <= 1) return Time::zero();
  return collectives::collective_cost(costs, op, collectives::algorithms_for(op).front(), n,
                                      /*arity=*/2, bytes, bandwidth, route_latency)
      .time;
}

TpAllReduce TpAllReduce::across_hosts(Bandwidth route, Time route_latency,
                                      int gpus_per_host) const {
  MLSIM_CHECK(route.bytes_per_s > 0 && gpus_per_host >= 1, "a route between the hosts");
  TpAllReduce out = *this;
  const double share = route.bytes_per_s / gpus_per_host;
  out.bandwidth.bytes_per_s =
      bandwidth.bytes_per_s > 0 ? std::min(bandwidth.bytes_per_s, share) : share;
  out.route_latency = std::max(route_latency, this->route_latency);
  return out;
}

}  // namespace mlsim::serving
