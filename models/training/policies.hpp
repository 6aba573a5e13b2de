#pragma once
// The training core's registered plug-ins (sim_core/run/policy_registry.hpp): communication
// schedulers and gradient-synchronisation strategies, each a factory under a name. A model
// picks them by name (commsched maps its `scheduler` and `mode` keys onto them); adding one is
// its own file plus one add() line in policies.cpp.
#include <functional>
#include <memory>
#include <vector>

#include "models/training/gradient_path.hpp"
#include "models/training/gradient_sync.hpp"
#include "models/training/sync_setup.hpp"
#include "sim_core/run/policy_registry.hpp"

namespace mlsim::training {

using SyncFactory = std::function<std::unique_ptr<GradientSync>(SyncSetup)>;

struct TrainingPolicies {
  PolicyRegistry<SchedulerFactory> schedulers{"scheduler"};
  PolicyRegistry<SyncFactory> syncs{"sync"};
  // Who orders ByteScheduler's chunks over in-network aggregation (Ordering, comm_scheduler.hpp).
  PolicyRegistry<Ordering> orderings{"scheduling"};
  std::vector<PolicyInfo> describe() const;
};

// Built on first use, never changed afterwards.
const TrainingPolicies& training_policies();

}  // namespace mlsim::training
