#include "models/cluster/policies.hpp"

namespace mlsim::cluster {
namespace {

ClusterPolicies build() {
  ClusterPolicies p;
  p.policies
      .add("fcfs", "strict first come, first served: the head of the queue blocks the rest",
           {Policy::kFcfs, "submit", false, false})
      .add("easy_backfill",
           "EASY backfill: later jobs start early if they do not delay the head's reservation",
           {Policy::kEasyBackfill, "submit", false, false})
      .add("sing",
           "SING-like: EASY backfill with fair-share order, jobs accepting any GPU type and "
           "pre-initialised environments",
           {Policy::kEasyBackfill, "fair_share", true, true});
  p.orders.add("submit", "queue in submission order", Order::kSubmit)
      .add("fair_share", "queue by the user's decayed GPU usage, lightest first",
           Order::kFairShare);
  p.placements
      .add("fewest_nodes",
           "a job that fits no node goes on the nodes with the most free GPUs, wherever they are",
           PlacementRule::kFewestNodes)
      .add("rack_local",
           "a job that fits no node goes under one rack switch when one has room (the tightest "
           "such rack), else across the emptiest racks",
           PlacementRule::kRackLocal);
  p.details
      .add("job", "each job runs for its trace runtime scaled to its GPU type (fast, whole traces)",
           Detail::kJob)
      .add("communication",
           "each job placed on several hosts trains its model on the training core over the "
           "shared network (contention between jobs simulated); a Megatron or Chakra model's "
           "jobs run their execution graph on the hosts placed",
           Detail::kCommunication);
  return p;
}

}  // namespace

std::vector<PolicyInfo> ClusterPolicies::describe() const {
  std::vector<PolicyInfo> out;
  policies.describe(out);
  orders.describe(out);
  placements.describe(out);
  details.describe(out);
  return out;
}

const ClusterPolicies& cluster_policies() {
  static const ClusterPolicies policies = build();
  return policies;
}

}  // namespace mlsim::cluster
