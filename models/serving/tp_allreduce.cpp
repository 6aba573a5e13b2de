#include "models/serving/tp_allreduce.hpp"

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

}  // namespace mlsim::serving
