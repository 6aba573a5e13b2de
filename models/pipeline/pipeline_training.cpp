#include "models/pipeline/pipeline_training.hpp"

#include <algorithm>

#include "models/pipeline/autopipe_planner.hpp"
#include "models/pipeline/one_f_one_b.hpp"
#include "models/pipeline/pipedream_partitioner.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/hardware/profile_scaling.hpp"

namespace mlsim::pipeline {

PipelineTraining::PipelineTraining(Engine& engine, Network& network, Compute& compute,
                                   HostSpeeds& speeds, LinkConditions& links, TrainingParams params)
    : engine_(engine),
      network_(network),
      compute_(compute),
      speeds_(speeds),
      links_(links),
      params_(std::move(params)),
      messages_(engine, network, params_.collective_costs, &links) {
  MLSIM_CHECK(!params_.hosts.empty() && params_.host_links.size() == params_.hosts.size() &&
                  params_.latency_out.size() == params_.hosts.size() &&
                  params_.latency_in.size() == params_.hosts.size() && params_.minibatches > 0,
              "pipeline needs its hosts' links and at least one minibatch");
  MLSIM_CHECK(params_.profiled_on != nullptr, "pipeline needs the GPU its profile was measured on");
  // Every layer's nominal time on every host's GPU: a re-partition may move any layer anywhere.
  for (NodeId host : params_.hosts) {
    StageHost h;
    for (const LayerCost& l : params_.layers) {
      const LayerWork w = layer_work(l.forward_s, l.backward_s, l.parameter_bytes,
                                     l.activation_bytes, *params_.profiled_on);
      h.forward_s.push_back(compute_.nominal_seconds(host, w.forward));
      h.backward_s.push_back(compute_.nominal_seconds(host, w.backward));
    }
    now_.hosts.push_back(std::move(h));
  }
  speeds_.on_change([this](NodeId host, double, double speed) { speed_changed(host, speed); });
  links_.on_change([this](std::span<const LinkId> changed) { links_changed(changed); });
}

double PipelineTraining::host_bandwidth(std::size_t h) const {
  const auto [up, down] = params_.host_links[h];
  return std::min(links_.bandwidth(up).bytes_per_s, links_.bandwidth(down).bytes_per_s);
}

Partition PipelineTraining::plan(const Conditions& c) {
  if (params_.policy == Policy::kPipeDream)
    return pipedream_partition(params_.layers, c,
                               {params_.straight, params_.activation_compression_ratio});
  const Plan best = autopipe_plan(params_.layers, c, {params_.straight});
  configurations_timed_ += best.evaluated;
  return best.partition;
}

void PipelineTraining::start() {
  started_ = true;
  const std::size_t n = params_.hosts.size();
  for (std::size_t h = 0; h < n; ++h) {
    now_.hosts[h].speed = speeds_.speed(params_.hosts[h]);
    now_.bandwidth.push_back(host_bandwidth(h));
  }
  now_.latency_out = params_.latency_out;
  now_.latency_in = params_.latency_in;
  const Partition p = plan(now_);
  initial_estimate_s_ = steady_state_seconds(params_.layers, p, now_);
  initial_pipedream_objective_s_ = pipedream_objective(
      params_.layers, p, now_, {params_.straight, params_.activation_compression_ratio});
  begin_segment(p);
}

void PipelineTraining::begin_segment(const Partition& p) {
  partition_ = p;
  history_.emplace_back(engine_.now(), p);
  Conditions unit = now_;
  for (StageHost& h : unit.hosts) h.speed = 1;
  base_costs_ = stage_costs(params_.layers, p, unit);
  segment_limit_ = params_.minibatches - completed_;
  round_done_.clear();
  for (auto& [key, ar] : allreduces_) retired_allreduces_.push_back(std::move(ar));
  allreduces_.clear();
  workers_.assign(p.hosts_used(), Worker{});
  for (std::size_t s = 0; s < p.stages(); ++s) {
    for (std::size_t q = 0; q < p.replication(s); ++q) {
      Worker& w = workers_[p.first_host(s) + q];
      w.stage = s;
      w.replica = q;
      w.replicas = p.replication(s);
      w.limit = in_flight_limit(p.first_host(s), p.replication(s), p.hosts_used());
    }
  }
  assign_minibatches();
  for (std::size_t w = 0; w < workers_.size(); ++w) try_start(w);
}

void PipelineTraining::assign_minibatches() {
  for (Worker& w : workers_)
    w.minibatches = replica_minibatches(w.replica, w.replicas, segment_limit_);
}

void PipelineTraining::try_start(std::size_t w) {
  Worker& wk = workers_[w];
  if (wk.busy || wk.in_allreduce) return;
  const Op op = next_op_limited(wk.limit, wk.forwards, wk.backwards, wk.minibatches);
  if (op == Op::kNone) return;
  const bool forward = op == Op::kForward;
  const std::size_t k = forward ? wk.forwards : wk.backwards;
  if (forward && wk.stage > 0) {
    if (!wk.activations.erase(k)) return;  // waits for its input
  } else if (!forward) {
    if (!wk.gradients.erase(k)) return;
  }
  wk.busy = true;
  wk.running_forward = forward;
  const double nominal = forward ? base_costs_.forward_s[w] : base_costs_.backward_s[w];
  compute_.run_for(std::span<const NodeId>(&params_.hosts[w], 1),
                   std::span<const double>(&nominal, 1),
                   [this, w, forward, k] { op_done(w, forward, k); });
}

void PipelineTraining::op_done(std::size_t w, bool forward, std::size_t k) {
  // Earlier segments' all-reduces go here, where none of their callbacks can be running.
  for (const auto& ar : retired_allreduces_) failed_transfers_ += ar->failed_transfers();
  retired_allreduces_.clear();
  Worker& wk = workers_[w];
  wk.busy = false;
  const std::size_t s = wk.stage, m = wk.replica + k * wk.replicas;  // segment minibatch
  // Minibatch m's activation (forward) or gradient (backward) to the replica of stage `to` that
  // runs it (round-robin).
  auto send = [this, w, m](std::size_t to, std::size_t boundary, bool activation) {
    const std::size_t r = partition_.replication(to);
    const std::size_t dest = partition_.first_host(to) + m % r, k_dest = m / r;
    // A message whose transfer fails (no route left) never arrives: counted, the pipeline stalls.
    messages_.send(params_.hosts[w], params_.hosts[dest],
                   Bytes{static_cast<std::int64_t>(base_costs_.boundary_bytes[boundary])},
                   [this, dest, k_dest, activation](const collectives::CollectiveResult&) {
                     Worker& d = workers_[dest];
                     (activation ? d.activations : d.gradients).insert(k_dest);
                     try_start(dest);
                   });
  };
  if (forward) {
    ++wk.forwards;
    if (s + 1 < partition_.stages()) {
      send(s + 1, s, true);
    } else {
      wk.gradients.insert(k);  // the loss is computed where the forward ends
    }
  } else {
    ++wk.backwards;
    if (s > 0) {
      send(s - 1, s - 1, false);
    } else {
      ++completed_;
      progress_series_.add(engine_.now(), {static_cast<double>(completed_)});
      if (finished()) finish_ = engine_.now();
    }
    if (wk.replicas > 1) join_allreduce(w, k);
  }
  try_start(w);
  if (switching_) maybe_resume();
}

void PipelineTraining::join_allreduce(std::size_t w, std::size_t k) {
  workers_[w].in_allreduce = true;
  ++round_done_[{workers_[w].stage, k}];
  maybe_start_allreduce(workers_[w].stage, k);
}

void PipelineTraining::maybe_start_allreduce(std::size_t s, std::size_t k) {
  const std::size_t first = partition_.first_host(s), replicas = partition_.replication(s);
  // The replicas that have a k-th minibatch in this segment take part.
  std::size_t members = 0;
  for (std::size_t q = 0; q < replicas; ++q) members += workers_[first + q].minibatches > k ? 1 : 0;
  if (round_done_[{s, k}] < members) return;
  round_done_.erase({s, k});
  auto release = [this, first, members] {
    if (finished()) finish_ = engine_.now();  // the last weight update ends the job
    for (std::size_t q = 0; q < members; ++q) workers_[first + q].in_allreduce = false;
    for (std::size_t q = 0; q < members; ++q) try_start(first + q);
    if (switching_) maybe_resume();
  };
  if (members < 2 || base_costs_.parameter_bytes[s] <= 0) {
    // Nothing to reduce; released by an event, never from inside the caller.
    engine_.schedule_in(Time::ns(0), release);
    return;
  }
  allreduce_bytes_ += base_costs_.parameter_bytes[s];
  ++allreduce_count_;
  // The training core's ring strategy over the members, one chunk (one_f_one_b.hpp's estimate:
  // 2 (n - 1) steps of P / n); a failed transfer stalls the stage, as a failed activation does.
  std::unique_ptr<StageAllReduce>& ar = allreduces_[{s, members}];
  if (!ar) {
    std::vector<NodeId> hosts(params_.hosts.begin() + static_cast<std::ptrdiff_t>(first),
                              params_.hosts.begin() + static_cast<std::ptrdiff_t>(first + members));
    ar = std::make_unique<StageAllReduce>(
        engine_, network_, std::move(hosts),
        static_cast<std::int64_t>(base_costs_.parameter_bytes[s]), params_.collective_costs.costs,
        params_.collective_costs.host, &links_, std::move(release));
  }
  for (std::size_t q = 0; q < members; ++q) ar->contribute(q);
}

void PipelineTraining::speed_changed(NodeId host, double speed) {
  if (!started_) return;  // start() reads the speeds
  bool mine = false;
  for (std::size_t h = 0; h < params_.hosts.size(); ++h)
    if (params_.hosts[h] == host) {
      now_.hosts[h].speed = speed;
      mine = true;
    }
  if (mine) conditions_changed();
}

void PipelineTraining::links_changed(std::span<const LinkId> changed) {
  if (!started_) return;
  bool mine = false;
  for (LinkId l : changed)
    for (const auto& [up, down] : params_.host_links) mine = mine || l == up || l == down;
  if (!mine) return;
  for (std::size_t h = 0; h < params_.hosts.size(); ++h) now_.bandwidth[h] = host_bandwidth(h);
  conditions_changed();
}

void PipelineTraining::conditions_changed() {
  if (params_.policy == Policy::kAutoPipe && !finished()) {
    if (switching_) {
      change_pending_ = true;
    } else {
      consider_repartition();
    }
  }
}

void PipelineTraining::consider_repartition() {
  const Plan best = autopipe_plan(params_.layers, now_, {params_.straight});
  configurations_timed_ += best.evaluated;
  const double current = steady_state_seconds(params_.layers, partition_, now_);
  ++plans_evaluated_;
  if (best.partition == partition_ ||
      best.seconds_per_minibatch >= current * (1 - params_.min_gain))
    return;
  switching_ = true;
  next_ = best.partition;
  switch_started_ = engine_.now();
  // Stop admitting: the segment ends with the minibatches stage 0's replicas have started (the
  // highest of them and every one below it, so that the segment stays a prefix).
  std::size_t limit = 0;
  for (const Worker& w : workers_) {
    if (w.stage != 0) continue;
    const std::size_t started = w.forwards + (w.busy && w.running_forward ? 1 : 0);
    if (started > 0) limit = std::max(limit, w.replica + (started - 1) * w.replicas + 1);
  }
  segment_limit_ = limit;
  assign_minibatches();
  // Rounds that waited for a replica whose minibatch the segment no longer has start now.
  std::vector<std::pair<std::size_t, std::size_t>> waiting;
  for (const auto& [round, done] : round_done_) waiting.push_back(round);
  for (const auto& [s, k] : waiting) maybe_start_allreduce(s, k);
  // Parameters (and optimizer state) each host lacks, one transfer per pair of hosts.
  for (const Migration& mv : migrations(params_.layers, partition_, next_)) {
    const double bytes = mv.parameter_bytes * params_.migrated_state_factor;
    migrated_bytes_ += bytes;
    ++migrations_in_flight_;
    // A failed migration never completes: the switch does not end (counted in failed_transfers).
    messages_.send(params_.hosts[mv.from_host], params_.hosts[mv.to_host],
                   Bytes{static_cast<std::int64_t>(bytes)},
                   [this](const collectives::CollectiveResult&) {
                     --migrations_in_flight_;
                     maybe_resume();
                   });
  }
  // Workers waiting for a forward the segment no longer has move on to their backwards.
  for (std::size_t w = 0; w < workers_.size(); ++w) try_start(w);
  maybe_resume();
}

void PipelineTraining::maybe_resume() {
  if (!switching_ || migrations_in_flight_ > 0) return;
  for (const Worker& w : workers_)
    if (w.busy || w.in_allreduce || w.backwards < w.minibatches || w.forwards < w.minibatches)
      return;
  switching_ = false;
  switch_ns_ += (engine_.now() - switch_started_).count_ns();
  ++repartitions_;
  begin_segment(next_);
  if (change_pending_) {
    change_pending_ = false;
    consider_repartition();
  }
}

void PipelineTraining::report(Results& out) const {
  const double t = finish_.seconds();
  const double n = static_cast<double>(params_.minibatches);
  out.set_metric("completed", finished() ? 1 : 0);
  out.set_metric("minibatches", static_cast<double>(completed_));
  out.set_metric("time_s", t);
  out.set_metric("throughput_samples_per_s",
                 finished() && t > 0 ? n * params_.samples_per_minibatch / t : 0);
  out.set_metric("seconds_per_minibatch", finished() ? t / n : 0);
  out.set_metric("repartitions", static_cast<double>(repartitions_));
  out.set_metric("switch_time_s", static_cast<double>(switch_ns_) * 1e-9);
  out.set_metric("migrated_bytes", migrated_bytes_);
  out.set_metric("allreduces", static_cast<double>(allreduce_count_));
  out.set_metric("allreduce_bytes", allreduce_bytes_);
  std::uint64_t failed = failed_transfers_ + messages_.failed_transfers();
  for (const auto& [key, ar] : allreduces_) failed += ar->failed_transfers();
  for (const auto& ar : retired_allreduces_) failed += ar->failed_transfers();
  out.set_metric("failed_transfers", static_cast<double>(failed));
  out.set_metric("initial_estimate_s_per_minibatch", initial_estimate_s_);
  out.set_metric("initial_pipedream_objective_s", initial_pipedream_objective_s_);
  auto& d = out.details();
  d["policy"] = params_.policy == Policy::kPipeDream ? "pipedream" : "autopipe";
  d["hosts"] = params_.hosts.size();
  d["layers"] = params_.layers.size();
  d["plans_evaluated"] = plans_evaluated_;
  d["configurations_timed"] = configurations_timed_;
  auto& hist = d["partitions"];
  hist = nlohmann::json::array();
  for (const auto& [at, p] : history_) {
    std::vector<std::size_t> replicas;
    for (std::size_t s = 0; s < p.stages(); ++s) replicas.push_back(p.replication(s));
    hist.push_back({{"from_s", at.seconds()}, {"first_layer", p.first}, {"replicas", replicas}});
  }
  out.add_series(progress_series_);
}

}  // namespace mlsim::pipeline
