#pragma once
// AutoPipe's partition choice (Hu et al., ICPP 2024), as an oracle search: the paper trains an RL
// policy to pick partitions using an exact model of the pipeline's communication and state
// switching; the simulator stands in for the trained policy with a search that evaluates every
// candidate with that exact model (steady_state_seconds) under the current conditions [inferred:
// papers.md, AutoPipe recipe]. This bounds what a perfect policy could gain.
//
// Search: start from PipeDream's partition for the current conditions, then move one stage
// boundary by one layer at a time, taking the best improving move, until no move improves the
// steady-state time per minibatch by more than 1e-9 relative.
#include <vector>

#include "models/pipeline/pipeline_costs.hpp"

namespace mlsim::pipeline {

struct Plan {
  Partition partition;
  double seconds_per_minibatch = 0;  // steady_state_seconds of the partition
};

Plan autopipe_plan(const std::vector<LayerCost>& layers, const Conditions& c);

}  // namespace mlsim::pipeline
