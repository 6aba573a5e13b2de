#pragma once
// The cluster model's registered policies (sim_core/run/policy_registry.hpp): scheduling
// policies, each a preset of the scheduler's mechanisms (which the scenario may set apart, for
// ablations), and queue orders. Adding one: one add() line in policies.cpp (a new mechanism also
// needs its code in cluster_sim).
#include <string>
#include <vector>

#include "models/cluster/cluster_sim.hpp"
#include "sim_core/run/policy_registry.hpp"

namespace mlsim::cluster {

struct SchedulingPreset {
  Policy policy = Policy::kFcfs;
  std::string order;  // a name in ClusterPolicies::orders, the default of "order"
  bool flexible_types = false;
  bool preinitialised = false;
};

// Where a job that fits no single node goes (NodePool::set_racks).
enum class PlacementRule { kFewestNodes, kRackLocal };
// How long a placed job runs: its trace runtime, or its training simulated (detailed mode).
enum class Detail { kJob, kCommunication };

struct ClusterPolicies {
  PolicyRegistry<SchedulingPreset> policies{"policy"};
  PolicyRegistry<Order> orders{"order"};
  PolicyRegistry<PlacementRule> placements{"placement"};
  PolicyRegistry<Detail> details{"detail"};
  std::vector<PolicyInfo> describe() const;
};

// Built on first use, never changed afterwards.
const ClusterPolicies& cluster_policies();

}  // namespace mlsim::cluster
