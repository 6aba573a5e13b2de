#pragma once
// The training core's ops of a Megatron-LM job priced as the execution graph runs them
// (megatron_source.hpp: emit_step, layer_pass), for Megatron jobs on the core (plan step 3 in
// docs/training.md). A core worker stands for one tensor-parallel group of `tp` GPUs on one
// host (the graph's collapsed rank), or, with the layout's collapse_tensor_parallel off, for
// one GPU of it, whose all-reduces are then rendezvous steps among the group's workers
// (OpStep::rendezvous, joined by MegatronCoreJob); its ops cover a range of the model's decoder
// layers, stage s holding layers [s x layers_per_stage, (s + 1) x layers_per_stage). Per layer, a
// forward is attention, TP all-reduce, MLP, TP all-reduce; a backward is MLP backward,
// all-reduce, attention backward, all-reduce, after the layer's forward again under
// recomputation. The first layer's forward starts with the embedding (its backward ends with
// it), the last layer's forward ends with the head and loss (its backward starts with them).
// Each kernel is its Work summed by the platform's Compute on the worker's host at speed 1
// (Compute::nominal_seconds, as GraphExecutor::kernel_seconds), an empty kernel is skipped, and
// each TP all-reduce is collective_cost's closed form over the host's intra-node link (as the
// graph prices a collective inside one host), no step when tp is 1.
//
// Not collapsed, a TP group whose GPUs are on several hosts (TP above the hosts' GPUs) prices
// its all-reduce as the graph does a collective among ranks on several hosts: in the closed form
// (`closed_form_links` given) InterHostClosedForm over the members' hosts, the first member's
// host link split among its GPUs; through the network the step's duration is 0 and the job runs
// the all-reduce as a network collective once the group's last member arrived
// (tensor_group_spans_hosts()).
//
// Merged (`merge_steps`): the op's compute steps as one compute step of their summed seconds,
// then its all-reduces as one step of their summed time: two events per op instead of one per
// step. Without speed changes the op ends at the same time up to rounding (each step's end is
// rounded to the nanosecond on its own otherwise); with them, the all-reduces are no longer
// interleaved with the kernels whose speed changed.
#include <array>
#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "models/llm_training/megatron_source.hpp"
#include "models/training/op_pricer.hpp"
#include "sim_core/collectives/costs.hpp"
#include "sim_core/collectives/inter_host.hpp"
#include "sim_core/hardware/compute.hpp"

namespace mlsim::llm_training {

class MegatronOpPricer final : public training::OpPricer {
 public:
  // `hosts`: per core worker, its host; `compute` must outlive this. `costs`: the collective
  // layer's (the graph's ExecutorOptions::costs).
  MegatronOpPricer(const ParallelLayout& layout, StageKernels kernels, const Compute& compute,
                   std::vector<NodeId> hosts, const collectives::CostModel& costs,
                   bool merge_steps = false, const LinkConditions* closed_form_links = nullptr);

  void steps(std::size_t worker, const training::ScheduledOp& op,
             std::vector<training::OpStep>& out) const override;
  bool merges_steps() const { return merge_steps_; }
  // Not collapsed: the hosts of worker w's TP group, in member order, and whether they are
  // several (its all-reduces then cross hosts).
  std::span<const NodeId> tensor_group_hosts(std::size_t worker) const;
  bool tensor_group_spans_hosts(std::size_t worker) const;
  // The op's TP all-reduces after its last kernel, in the graph's order (each_step): merged,
  // the rest of the op's all-reduce step ran between its kernels on the graph (exposed TP time
  // there, megatron_core_job.hpp "Exposure").
  Time trailing_collectives(std::size_t worker, const training::ScheduledOp& op) const;
  // The op's kernels and TP all-reduces as the graph runs them (one node each), merged or not:
  // what MegatronCoreJob::counts() adds up as GraphExecutor::counts() does.
  struct StepCounts {
    std::size_t kernels = 0, all_reduces = 0;
  };
  StepCounts count_steps(std::size_t worker, const training::ScheduledOp& op) const;

 private:
  void each_step(std::size_t worker, const training::ScheduledOp& op,
                 std::vector<training::OpStep>& out) const;
  // Kernel k (MegatronSource::kAttnF ... kHeadB; groups_ in that order) of worker w: its Work
  // summed on w's host once, then cached (the roofline lookups are most of an op's price).
  void kernel(std::size_t w, int k, std::vector<training::OpStep>& out) const;
  void all_reduce(std::size_t worker, std::vector<training::OpStep>& out) const;  // cached too

  ParallelLayout layout_;
  StageKernels kernels_;
  const Compute& compute_;
  std::vector<NodeId> hosts_;
  collectives::CostModel costs_;
  bool merge_steps_;
  mutable std::unique_ptr<collectives::InterHostClosedForm> closed_form_;  // TP over hosts
  std::array<const std::vector<Work>*, 8> groups_{};
  mutable std::vector<std::array<double, 8>> seconds_;  // per worker; < 0: not priced yet
  mutable std::vector<Time> all_reduce_;                // per worker; < 0: not priced yet
  mutable std::vector<training::OpStep> scratch_;       // count_steps'
};

}  // namespace mlsim::llm_training
