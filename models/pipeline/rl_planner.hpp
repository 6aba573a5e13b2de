#pragma once
// AutoPipe's RL planner (Hu et al., ICPP 2024): "an RL-based work-partitioning model" that "models
// the exact communication procedure" (../shared/papers.md section 5; only the abstract was
// readable). Everything below the abstract's sentence is [inferred] and listed in
// docs/pipeline.md ("AutoPipe's RL planner"):
//
// - Episodes build a configuration stage by stage, left to right. A step picks the next stage:
//   its last layer j and its number of replicas r (the next r hosts; one under `straight`). A
//   stage that takes the last hosts takes the last layers; a straight pipeline leaves a layer for
//   every host after it.
// - The policy is a softmax over the step's actions of w . phi(action), a linear policy with five
//   features per action, each relative to the ideal time I of the remaining work spread over the
//   remaining hosts (I = mean over those hosts of their time for the remaining layers, divided by
//   their number):
//     e  = T / I - 1, T the stage's compute per minibatch (its slowest replica's, over r): balance;
//     e^2;
//     c  = the boundary's bytes (LayerCost::cut_bytes) / the narrowest link of the stage and the
//          next host (with routes, also of the routes from the stage's hosts to the next host:
//          a server's uplink), over I;
//     a  = the stage's all-reduce (ring_allreduce_seconds) per minibatch (over r and, under GPipe,
//          the group), over I;
//     1 if the stage is replicated.
//   Features are clipped to [-100, 100] (a deadlocking or empty corner must not swamp a step).
// - The reward is the configuration's time in the simulator's timing model of the schedule the
//   run executes (steady_state_seconds, one_f_one_b.hpp: "trained inside the simulator"), lower
//   is better; a GPipe configuration that deadlocks is the worst. REINFORCE over batches of
//   episodes, advantages the batch's centred ranks (robust to the deadlocks' infinite times and to
//   the scale of the times), updated with Adam. The weights start at zero (every action equally
//   likely) and are kept between plans: the agent goes on learning when conditions change.
// - The planner returns the best configuration timed during the episodes or by the greedy
//   rollout (the policy's most likely action at every step) at the end. Configurations already
//   timed are looked up, not timed again; `evaluated` counts the ones timed.
// - GPU memory (PlannerOptions::memory, stage_memory.hpp): when a limit is set, an action whose
//   stage does not fit on its hosts, or after which the remaining layers cannot fit on the
//   remaining hosts, is masked out of the step (the softmax runs over the others), so every
//   episode builds a configuration that fits and no penalty is needed; without a limit nothing
//   changes (the same actions, the same draws). No configuration fitting is an InputError at
//   "system.memory".
// - Draws come from a RandomStream (sim_core/engine/random.hpp): same seed, same plans.
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include <Eigen/Dense>

#include "models/pipeline/autopipe_planner.hpp"
#include "models/pipeline/pipeline_costs.hpp"
#include "sim_core/engine/random.hpp"

namespace mlsim::pipeline {

struct RlOptions {
  std::size_t episodes = 256;  // per plan (system.rl.episodes) [inferred]
  std::size_t batch = 16;      // episodes per policy update (system.rl.batch) [inferred]
  double learning_rate = 0.2;  // Adam's step (system.rl.learning_rate) [inferred]
};

class RlPlanner {
 public:
  static constexpr int kFeatures = 5;

  RlPlanner(RlOptions options, RandomStream rng);

  // Trains the policy for `episodes` episodes under `c` and returns the best configuration timed
  // (Plan::evaluated: configurations timed by this call).
  Plan plan(const std::vector<LayerCost>& layers, const Conditions& c,
            const PlannerOptions& options);
  // The policy's most likely configuration under `c` (no training, nothing timed).
  Partition greedy(const std::vector<LayerCost>& layers, const Conditions& c,
                   const PlannerOptions& options) const;
  const Eigen::VectorXd& weights() const { return w_; }

 private:
  RlOptions options_;
  RandomStream rng_;
  Eigen::VectorXd w_;  // policy weights
  Eigen::VectorXd adam_m_, adam_v_;
  std::uint64_t adam_t_ = 0;
};

}  // namespace mlsim::pipeline
