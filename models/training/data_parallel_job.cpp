#include "models/training/data_parallel_job.hpp"

#include <algorithm>
#include <optional>
#include <span>

#include "sim_core/base/error.hpp"

namespace mlsim::training {

DataParallelJob::DataParallelJob(Engine& engine, Compute& compute, JobSpec spec)
    : engine_(engine),
      compute_(compute),
      spec_(std::move(spec)),
      layer_by_layer_(spec_.parameters.size()) {
  const std::size_t layers = spec_.parameters.size();
  MLSIM_CHECK(layers > 0 && !spec_.workers.empty() && spec_.iterations > 0,
              "a job needs layers, workers and iterations");
  auto per_worker_and_layer = [&](const auto& t) {
    return t.size() == spec_.workers.size() &&
           std::all_of(t.begin(), t.end(), [&](const auto& w) { return w.size() == layers; });
  };
  // Neither: a job whose ops a model prices (set_op_pricer, checked at start()).
  MLSIM_CHECK(spec_.layer_seconds.empty()
                  ? spec_.times.empty() || per_worker_and_layer(spec_.times)
                  : spec_.times.empty() && per_worker_and_layer(spec_.layer_seconds),
              "layer times need one entry per worker and layer");
  MLSIM_CHECK(spec_.fetched_each_iteration.empty() || spec_.fetched_each_iteration.size() == layers,
              "fetched layers need one entry per layer");
  workers_.resize(spec_.workers.size());
  for (Worker& wk : workers_) {
    wk.handed.assign(layers, 0);
    wk.updated.assign(layers, 0);
    wk.fetched.assign(layers, 0);
  }
}

DataParallelJob::~DataParallelJob() {
  // A job killed mid-iteration (its host failed): the ops in progress must not call back.
  for (Worker& wk : workers_) {
    if (!wk.busy || wk.sending) continue;
    if (wk.op.valid()) compute_.cancel(wk.op);
    engine_.cancel(wk.collective);
  }
}

void DataParallelJob::start() {
  MLSIM_CHECK(sink_ != nullptr, "a training job needs a gradient sink");
  MLSIM_CHECK(pricer_ != nullptr || !spec_.times.empty() || !spec_.layer_seconds.empty(),
              "a training job needs layer times or an op pricer");
  last_compute_end_ = engine_.now();
  for (Worker& wk : workers_) wk.last_update = engine_.now();
  for (std::size_t w = 0; w < workers_.size(); ++w) try_start(w);
}

double DataParallelJob::progress() const {
  return static_cast<double>(iterations_done_) /
         static_cast<double>(spec_.iterations * workers_.size());
}

std::vector<double> DataParallelJob::iteration_seconds() const {
  std::vector<double> out;
  for (std::size_t i = 0; i < iteration_starts_.size(); ++i) {
    const Time end = i + 1 < iteration_starts_.size() ? iteration_starts_[i + 1] : finish_;
    out.push_back((end - iteration_starts_[i]).seconds());
  }
  return out;
}

std::vector<double> DataParallelJob::take_compute_slowdown() {
  std::vector<double> out;
  for (Worker& wk : workers_) {
    out.push_back(wk.nominal_s > 0 ? wk.actual_s / wk.nominal_s : 1.0);
    wk.nominal_s = wk.actual_s = 0;
  }
  return out;
}

double DataParallelJob::op_seconds(std::size_t w, const ScheduledOp& op) const {
  // Summed from the range's first layer, so that a one-layer op takes exactly its layer's time.
  auto layer = [&](std::size_t l) {
    if (!spec_.layer_seconds.empty()) {
      const LayerSeconds& t = spec_.layer_seconds[w][l];
      return op.forward ? t.forward : t.backward;
    }
    const LayerTimes& t = spec_.times[w][l];
    return (op.forward ? t.forward : t.backward).seconds();
  };
  double s = layer(op.first_layer);
  for (std::size_t l = op.first_layer + 1; l < op.end_layer; ++l) s += layer(l);
  return s;
}

void DataParallelJob::try_start(std::size_t w) {
  Worker& wk = workers_[w];
  std::optional<ScheduledOp> next;
  for (;;) {
    if (wk.busy || wk.computing_done || aborted_) return;
    const bool first = wk.forwards == 0 && wk.backwards == 0;
    if (first && wk.iteration >= gate_) return;  // held before this iteration
    next = schedule_->next(w, wk.forwards, wk.backwards);
    if (next) break;
    // Nothing (more) to do in this iteration: a worker the schedule gives no op, or one whose
    // schedule was cut short while it waited.
    count_iteration(w);
    report_iteration(w);
  }
  const ScheduledOp& op = *next;
  for (std::size_t l = op.first_layer; l < op.end_layer; ++l) {
    if (wk.updated[l] < wk.handed[l]) return;  // its parameters are not back yet
    if (op.forward && !spec_.fetched_each_iteration.empty() && spec_.fetched_each_iteration[l] &&
        wk.fetched[l] <= wk.iteration)
      return;  // this iteration's parameters are not fetched yet
  }
  if (op.needs_input && !wk.inputs.erase({op.micro_batch, op.forward})) return;  // no input yet
  if (w == 0 && wk.forwards == 0 && wk.backwards == 0) iteration_starts_.push_back(engine_.now());
  wk.op_started = engine_.now();
  wk.busy = true;
  wk.running = op;
  if (pricer_) {
    pricer_->steps(w, op, wk.steps);
    wk.step = 0;
    for (const OpStep& step : wk.steps)
      wk.nominal_s += step.kind == OpStep::Kind::kCompute ? step.seconds : step.duration.seconds();
    run_step(w);
    return;
  }
  const double nominal = op_seconds(w, op);
  wk.nominal_s += nominal;
  wk.op = compute_.run_for(std::span<const NodeId>(&spec_.workers[w], 1),
                           std::span<const double>(&nominal, 1), [this, w] { op_done(w); });
}

void DataParallelJob::run_step(std::size_t w) {
  Worker& wk = workers_[w];
  wk.op = {};
  wk.collective = {};
  if (wk.step == wk.steps.size()) {
    op_done(w);
    return;
  }
  const std::size_t index = wk.step++;
  const OpStep& step = wk.steps[index];
  if (observer_) observer_->step_started(w, wk.running, index, step);
  auto next = [this, w] { run_step(w); };
  if (step.kind == OpStep::Kind::kCollective && step.rendezvous) {
    wk.in_rendezvous = true;  // until the model's step_done()
  } else if (step.kind == OpStep::Kind::kCollective) {
    wk.collective = engine_.schedule_in(step.duration, next);
  } else {
    wk.op = compute_.run_for(std::span<const NodeId>(&spec_.workers[w], 1),
                             std::span<const double>(&step.seconds, 1), next);
  }
}

void DataParallelJob::step_done(std::size_t w) {
  Worker& wk = workers_[w];
  MLSIM_CHECK(wk.busy && wk.in_rendezvous,
              "a rendezvous step ended on a worker not waiting at one");
  wk.in_rendezvous = false;
  if (aborted_) return;
  run_step(w);
}

void DataParallelJob::count_iteration(std::size_t w) {
  Worker& wk = workers_[w];
  ++iterations_done_;
  ++wk.iteration;
  wk.forwards = wk.backwards = 0;
  if (wk.iteration == spec_.iterations) wk.computing_done = true;
}

void DataParallelJob::report_iteration(std::size_t w) {
  if (hook_) hook_->iteration_done(w, workers_[w].iteration, workers_[w].computing_done);
  check_progress();
}

void DataParallelJob::op_done(std::size_t w) {
  if (aborted_) return;
  last_compute_end_ = engine_.now();
  Worker& wk = workers_[w];
  wk.actual_s += (engine_.now() - wk.op_started).seconds();
  if (wk.running.ends_after_send) {
    // The worker stays busy until output_sent(); the observer starts the send (and may report
    // it delivered at once).
    wk.sending = true;
    if (observer_) observer_->op_done(w, wk.running);
    return;
  }
  end_op(w, true);
}

void DataParallelJob::output_sent(std::size_t w) {
  Worker& wk = workers_[w];
  MLSIM_CHECK(wk.busy && wk.sending,
              "an output was sent by a worker whose op does not wait for it");
  if (aborted_) return;
  wk.sending = false;
  end_op(w, false);
}

void DataParallelJob::end_op(std::size_t w, bool notify) {
  Worker& wk = workers_[w];
  wk.busy = false;
  const ScheduledOp op = wk.running;
  (op.forward ? wk.forwards : wk.backwards)++;
  if (notify && observer_) observer_->op_done(w, op);
  const bool last = !schedule_->next(w, wk.forwards, wk.backwards);
  if (last) count_iteration(w);
  if (!op.forward && op.hands_gradients) {
    // Every layer of the range counts as handed over before any goes out, so that a sink that
    // gives some back at once cannot start the next op on the rest.
    for (std::size_t l = op.end_layer; l-- > op.first_layer;) {
      ++wk.handed[l];
      if (spec_.parameters[l] == 0) {
        ++wk.updated[l];  // nothing to send: the layer is up to date
      } else {
        ++pending_updates_;
      }
    }
    for (std::size_t l = op.end_layer; l-- > op.first_layer;)
      if (spec_.parameters[l] != 0) sink_->gradient_ready(w, l);
  }
  if (last) report_iteration(w);
  try_start(w);
}

void DataParallelJob::parameters_back(std::size_t w, std::size_t layer) {
  MLSIM_CHECK(pending_updates_ > 0, "parameters came back that were never sent");
  ++workers_[w].updated[layer];
  workers_[w].last_update = engine_.now();
  --pending_updates_;
  try_start(w);
}

void DataParallelJob::expect_parameters(std::size_t w, std::size_t layer) {
  ++workers_[w].handed[layer];
  ++pending_updates_;
}

void DataParallelJob::parameters_fetched(std::size_t w, std::size_t layer) {
  MLSIM_CHECK(!spec_.fetched_each_iteration.empty() && spec_.fetched_each_iteration[layer],
              "parameters fetched for a layer that is not fetched each iteration");
  ++workers_[w].fetched[layer];
  try_start(w);
}

void DataParallelJob::input_arrived(std::size_t w, std::size_t micro_batch, bool forward) {
  workers_[w].inputs.insert({micro_batch, forward});
  try_start(w);
}

std::size_t DataParallelJob::forwards_started(std::size_t w) const {
  const Worker& wk = workers_[w];
  return wk.forwards + (wk.busy && wk.running.forward ? 1 : 0);
}

bool DataParallelJob::drained() const {
  if (pending_updates_ > 0) return false;
  for (const Worker& wk : workers_)
    if (!(wk.forwards == 0 && wk.backwards == 0 && !wk.busy && wk.iteration == gate_)) return false;
  return true;
}

void DataParallelJob::check_progress() {
  if (gate_ != kNoHold && !drain_reported_ && drained()) {
    drain_reported_ = true;
    // Moved out first: the callback may release the hold or hold anew.
    const std::function<void()> on_drained = std::move(on_drained_);
    on_drained_ = nullptr;
    on_drained();
  }
  if (finished_ || pending_updates_ > 0) return;
  for (const Worker& wk : workers_)
    if (!wk.computing_done) return;
  finished_ = true;
  finish_ = engine_.now();
  if (on_finished_) on_finished_();
}

void DataParallelJob::hold_before(std::size_t iteration, std::function<void()> on_drained) {
  MLSIM_CHECK(gate_ == kNoHold, "the job is already held");
  gate_ = iteration;
  on_drained_ = std::move(on_drained);
  drain_reported_ = false;
}

void DataParallelJob::end_segment(std::function<void()> on_drained) {
  // One more iteration, the next segment, held until resume(); workers that had finished their
  // share of this one wait there too.
  const std::size_t next = spec_.iterations++;
  for (Worker& wk : workers_)
    if (wk.iteration < spec_.iterations) wk.computing_done = false;
  hold_before(next, std::move(on_drained));
  // Workers that waited for an op the cut removed move on (or end their iteration).
  for (std::size_t w = 0; w < workers_.size(); ++w) try_start(w);
  check_progress();
}

void DataParallelJob::resume(const OpSchedule& next) {
  schedule_ = &next;
  release_hold();
}

void DataParallelJob::release_hold() {
  gate_ = kNoHold;
  on_drained_ = nullptr;
  for (std::size_t w = 0; w < workers_.size(); ++w) try_start(w);
}

}  // namespace mlsim::training
