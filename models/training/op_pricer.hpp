#pragma once
// What an op of the training core costs when a model prices it itself rather than from per-layer
// times (JobSpec::times / layer_seconds): a short list of steps run one after another on the
// worker's host (plan step 3 in docs/training.md, for Megatron-LM jobs on the core). A compute
// step is work on the host's GPU, stretched by its speed (the platform's Compute, as any op); a
// collective step is one inside the worker's host, a tensor-parallel all-reduce among the GPUs a
// worker stands for over their intra-host links, priced by the model in closed form (as the
// execution graph prices a collective inside one host) and not changed by the GPU's speed. So an
// op is e.g. attention, all-reduce, MLP, all-reduce per layer, as Megatron's tensor parallelism
// runs it.
#include <cstddef>
#include <vector>

#include "models/training/op_schedule.hpp"
#include "sim_core/base/time.hpp"

namespace mlsim::training {

struct OpStep {
  enum class Kind : unsigned char { kCompute, kCollective };
  Kind kind = Kind::kCompute;
  double seconds = 0;  // compute: at speed 1 on the worker's host
  Time duration;       // collective: how long it holds the worker
  // Collective among several of the job's workers (a tensor-parallel group whose GPUs are
  // workers of their own): the worker waits at it until the model calls
  // DataParallelJob::step_done(), which the model does once every member reached it (its
  // OpObserver::step_started) and `duration` has passed, as the execution graph's collectives
  // start when the group's last member arrives.
  bool rendezvous = false;
};

class OpPricer {
 public:
  virtual ~OpPricer() = default;
  // Replaces `out` with the steps of `op` on `worker`, in order (none: the op takes no time).
  virtual void steps(std::size_t worker, const ScheduledOp& op, std::vector<OpStep>& out) const = 0;
};

}  // namespace mlsim::training
