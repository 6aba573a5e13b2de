#pragma once
// The collectives model's registered policies (sim_core/run/policy_registry.hpp): the operation,
// the algorithm that runs it (which operations an algorithm serves: algorithms_for in
// sim_core/collectives/collective.hpp) and where parameter servers sit. Adding one: one add()
// line in policies.cpp, and its code in sim_core/collectives.
#include <vector>

#include "sim_core/collectives/collective.hpp"
#include "sim_core/run/policy_registry.hpp"

namespace mlsim::collectives {

// An algorithm by name, or "auto": ring or tree, chosen by size
// (CollectiveSpec::algorithm_by_size).
struct AlgorithmSetting {
  Algorithm algorithm = Algorithm::kRing;
  bool by_size = false;
};

struct CollectivesPolicies {
  PolicyRegistry<Operation> operations{"operation"};
  PolicyRegistry<AlgorithmSetting> algorithms{"algorithm"};
  PolicyRegistry<Placement> placements{"placement"};
  std::vector<PolicyInfo> describe() const;
};

// Built on first use, never changed afterwards.
const CollectivesPolicies& collectives_policies();

}  // namespace mlsim::collectives
