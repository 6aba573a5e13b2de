#pragma once
// One ina training job, assembled from the training core (models/training, docs/training.md):
// the core's compute loop (DataParallelJob: forward and backward per layer on the platform's
// Compute, the next iteration's forward of a layer gated on its aggregated gradient), its
// gradient path with the chosen communication scheduler (the framework's FIFO, or ByteScheduler)
// and in-network aggregation as the synchronisation strategy (InaSync: the packets through the
// switch program). What is ina's own is the job's stall watchdog:
//
// A job in which nothing happens for SenderConfig::stall_timeout (no compute op ends, no worker
// receives a new result) is aborted and reported failed, as a training framework's collective
// watchdog kills a hung job (cluster_params.hpp). One watchdog event per timeout per job; a
// finished job cancels it.
#include <cstdint>
#include <memory>
#include <vector>

#include "models/ina/ina_sync.hpp"
#include "models/training/data_parallel_job.hpp"
#include "models/training/gradient_path.hpp"

namespace mlsim::ina {

class InaJob {
 public:
  using Finished = InlineFunction<void(InaJob&), 16>;

  // `core` gives the workers' hosts and layer times; `plan` is cut at the scheduler's partition
  // (`scheduler_config.partition`). `compute` must outlive the job. `ordering`: who orders the
  // chunks under a scheduler (ClusterParams::ordering).
  InaJob(Engine& engine, Compute& compute, std::uint16_t id, std::shared_ptr<const JobPlan> plan,
         training::JobSpec core, const training::SchedulerFactory& scheduler,
         training::SchedulerConfig scheduler_config, training::Ordering ordering,
         JobPriority priority, SenderConfig sender, InaCounters& counters, InaSync::Send send,
         Finished finished);
  InaJob(const InaJob&) = delete;
  InaJob& operator=(const InaJob&) = delete;

  void start();

  InaSync& sync() { return *sync_; }
  InaSender& worker(std::uint16_t w) { return sync_->sender(w); }
  const training::DataParallelJob& core() const { return core_; }
  std::uint16_t id() const { return id_; }
  const JobPlan& plan() const { return sync_->plan(); }
  int workers() const { return sync_->workers(); }
  int iterations() const { return static_cast<int>(core_.spec().iterations); }
  // DSA: the job's rank by communication intensity (0 = least intensive).
  std::uint32_t priority() const { return priority_; }
  Time started_at() const { return started_; }
  // When the job finished, or was aborted (failed()).
  Time finished_at() const { return finished_at_; }
  bool finished() const { return core_.finished(); }
  bool failed() const { return core_.aborted(); }
  std::int64_t elements_delivered() const { return sync_->elements_delivered(); }
  // Start of each iteration's first forward layer on worker 0; the finish last, if finished.
  std::vector<Time> iteration_marks() const;

 private:
  void ended();  // the core finished
  void arm_watchdog();
  void on_watchdog();
  Time last_progress() const { return std::max(core_.last_compute_end(), sync_->last_result()); }

  Engine& engine_;
  std::uint16_t id_;
  std::uint32_t priority_;
  Time stall_timeout_;
  training::DataParallelJob core_;
  training::GradientPath path_;
  std::unique_ptr<InaSync> sync_;
  Finished on_finished_;
  Time started_, finished_at_;
  EventHandle watchdog_;
};

}  // namespace mlsim::ina
