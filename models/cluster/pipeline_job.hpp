#pragma once
// A pipeline-parallel job of the cluster's detailed mode (docs/cluster.md, "Pipeline-parallel
// jobs"): the hosts its placement gave it split into stages, each stage a contiguous range of
// the model's layers run by its own number of replicas, the training core's PipelineSchedule (1F1B
// or GPipe, models/training/pipeline_schedule.hpp) ordering every worker's ops. This class is the
// job's GradientSink and OpObserver on the core:
//   - each forward's activation and each backward's gradient goes to the replica of the next or
//     previous stage that runs the micro-batch, as one point-to-point message of the collective
//     layer over the run's shared network (its arrival is the core's input_arrived), so it
//     contends with every other job's traffic;
//   - each stage's weight gradients are synchronised among the stage's replicas by the model's
//     own scheduler and strategy (ps, ring, tree, rat), one gradient path per stage over the
//     stage's replicas and layers (models/training/stage_gradients.hpp, the core's gradient sink,
//     gradients()); a stage of one replica updates locally (nothing to send).
// The same division of work as models/pipeline's PipelineTraining (its op_done and
// gradient_ready), without its re-planning: the stages (the even split, or one of the pipeline
// model's planners, CommunicationMode::plan_stages) are fixed when the job starts.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "models/training/data_parallel_job.hpp"
#include "models/training/gradient_path.hpp"
#include "models/training/pipeline_schedule.hpp"
#include "models/training/policies.hpp"
#include "models/training/stage_gradients.hpp"
#include "sim_core/collectives/point_to_point.hpp"
#include "sim_core/network/network.hpp"

namespace mlsim::cluster {

// Where the stages are: stage s holds layers [first_layer[s], first_layer[s + 1]) and runs on
// replicas[s] consecutive hosts of the placement, after the earlier stages' (PipeDream's hybrid:
// a stage of several replicas is data parallel inside, its replicas take micro-batches
// round-robin and synchronise the stage's weight gradients among themselves).
struct StageLayout {
  std::vector<std::size_t> first_layer;  // stages + 1 entries
  std::vector<std::size_t> replicas;     // per stage, each at least 1
  std::size_t stages() const { return first_layer.size() - 1; }
  std::size_t first_worker(std::size_t stage) const;  // the replicas of the stages before it
  std::size_t workers() const { return first_worker(stages()); }
  // The least common multiple of the stages' replicas: an iteration's micro-batches are a
  // multiple of it, so every replica of a stage gets as many (its replicas' synchronisation
  // waits for each of them every round).
  std::size_t rounds_multiple() const;
};

// The "even" planner: `stages` stages over `hosts` hosts (at least one each: fewer hosts, fewer
// stages) and the layers of per-layer compute `layer_s` (forward + backward): every stage gets
// floor(hosts / stages) replicas (the placement's remaining hosts idle), and stage s ends at the
// first layer boundary where the compute before it reaches s / stages of the whole, keeping a
// layer for every stage.
StageLayout split_stages(const std::vector<double>& layer_s, std::size_t stages, std::size_t hosts);

class PipelineJob final : public training::OpObserver {
 public:
  struct Options {
    training::PipelineSchedule::Kind schedule = training::PipelineSchedule::Kind::kOneFOneB;
    // Per iteration: micro_batches x layout.rounds_multiple() (so M per replica when every
    // stage has as many replicas; a replica of a stage with fewer runs more, round-robin).
    std::size_t micro_batches = 1;
    // Per boundary s (between stage s and s + 1): bytes of one micro-batch's activation (and of
    // its gradient, the same size).
    std::vector<std::int64_t> boundary_bytes;
    // Each stage's scheduler and strategy; its sync options' costs and links are also the
    // activation messages'.
    training::StageGradients::Setup gradients;
  };
  // `core` (whose workers are the layout's, in stage order) must outlive this; `on_failed` runs
  // once, from inside the network's delivery, at the first transfer that found no route.
  PipelineJob(Engine& engine, Network& network, training::DataParallelJob& core, StageLayout layout,
              Options options, std::function<void()> on_failed);
  ~PipelineJob() override;
  PipelineJob(const PipelineJob&) = delete;
  PipelineJob& operator=(const PipelineJob&) = delete;

  // The schedule the core runs (set it before the core starts).
  const training::PipelineSchedule& schedule() const { return schedule_; }
  const StageLayout& layout() const { return layout_; }

  // The core's gradient sink: every stage's gradient path.
  training::StageGradients& gradients() { return *gradients_; }
  void op_done(std::size_t worker, const training::ScheduledOp& op) override;

  // Over every stage's strategy: gradient traffic; and the activation messages'.
  std::int64_t gradient_bytes_sent() const { return gradients_->bytes_sent(); }
  std::int64_t gradient_bytes_delivered() const { return gradients_->bytes_delivered(); }
  std::uint64_t gradient_messages() const { return gradients_->messages(); }
  std::int64_t activation_bytes_sent() const { return messages_.bytes_sent(); }
  std::int64_t activation_bytes_delivered() const { return messages_.bytes_delivered(); }
  std::uint64_t activation_messages() const { return messages_.calls(); }
  // When a stage's strategy last reported a chunk (a watchdog's sign of progress).
  Time last_event() const { return gradients_->last_event(); }

 private:
  Engine& engine_;
  training::DataParallelJob& core_;
  StageLayout layout_;
  Options options_;
  training::PipelineSchedule schedule_;
  collectives::PointToPoint messages_;
  std::unique_ptr<training::StageGradients> gradients_;
  std::function<void()> on_failed_;
  bool failed_ = false;
};

}  // namespace mlsim::cluster
