#include "models/commsched/training_job.hpp"

#include "models/training/policies.hpp"
#include "sim_core/base/error.hpp"

namespace mlsim::commsched {
namespace {

const char* sync_name(Mode mode) {
  return mode == Mode::kParameterServer ? "ps" : "ring";
}
const char* scheduler_name(SchedulerKind kind) {
  return kind == SchedulerKind::kFifo ? "fifo" : "bytescheduler";
}

training::JobSpec core_spec(const JobSpec& spec) {
  MLSIM_CHECK(spec.worker_times.empty() || spec.worker_times.size() == spec.workers.size(),
              "worker times need one entry per worker");
  training::JobSpec s;
  for (const Layer& l : spec.layers) s.parameters.push_back(l.parameters);
  s.workers = spec.workers;
  s.iterations = spec.iterations;
  s.times = spec.worker_times;
  if (s.times.empty()) {
    std::vector<LayerTimes> same;
    for (const Layer& l : spec.layers) same.push_back({l.forward, l.backward});
    s.times.assign(spec.workers.size(), same);
  }
  return s;
}

}  // namespace

SchedulerConfig fifo_config(Mode mode) {
  return mode == Mode::kParameterServer ? SchedulerConfig{0, 0} : SchedulerConfig{0, 1};
}

TrainingJob::TrainingJob(Engine& engine, Network& network, Compute& compute, JobSpec spec,
                         SchedulerConfig initial)
    : engine_(engine),
      spec_(std::move(spec)),
      core_(engine, compute, core_spec(spec_)),
      path_(engine, core_,
            training::training_policies().schedulers.get(scheduler_name(spec_.scheduler), "").value,
            initial, spec_.record_trace) {
  MLSIM_CHECK(spec_.mode == Mode::kAllReduce || !spec_.servers.empty(), "PS mode needs a server");
  training::SyncOptions options;
  options.workers = spec_.workers;
  options.servers = spec_.servers;
  options.layer_parameters = core_.spec().parameters;
  options.bytes_per_parameter = spec_.bytes_per_parameter;
  options.host.message_overhead = spec_.message_cpu;
  options.host.message_latency = spec_.message_overhead;
  options.host.ps_aggregation = spec_.ps_aggregation;
  options.bigarray_bound = spec_.bigarray_bound;
  options.credit_until_pull = spec_.credit_scope == CreditScope::kPushPull;
  options.in_order_connections = spec_.ps_connections == PsConnections::kInOrder;
  sync_ = training::training_policies()
              .syncs.get(sync_name(spec_.mode), "")
              .value(training::SyncSetup{engine, network, path_, std::move(options)});
  if (spec_.scheduler == SchedulerKind::kFifo) {
    MLSIM_CHECK(spec_.fifo_engines >= 0, "a negative number of FIFO engines");
    path_.set_fifo_engines(spec_.fifo_engines);
  } else {
    path_.set_credit_delay(spec_.credit_delay);
    if (spec_.mode == Mode::kParameterServer && spec_.scheduling == Scheduling::kRankZero) {
      path_.set_scheduling_owners(1);
      // The plugin's per-partition barrier key: rank 0's release paces every worker.
      path_.set_start_barrier(true);
    }
  }
  path_.set_sync(sync_.get());
  core_.set_gradient_sink(&path_);
  core_.set_iteration_hook(this);
}

void TrainingJob::iteration_done(std::size_t worker, std::size_t iteration, bool last) {
  if (worker != 0 || controller_ == nullptr || last) return;
  if (auto d = controller_->at_iteration(iteration, *this)) apply(*d, iteration);
}

void TrainingJob::apply(const Decision& d, std::size_t iteration) {
  const SchedulerConfig current = config();
  if (d.config == current && !restart_) return;
  ConfigChange change{engine_.now(), engine_.now(), iteration, current, d.config, false};
  if (sync_->layout_matters() && d.config.partition != current.partition) {
    // The kvstore's keys change: stop, drain, restart with the new partition.
    change.restart = true;
    changes_.push_back(change);
    restart_ = d;
    restart_decided_ = engine_.now();
    core_.hold_before(iteration, [this] {
      engine_.schedule_in(restart_->pause, [this] {
        path_.set_config(restart_->config);
        paused_ += engine_.now() - restart_decided_;
        changes_.back().applied = engine_.now();
        restart_.reset();
        core_.release_hold();
      });
    });
    return;
  }
  path_.set_config(d.config);
  changes_.push_back(change);
}

}  // namespace mlsim::commsched
