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
  return p;
}

}  // namespace

std::vector<PolicyInfo> ClusterPolicies::describe() const {
  std::vector<PolicyInfo> out;
  policies.describe(out);
  orders.describe(out);
  return out;
}

const ClusterPolicies& cluster_policies() {
  static const ClusterPolicies policies = build();
  return policies;
}

}  // namespace mlsim::cluster
