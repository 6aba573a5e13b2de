#pragma once
// The weight-gradient synchronisation of a pipeline on the training core: one gradient path
// (scheduler, then strategy) per stage, over that stage's replicas (the core's workers
// first_worker(s) .. + replication(s) of its PipelineSchedule) and its layers, so the replicas of
// a stage synchronise among themselves and never with another stage's (PipeDream's hybrid
// stages; Megatron's data-parallel groups, one per stage, plan step 4 in docs/training.md). A
// stage of one replica has nothing to send: its gradients are applied at once (the core's
// parameters_back from inside gradient_ready).
//
// It is the core's GradientSink for the whole job: the schedule decides when gradients are
// handed over (every backward, GPipe's flush, or Megatron's last backward), this decides where
// they go. Used by the cluster's pipeline jobs (models/cluster/pipeline_job.hpp). The pipeline
// model keeps its own StageAllReduce (models/pipeline/stage_allreduce.hpp), whose rounds are
// joined by the replicas that take part in each (AutoPipe's switches change them), with the
// whole stage as one tensor.
//
// Setup::stage_as_one_tensor presents each stage's layers to its strategy as one tensor of their
// summed parameters: a replica's layers handed over together (Megatron's last backward hands
// over all of them at once) go out as one collective, as Megatron all-reduces a stage's whole
// gradient buffer (and the execution graph one collective per stage); otherwise one per layer.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "models/training/data_parallel_job.hpp"
#include "models/training/gradient_path.hpp"
#include "models/training/pipeline_schedule.hpp"
#include "models/training/policies.hpp"
#include "sim_core/network/network.hpp"

namespace mlsim::training {

class StageGradients final : public GradientSink {
 public:
  struct Setup {
    SchedulerFactory make_scheduler;
    SchedulerConfig config;
    SyncFactory make_sync;
    // bytes_per_parameter, host and collective costs, links; the workers, servers (colocated
    // with the workers, for ps) and layer sizes are set per stage.
    SyncOptions sync;
    bool stage_as_one_tensor = false;
    // Per stage, its strategy's SyncOptions::flow_label (the ECMP label of its collectives);
    // empty: sync.flow_label for every stage. With several replica groups, per stage and group
    // (stage-major).
    std::vector<std::uint64_t> stage_flow_labels{};
    // A stage's replicas form this many groups that synchronise among themselves, replica i in
    // group i mod replica_groups (a Megatron job with tensor parallelism not collapsed: replica
    // t + TP d is TP rank t of DP index d, and each TP rank has its own DP group), each with its
    // own gradient path and strategy.
    std::size_t replica_groups = 1;
    // Per stage and group (as stage_flow_labels), its SyncOptions::host_link_sharers (the closed
    // form's GPUs sharing the first replica's host link); empty: sync.host_link_sharers.
    std::vector<int> stage_host_link_sharers{};
    // A group whose replicas all run on one host (a Megatron job with several TP groups on a
    // host): this strategy with these options instead of make_sync and sync, when set (its
    // workers, layers and label set per group as the others'). The network carries bytes
    // between hosts only; the execution graph prices such a group inside the host.
    SyncFactory make_one_host_sync{};
    SyncOptions one_host_sync{};
  };
  // `core` and `schedule` (the one the core runs) must outlive this; every stage's strategy runs
  // `on_failed` once, from inside the network's delivery, at its first transfer that found no
  // route (an owner that tears the job down guards against the second stage's call).
  StageGradients(Engine& engine, Network& network, DataParallelJob& core,
                 const PipelineSchedule& schedule, const Setup& setup,
                 std::function<void()> on_failed);
  ~StageGradients() override;
  StageGradients(const StageGradients&) = delete;
  StageGradients& operator=(const StageGradients&) = delete;

  void gradient_ready(std::size_t worker, std::size_t layer) override;

  // Over every stage's strategy.
  std::int64_t bytes_sent() const;
  std::int64_t bytes_delivered() const;
  std::uint64_t messages() const;
  // When a stage's strategy last reported a chunk (a watchdog's sign of progress).
  Time last_event() const;

 private:
  // One stage's replicas and layers as the gradient owner of its path.
  class Stage;

  DataParallelJob& core_;
  const PipelineSchedule& schedule_;
  std::size_t groups_ = 1;                      // Setup::replica_groups
  std::vector<std::unique_ptr<Stage>> stages_;  // per stage and group; null: one replica
};

}  // namespace mlsim::training
