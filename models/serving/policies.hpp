#pragma once
// The serving model's registered policies (sim_core/run/policy_registry.hpp): batch schedulers
// (what a replica runs next), routers (which replica of a deployment gets a new request) and
// deployment modes. Adding a scheduler or router: its header, and one add() line in
// policies.cpp.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/serving/elastic.hpp"
#include "models/serving/router.hpp"
#include "models/serving/scheduler.hpp"
#include "sim_core/run/policy_registry.hpp"

namespace mlsim::serving {

using SchedulerFactory = std::function<std::unique_ptr<BatchScheduler>()>;
using RouterFactory = std::function<std::unique_ptr<Router>()>;
enum class DeploymentMode { kMfs, kSeparate };

struct ServingPolicies {
  PolicyRegistry<SchedulerFactory> schedulers{"scheduler"};
  PolicyRegistry<RouterFactory> routers{"router"};
  PolicyRegistry<DeploymentMode> modes{"mode"};
  // Elastic deployments' process-group semantics (elastic.hpp).
  PolicyRegistry<ProcessGroupSemantics> process_groups{"process_groups"};
  // The routers of an elastic deployment's stage boundaries (boundary_router.hpp).
  PolicyRegistry<StageRouting> stage_routers{"stage_router"};
  // Where a join's rebalancing moves an elastic stage's engines (boundary_router.hpp).
  PolicyRegistry<Rebalancing> rebalancers{"rebalance"};
  std::vector<PolicyInfo> describe() const;
};

// Built on first use, never changed afterwards.
const ServingPolicies& serving_policies();

// A registered scheduler or router by name; InputError at `where` listing the registered ones.
std::unique_ptr<BatchScheduler> make_scheduler(std::string_view name, const std::string& where);
std::unique_ptr<Router> make_router(std::string_view name, const std::string& where);

}  // namespace mlsim::serving
