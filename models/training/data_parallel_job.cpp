#include "models/training/data_parallel_job.hpp"

#include <algorithm>

#include "sim_core/base/error.hpp"

namespace mlsim::training {

DataParallelJob::DataParallelJob(Engine& engine, Compute& compute, JobSpec spec)
    : engine_(engine), compute_(compute), spec_(std::move(spec)) {
  const std::size_t layers = spec_.parameters.size();
  MLSIM_CHECK(layers > 0 && !spec_.workers.empty() && spec_.iterations > 0,
              "a job needs layers, workers and iterations");
  MLSIM_CHECK(spec_.times.size() == spec_.workers.size() &&
                  std::all_of(spec_.times.begin(), spec_.times.end(),
                              [&](const auto& t) { return t.size() == layers; }),
              "layer times need one entry per worker and layer");
  MLSIM_CHECK(spec_.fetched_each_iteration.empty() || spec_.fetched_each_iteration.size() == layers,
              "fetched layers need one entry per layer");
  workers_.resize(spec_.workers.size());
  for (Worker& wk : workers_) {
    wk.updated.assign(layers, 0);
    wk.fetched.assign(layers, 0);
  }
}

DataParallelJob::~DataParallelJob() {
  // A job killed mid-iteration (its host failed): the ops in progress must not call back.
  for (Worker& wk : workers_)
    if (wk.busy) compute_.cancel(wk.op);
}

void DataParallelJob::start() {
  MLSIM_CHECK(sink_ != nullptr, "a training job needs a gradient sink");
  last_compute_end_ = engine_.now();
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

void DataParallelJob::try_start(std::size_t w) {
  Worker& wk = workers_[w];
  if (wk.busy || wk.computing_done || aborted_) return;
  const std::size_t layers = spec_.parameters.size();
  std::size_t layer = 0;
  Time nominal;
  if (wk.forward) {
    if (wk.position == 0 && wk.iteration >= gate_) return;  // held before this iteration
    layer = wk.position;
    if (wk.updated[layer] < wk.iteration) return;  // its parameters are not back yet
    if (!spec_.fetched_each_iteration.empty() && spec_.fetched_each_iteration[layer] &&
        wk.fetched[layer] <= wk.iteration)
      return;  // this iteration's parameters are not fetched yet
    if (w == 0 && layer == 0) iteration_starts_.push_back(engine_.now());
    nominal = spec_.times[w][layer].forward;
  } else {
    layer = layers - 1 - wk.position;
    nominal = spec_.times[w][layer].backward;
  }
  wk.nominal_s += nominal.seconds();
  wk.op_started = engine_.now();
  wk.busy = true;
  const bool forward = wk.forward;
  wk.op = compute_.run(spec_.workers[w], FixedWork{nominal},
                       [this, w, layer, forward] { op_done(w, layer, forward); });
}

void DataParallelJob::op_done(std::size_t w, std::size_t layer, bool forward) {
  if (aborted_) return;
  last_compute_end_ = engine_.now();
  Worker& wk = workers_[w];
  wk.busy = false;
  wk.actual_s += (engine_.now() - wk.op_started).seconds();
  const std::size_t layers = spec_.parameters.size();
  if (forward) {
    if (++wk.position == layers) {
      wk.forward = false;
      wk.position = 0;
    }
  } else {
    ++wk.position;
    const bool last = wk.position == layers;
    if (last) {
      ++iterations_done_;
      ++wk.iteration;
      wk.forward = true;
      wk.position = 0;
      if (wk.iteration == spec_.iterations) wk.computing_done = true;
    }
    if (spec_.parameters[layer] == 0) {
      ++wk.updated[layer];  // nothing to send: the layer is up to date
    } else {
      ++pending_updates_;
      sink_->gradient_ready(w, layer);
    }
    if (last) {
      if (hook_) hook_->iteration_done(w, wk.iteration, wk.computing_done);
      check_progress();
    }
  }
  try_start(w);
}

void DataParallelJob::parameters_back(std::size_t w, std::size_t layer) {
  MLSIM_CHECK(pending_updates_ > 0, "parameters came back that were never sent");
  ++workers_[w].updated[layer];
  --pending_updates_;
  try_start(w);
}

void DataParallelJob::parameters_fetched(std::size_t w, std::size_t layer) {
  MLSIM_CHECK(!spec_.fetched_each_iteration.empty() && spec_.fetched_each_iteration[layer],
              "parameters fetched for a layer that is not fetched each iteration");
  ++workers_[w].fetched[layer];
  try_start(w);
}

bool DataParallelJob::drained() const {
  if (pending_updates_ > 0) return false;
  for (const Worker& wk : workers_)
    if (!(wk.forward && wk.position == 0 && !wk.busy && wk.iteration == gate_)) return false;
  return true;
}

void DataParallelJob::check_progress() {
  if (gate_ != kNoHold && !drain_reported_ && drained()) {
    drain_reported_ = true;
    on_drained_();
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

void DataParallelJob::release_hold() {
  gate_ = kNoHold;
  on_drained_ = nullptr;
  for (std::size_t w = 0; w < workers_.size(); ++w) try_start(w);
}

}  // namespace mlsim::training
