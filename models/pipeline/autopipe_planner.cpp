#include "models/pipeline/autopipe_planner.hpp"

#include "models/pipeline/one_f_one_b.hpp"
#include "models/pipeline/pipedream_partitioner.hpp"

namespace mlsim::pipeline {

Plan autopipe_plan(const std::vector<LayerCost>& layers, const Conditions& c) {
  Plan plan{pipedream_partition(layers, c), 0};
  plan.seconds_per_minibatch = steady_state_seconds(layers, plan.partition, c);
  // Every step strictly improves, so the search ends; the cap only bounds its cost.
  for (std::size_t step = 0; step < 4 * layers.size(); ++step) {
    Plan best = plan;
    for (std::size_t b = 1; b < plan.partition.stages(); ++b) {
      for (int dir : {-1, +1}) {
        Partition cand = plan.partition;
        const std::size_t moved = cand.first[b] + static_cast<std::size_t>(dir);
        if (moved <= cand.first[b - 1] || moved >= cand.first[b + 1]) continue;  // keep >= 1 layer
        cand.first[b] = moved;
        const double t = steady_state_seconds(layers, cand, c);
        if (t < best.seconds_per_minibatch * (1 - 1e-9)) best = {cand, t};
      }
    }
    if (best.partition == plan.partition) break;
    plan = best;
  }
  return plan;
}

}  // namespace mlsim::pipeline
