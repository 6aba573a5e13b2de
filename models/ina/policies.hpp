#pragma once
// The ina model's registered policies (sim_core/run/policy_registry.hpp): how jobs share the
// switch's aggregator memory, and which path their packets take. Adding one: one add() line in
// policies.cpp, its AggregationPolicy in its own file, and its construction in ina_cluster.
#include <vector>

#include "models/ina/cluster_params.hpp"
#include "sim_core/run/policy_registry.hpp"

namespace mlsim::ina {

struct InaPolicies {
  PolicyRegistry<PolicyKind> policies{"policy"};
  PolicyRegistry<DataPathKind> data_paths{"data_path"};
  std::vector<PolicyInfo> describe() const;
};

// Built on first use, never changed afterwards.
const InaPolicies& ina_policies();

}  // namespace mlsim::ina
