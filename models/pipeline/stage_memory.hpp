#pragma once
// GPU memory of a pipeline stage, and the memory constraint of the planners (system.memory,
// docs/pipeline.md "GPU memory").
//
// mlsim's accounting, per host of stage [i, j) replicated on hosts [h, h + r) of W hosts in use,
// from the profile's sizes (fp32 bytes; PipeDream's graph.txt gives per layer its output
// activation and its parameters, nothing else):
//   1F1B:  P (k + 1 + f) + k (A + a_in)
//   GPipe: P (1 + 1 + f) + g (A + a_in)
// P the stage's parameter bytes, A the sum of its layers' activations (each layer's output is
// kept for the backward), a_in the activation entering the stage (the boundary's bytes,
// LayerCost::cut_bytes of the previous layer: every activation made before the stage and consumed
// in or after it, received and kept for the stage's backward; 0 for the first stage), f optimizer
// state per weight in weight-sized buffers (1: SGD momentum, as PipeDream's runtime trains its
// image models, msr-fiddle/pipedream runtime/image_classification/main_with_runtime.py,
// SGDWithWeightStashing with args.momentum) [assumed: the scenario may say otherwise], the 1 a
// weight gradient.
// k = in_flight_limit(h, r, W) (models/training/pipeline_schedule.hpp) is the 1F1B stage's
// minibatches in flight per replica, each keeping its activations and, by weight stashing, its
// version of the weights: PipeDream keeps num_versions = num_warmup_minibatches + 1 = k versions
// (main_with_runtime.py, "number of versions is the total number of machines following the
// current stage, shared amongst all replicas in this stage"). g is GPipe's micro-batches per
// flush of a worker, all of whose activations are kept until the group's backwards; GPipe keeps
// one version of the weights. Not counted [assumed 0]: framework workspace, allocator
// fragmentation, the CUDA context, and transient buffers of messages in flight.
//
// PipeDream's own check (msr-fiddle/pipedream optimizer/optimizer_graph_hierarchical.py,
// compute_partitioning, with --use_memory_constraint): a stage [i, j) on m' machines, followed by
// M machines, is allowed when
//   ceil(M / m') (A + P) <= memory_size
// (its "stashed_data_size"; the last stage, M = 0, always fits). It is the PipeDream policy's
// check (pipedream_partitioner.hpp), kept as released; it counts neither the current weights,
// their gradient and optimizer state, nor the input activation, so a configuration it accepts can
// exceed mlsim's accounting above (docs/pipeline.md shows by how much).
#include <cstddef>
#include <optional>
#include <vector>

#include "models/pipeline/one_f_one_b.hpp"
#include "models/pipeline/pipeline_costs.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim::pipeline {

// The constraint: each host's GPU memory in bytes (the job's hosts in order). Empty: no
// constraint (the default, as PipeDream's --use_memory_constraint is off by default).
struct MemoryLimit {
  std::vector<double> capacity = {};
  double optimizer_state_factor = 1;  // f above [assumed]
  bool active() const { return !capacity.empty(); }
};

// The memory settings of a pipeline, as the scenario gives them: `system.memory` of the pipeline
// model, or `workload.training.models[i].pipeline.memory` of the cluster model's pipeline jobs
// (docs/cluster.md), read by the same reader: {"constraint": bool (required), "capacity": bytes
// for every host (absent: each host's GPU's hbm_capacity from the catalog),
// "optimizer_state_factor": f above (default 1)}, the last two only with the constraint on; unknown
// keys are errors.
struct MemorySettings {
  bool constraint = false;
  std::optional<double> capacity;
  double optimizer_state_factor = 1;
};
// `parent`'s "memory" object when it has one (else the defaults: no constraint).
MemorySettings read_memory_settings(JsonReader& parent);

// The error a planner throws when no configuration of `layers` layers on `hosts` hosts has every
// stage fit (at "system.memory"; the model's set-up refuses such a job first, with a fuller
// message: pipeline_model.hpp, apply_memory_limit).
InputError nothing_fits(std::size_t layers, std::size_t hosts);

// Which accounting a feasibility question uses.
enum class MemoryRule { kMlsim, kPipeDream };

class StageMemory {
 public:
  // `layers` must outlive this. `limit` may be inactive (everything fits).
  StageMemory(const std::vector<LayerCost>& layers, MemoryLimit limit, ScheduleTiming schedule,
              std::size_t hosts, MemoryRule rule = MemoryRule::kMlsim);

  bool active() const { return limit_.active(); }
  // Bytes a host of stage [i, j) on hosts [h, h + r) needs under the rule.
  double bytes(std::size_t i, std::size_t j, std::size_t h, std::size_t r) const;
  // The stage fits on every one of its hosts (always true without a limit).
  bool fits(std::size_t i, std::size_t j, std::size_t h, std::size_t r) const;
  bool fits(const Partition& p) const;
  // The largest bytes() over the stages of `p`, and over its hosts the largest bytes() /
  // capacity (0 without a limit).
  double peak_bytes(const Partition& p) const;
  double peak_fraction(const Partition& p) const;
  // Whether layers [i, n) on hosts [h, H) have a configuration whose every stage fits (stages
  // contiguous, every host used; `straight`: one host per stage). completable(0, 0) says whether
  // any configuration fits. Without a limit, true (whether the layers can be split over the
  // hosts at all is the planners' own check).
  bool completable(std::size_t i, std::size_t h) const { return !active() || suffix_[i][h] != 0; }
  bool any_fits() const { return completable(0, 0); }
  // Sets the straight flag the suffix table (completable) is built for; the constructor builds
  // it for configurations with replication.
  void set_straight(bool straight);

 private:
  void build_suffix();

  const std::vector<LayerCost>& layers_;
  MemoryLimit limit_;
  ScheduleTiming schedule_;
  std::size_t hosts_;
  MemoryRule rule_;
  bool straight_ = false;
  std::vector<double> params_, activations_;  // prefix sums over layers [0, j)
  std::vector<std::vector<char>> suffix_;     // completable(i, h)
};

}  // namespace mlsim::pipeline
