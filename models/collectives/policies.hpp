#pragma once
// The collectives model's registered policies (sim_core/run/policy_registry.hpp): the operation,
// the algorithm that runs it (which operations an algorithm serves: algorithms_for in
// sim_core/collectives/collective.hpp) and where parameter servers sit. Adding one: one add()
// line in policies.cpp, and its code in sim_core/collectives.
#include <vector>

#include "sim_core/collectives/collective.hpp"
#include "sim_core/run/policy_registry.hpp"

namespace mlsim::collectives {

struct CollectivesPolicies {
  PolicyRegistry<Operation> operations{"operation"};
  PolicyRegistry<Algorithm> algorithms{"algorithm"};
  PolicyRegistry<Placement> placements{"placement"};
  std::vector<PolicyInfo> describe() const;
};

// Built on first use, never changed afterwards.
const CollectivesPolicies& collectives_policies();

}  // namespace mlsim::collectives
