#pragma once
// AutoPipe's partition choice (Hu et al., ICPP 2024). The paper trains an RL policy to pick
// partitions, guided by a model of the pipeline that includes the exact communication procedure
// and state switching (../shared/papers.md section 5, from the abstract; the paper's text and
// code were not readable). The simulator stands in for the trained policy with an exact search:
// the configuration (layer ranges and, unless `straight`, PipeDream's stage replication) with the
// smallest steady-state time per minibatch under the timing model of the schedule the run
// executes (steady_state_seconds, one_f_one_b.hpp: 1F1B, or GPipe with its flushes), under the
// conditions of the moment. It bounds what a perfect policy could do.
//
// Search: branch and bound over every configuration that uses all hosts. Stages are fixed left
// to right (their hosts, then their last layer); a prefix is dropped when a lower bound on the
// steady-state time already reaches the best time found: the largest stage term of the fixed
// stages (bottleneck.hpp: per round of a stage's r replicas, each replica's GPU runs its forward
// and backward and the all-reduce, and its NIC sends its activation and gradient at no more than
// its own bandwidth and the all-reduce; so the time per minibatch is at least
//   max over replicas of max(f + b, out_bytes / bandwidth) + all-reduce / u, divided by r,
// u the minibatches per weight update of a replica, 1 under 1F1B, GPipe's group). The same
// terms, minimised by a dynamic program, are the "dp" planner (dp_planner.hpp), exact for that
// decomposable bottleneck time but not for the steady-state time this search minimises.
// The first bound comes from PipeDream's configurations (both objectives) improved by moving one
// boundary by one layer at a time. Nothing is left unexamined, so the result is the exhaustive
// search's optimum (ties: the first found, PipeDream's when it is optimal).
//
// With a memory limit (PlannerOptions::memory), stages that do not fit are skipped as they are
// fixed, and so are stages after which the remaining layers cannot fit on the remaining hosts
// (StageMemory::completable); PipeDream's starting configurations and the boundary moves are
// taken only when they fit. The result is the optimum over the configurations that fit.
//
// The planner is separate from the training loop: it needs only layer costs and conditions.
#include <cstdint>
#include <vector>

#include "models/pipeline/one_f_one_b.hpp"
#include "models/pipeline/pipeline_costs.hpp"
#include "models/pipeline/stage_memory.hpp"

namespace mlsim::pipeline {

struct Plan {
  Partition partition;
  double seconds_per_minibatch = 0;  // steady_state_seconds of the partition
  std::uint64_t evaluated = 0;       // configurations timed with the schedule's model
  double bottleneck_seconds = 0;     // the DP planner's objective (dp_planner.hpp); 0 otherwise
};

struct PlannerOptions {
  bool straight = false;  // one host per stage only
  // The schedule the run executes (system.schedule): configurations are timed under it.
  ScheduleTiming schedule;
  // GPU memory (system.memory; stage_memory.hpp, mlsim's accounting under `schedule`): when
  // active, a configuration with a stage that does not fit on one of its hosts is never
  // returned, and the planners return the best of those that fit; an InputError at
  // "system.memory" when none does. Inactive by default.
  MemoryLimit memory = {};
};

Plan autopipe_plan(const std::vector<LayerCost>& layers, const Conditions& c,
                   const PlannerOptions& options = {});

// Every configuration timed, no pruning: the reference the planner must match (tests, small
// cases only).
Plan exhaustive_plan(const std::vector<LayerCost>& layers, const Conditions& c,
                     const PlannerOptions& options = {});

}  // namespace mlsim::pipeline
