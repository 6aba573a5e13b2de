#pragma once
// The commsched model's registered policies (sim_core/run/policy_registry.hpp): communication
// modes, gradient schedulers, tuners of ByteScheduler's knobs, credit scopes and
// transport cost profiles. Adding one: one
// add() line in policies.cpp (a new mechanism also needs its code in training_job or tuners).
#include <vector>

#include "models/commsched/commsched_model.hpp"
#include "models/commsched/transport_costs.hpp"
#include "sim_core/run/policy_registry.hpp"

namespace mlsim::commsched {

struct CommschedPolicies {
  PolicyRegistry<Mode> modes{"mode"};
  PolicyRegistry<SchedulerKind> schedulers{"scheduler"};
  PolicyRegistry<Tuner> tuners{"tuner"};
  PolicyRegistry<CreditScope> credit_scopes{"credit_scope"};
  PolicyRegistry<Transport> transports{"transport"};
  PolicyRegistry<Scheduling> schedulings{"scheduling"};
  PolicyRegistry<PsConnections> ps_connections{"ps_connections"};
  std::vector<PolicyInfo> describe() const;
};

// Built on first use, never changed afterwards.
const CommschedPolicies& commsched_policies();

}  // namespace mlsim::commsched
