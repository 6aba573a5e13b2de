#include "models/ina/ina_job.hpp"

#include <algorithm>

#include "sim_core/base/error.hpp"

namespace mlsim::ina {

InaJob::InaJob(Engine& engine, Compute& compute, std::uint16_t id,
               std::shared_ptr<const JobPlan> plan, training::JobSpec core,
               const training::SchedulerFactory& scheduler,
               training::SchedulerConfig scheduler_config, training::Ordering ordering,
               JobPriority priority, SenderConfig sender, InaCounters& counters, InaSync::Send send,
               Finished finished)
    : engine_(engine),
      id_(id),
      priority_(priority.rank),
      stall_timeout_(sender.stall_timeout),
      core_(engine, compute, std::move(core)),
      path_(engine, core_, scheduler, scheduler_config),
      on_finished_(std::move(finished)) {
  MLSIM_CHECK(plan->partition == scheduler_config.partition,
              "the job plan is cut at the scheduler's partition");
  MLSIM_CHECK(plan->layers.size() == core_.spec().parameters.size(), "a plan layer per layer");
  const int workers = static_cast<int>(core_.spec().workers.size());
  sync_ = std::make_unique<InaSync>(engine, path_, id, std::move(plan), workers,
                                    std::move(priority), sender, counters, std::move(send));
  // Before set_sync, which builds the schedulers. An in-network aggregate needs every worker's
  // packet and a chunk's credit returns only with it; see ClusterParams::ordering.
  path_.set_ordering(ordering);
  core_.set_gradient_sink(&path_);
  core_.set_on_finished([this] { ended(); });
  path_.set_sync(sync_.get());
}

void InaJob::start() {
  started_ = engine_.now();
  sync_->set_started(started_);
  arm_watchdog();
  core_.start();
}

void InaJob::ended() {
  engine_.cancel(watchdog_);
  finished_at_ = core_.finish_time();
  on_finished_(*this);
}

std::vector<Time> InaJob::iteration_marks() const {
  std::vector<Time> marks = core_.iteration_starts();
  if (core_.finished()) marks.push_back(core_.finish_time());
  return marks;
}

void InaJob::arm_watchdog() {
  if (stall_timeout_ <= Time::zero()) return;
  watchdog_ = engine_.schedule_at(last_progress() + stall_timeout_, [this] { on_watchdog(); });
}

// Fires at the earliest time the job can have stalled for the whole timeout; if something
// happened since, it looks again from the last progress (one event per timeout per job).
void InaJob::on_watchdog() {
  if (engine_.now() - last_progress() < stall_timeout_) {
    arm_watchdog();
    return;
  }
  finished_at_ = engine_.now();
  core_.abort();
  sync_->abort();
  on_finished_(*this);
}

}  // namespace mlsim::ina
