#include "models/pipeline/pipeline_training.hpp"

#include <algorithm>
#include <cmath>

#include "models/pipeline/autopipe_planner.hpp"
#include "models/pipeline/dp_planner.hpp"
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
      rl_(params_.rl, RandomStream(params_.seed, "pipeline.rl_planner")),
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
  // The core runs every op: the hosts are its workers, each layer's time on each host's GPU its
  // layer_seconds (a stage's op sums them as stage_costs does), a layer's parameters only
  // whether it has any (the all-reduce sends its stage's bytes).
  training::JobSpec spec;
  for (const LayerCost& l : params_.layers)
    spec.parameters.push_back(l.parameter_bytes > 0 ? 1 : 0);
  spec.workers = params_.hosts;
  for (const StageHost& h : now_.hosts) {
    std::vector<training::LayerSeconds> t;
    for (std::size_t l = 0; l < params_.layers.size(); ++l)
      t.push_back({h.forward_s[l], h.backward_s[l]});
    spec.layer_seconds.push_back(std::move(t));
  }
  job_ = std::make_unique<training::DataParallelJob>(engine_, compute_, std::move(spec));
  job_->set_op_observer(this);
  job_->set_gradient_sink(this);
  speeds_.on_change([this](NodeId host, double, double speed) { speed_changed(host, speed); });
  links_.on_change([this](std::span<const LinkId> changed) { links_changed(changed); });
}

double PipelineTraining::host_bandwidth(std::size_t h) const {
  const auto [up, down] = params_.host_links[h];
  return std::min(links_.bandwidth(up).bytes_per_s, links_.bandwidth(down).bytes_per_s);
}

void PipelineTraining::set_routes() {
  HostRoutes r = host_routes(links_, params_.hosts);
  now_.routes = std::move(r.routes);
  route_links_ = std::move(r.links);
}

Partition PipelineTraining::plan(const Conditions& c) {
  if (params_.policy == Policy::kPipeDream) {
    std::vector<PipeDreamOptions::Level> levels = params_.pipedream_levels;
    if (!levels.empty() && levels.back().bandwidth == 0)
      levels.back().bandwidth = *std::min_element(c.bandwidth.begin(), c.bandwidth.end());
    PipeDreamPlan pd = pipedream_plan(params_.layers, c,
                                      {params_.straight, params_.activation_compression_ratio,
                                       params_.memory.capacity, std::move(levels)});
    pipedream_value_s_ = pd.objective_s;
    return std::move(pd.partition);
  }
  return autopipe_search(c).partition;
}

Plan PipelineTraining::autopipe_search(const Conditions& c) {
  const PlannerOptions o{params_.straight, timing(), params_.memory};
  const Plan best = params_.planner == Planner::kRl   ? rl_.plan(params_.layers, c, o)
                    : params_.planner == Planner::kDp ? dp_plan(params_.layers, c, o)
                                                      : autopipe_plan(params_.layers, c, o);
  configurations_timed_ += best.evaluated;
  return best;
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
  set_routes();
  const Partition p = plan(now_);
  initial_estimate_s_ = steady_state_seconds(params_.layers, p, now_, timing());
  // PipeDream's objective knows no schedule: under GPipe it may pick replicas that deadlock.
  MLSIM_CHECK(
      std::isfinite(initial_estimate_s_),
      "this configuration deadlocks under GPipe (a stage has more replicas than the one "
      "before it, and the flush groups are each worker's own); use system.straight_pipeline "
      "or the 1f1b schedule");
  // With levels, the hierarchical program's own value (the one-level objective does not know
  // the servers).
  initial_pipedream_objective_s_ =
      params_.pipedream_levels.empty()
          ? pipedream_objective(params_.layers, p, now_,
                                {params_.straight, params_.activation_compression_ratio})
          : pipedream_value_s_;
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
  std::vector<std::size_t> replicas;
  for (std::size_t s = 0; s < p.stages(); ++s) replicas.push_back(p.replication(s));
  retired_schedule_ = std::move(schedule_);
  schedule_ = std::make_unique<training::PipelineSchedule>(
      params_.schedule, p.first, std::move(replicas), params_.hosts.size(), segment_limit_,
      params_.gpipe_group);
  stage_parameter_layers_.assign(p.stages(), 0);
  for (std::size_t s = 0; s < p.stages(); ++s)
    for (std::size_t l = p.first[s]; l < p.first[s + 1]; ++l)
      stage_parameter_layers_[s] += job_->spec().parameters[l] > 0 ? 1 : 0;
  layers_ready_.assign(params_.hosts.size(), 0);
  rounds_joined_.assign(params_.hosts.size(), 0);
  if (retired_schedule_) {
    job_->resume(*schedule_);
  } else {
    job_->set_schedule(schedule_.get());
    job_->start();
  }
}

void PipelineTraining::op_done(std::size_t w, const training::ScheduledOp& op) {
  // Earlier segments' all-reduces go here, where none of their callbacks can be running.
  for (const auto& ar : retired_allreduces_) failed_transfers_ += ar->failed_transfers();
  retired_allreduces_.clear();
  const training::PipelineSchedule::Worker& wk = schedule_->worker(w);
  const std::size_t s = wk.stage, m = wk.replica + op.micro_batch * wk.replicas;  // segment's
  // Minibatch m's activation (forward) or gradient (backward) to the replica of stage `to` that
  // runs it (round-robin).
  auto send = [this, w, m](std::size_t to, std::size_t boundary, bool activation) {
    const auto [dest, k_dest] = schedule_->worker_of(to, m);
    // A message whose transfer fails (no route left) never arrives: counted, the pipeline stalls.
    messages_.send(params_.hosts[w], params_.hosts[dest],
                   Bytes{static_cast<std::int64_t>(base_costs_.boundary_bytes[boundary])},
                   [this, dest, k_dest, activation](const collectives::CollectiveResult&) {
                     job_->input_arrived(dest, k_dest, activation);
                   });
  };
  if (op.forward) {
    // The last stage computes the loss where its forward ends: its backward needs no message.
    if (s + 1 < partition_.stages()) send(s + 1, s, true);
  } else if (s > 0) {
    send(s - 1, s - 1, false);
  } else {
    ++completed_;
    progress_series_.add(engine_.now(), {static_cast<double>(completed_)});
    if (finished()) finish_ = engine_.now();
  }
}

void PipelineTraining::gradient_ready(std::size_t w, std::size_t layer) {
  const training::PipelineSchedule::Worker& wk = schedule_->worker(w);
  if (wk.replicas == 1) {
    job_->parameters_back(w, layer);  // nothing to reduce: the update is local
    return;
  }
  // A replica joins its round once every layer of its stage with parameters has come.
  if (++layers_ready_[w] < stage_parameter_layers_[wk.stage]) return;
  layers_ready_[w] = 0;
  const std::size_t k = rounds_joined_[w]++;
  ++round_done_[{wk.stage, k}];
  maybe_start_allreduce(wk.stage, k);
}

void PipelineTraining::maybe_start_allreduce(std::size_t s, std::size_t k) {
  const std::size_t first = partition_.first_host(s), replicas = partition_.replication(s);
  // The replicas that have a k-th update in this segment take part.
  std::size_t members = 0;
  for (std::size_t q = 0; q < replicas; ++q) members += schedule_->updates(first + q) > k ? 1 : 0;
  if (round_done_[{s, k}] < members) return;
  round_done_.erase({s, k});
  auto release = [this, s, first, members] {
    if (finished()) finish_ = engine_.now();  // the last weight update ends the job
    const Partition& p = partition_;
    for (std::size_t q = 0; q < members; ++q)
      for (std::size_t l = p.first[s]; l < p.first[s + 1]; ++l)
        if (job_->spec().parameters[l] > 0) job_->parameters_back(first + q, l);
    job_->check_progress();  // the segment may be drained now
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
  for (LinkId l : changed) {
    for (const auto& [up, down] : params_.host_links) mine = mine || l == up || l == down;
    mine = mine || std::binary_search(route_links_.begin(), route_links_.end(), l);
  }
  if (!mine) return;
  for (std::size_t h = 0; h < params_.hosts.size(); ++h) now_.bandwidth[h] = host_bandwidth(h);
  set_routes();
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
  const Plan best = autopipe_search(now_);
  const double current = steady_state_seconds(params_.layers, partition_, now_, timing());
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
  for (std::size_t w = 0; w < partition_.replication(0); ++w) {
    const std::size_t started = job_->forwards_started(w);
    if (started > 0) limit = std::max(limit, w + (started - 1) * partition_.replication(0) + 1);
  }
  segment_limit_ = limit;
  schedule_->set_micro_batches(limit);
  // Rounds that waited for a replica whose update the segment no longer has start now.
  std::vector<std::pair<std::size_t, std::size_t>> waiting;
  for (const auto& [round, done] : round_done_) waiting.push_back(round);
  for (const auto& [s, k] : waiting) maybe_start_allreduce(s, k);
  if (params_.switching == Switching::kLayerByLayer) {
    send_layer_moves(layer_moves(params_.layers, partition_, next_));
  } else {
    send_migrations();
  }
  // The core's segment boundary: workers waiting for a forward the segment no longer has move
  // on to their backwards; once every op of the segment is done and every all-reduce back, the
  // segment is drained.
  drained_ = false;
  job_->end_segment([this] {
    drained_ = true;
    maybe_resume();
  });
  maybe_resume();
}

void PipelineTraining::send_migrations() {
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
}

void PipelineTraining::send_layer_moves(const std::vector<LayerMove>& moves) {
  // Per pair of hosts, in layer order (the order the destination computes them forward); pairs
  // in parallel. A layer without parameters has nothing to move.
  std::vector<std::pair<std::size_t, std::size_t>> started;
  for (const LayerMove& mv : moves) {
    if (mv.parameter_bytes <= 0) continue;
    std::vector<LayerMove>& chain = layer_chains_[{mv.from_host, mv.to_host}];
    if (chain.empty()) started.emplace_back(mv.from_host, mv.to_host);
    chain.push_back(mv);
    layers_in_flight_.insert({mv.to_host, mv.layer});
    ++migrations_in_flight_;
  }
  for (const auto& pair : started) send_next_layer(pair);
}

void PipelineTraining::send_next_layer(std::pair<std::size_t, std::size_t> pair) {
  const LayerMove& mv = layer_chains_.at(pair).front();
  const double bytes = mv.parameter_bytes * params_.migrated_state_factor;
  migrated_bytes_ += bytes;
  // A failed move never arrives: the layer's ops wait for ever (counted in failed_transfers).
  messages_.send(params_.hosts[mv.from_host], params_.hosts[mv.to_host],
                 Bytes{static_cast<std::int64_t>(bytes)},
                 [this, pair, w = mv.to_host, l = mv.layer](const collectives::CollectiveResult&) {
                   --migrations_in_flight_;
                   layers_in_flight_.erase({w, l});
                   if (layers_awaited_.erase({w, l}) > 0) job_->parameters_back(w, l);
                   std::vector<LayerMove>& chain = layer_chains_.at(pair);
                   chain.erase(chain.begin());
                   if (chain.empty()) {
                     layer_chains_.erase(pair);
                   } else {
                     send_next_layer(pair);
                   }
                 });
}

void PipelineTraining::maybe_resume() {
  // Drain and copy: both done. Layer by layer: the drain alone; the layers still on their way
  // hold only the ops that compute them.
  const bool copies_gate = params_.switching == Switching::kDrainAndCopy;
  if (!switching_ || (copies_gate && migrations_in_flight_ > 0) || !drained_) return;
  switching_ = false;
  drained_ = false;
  switch_ns_ += (engine_.now() - switch_started_).count_ns();
  ++repartitions_;
  for (const auto& [w, l] : layers_in_flight_) {
    if (!layers_awaited_.insert({w, l}).second) continue;  // awaited since an earlier switch
    job_->expect_parameters(w, l);
    ++layers_waited_for_;
  }
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
  out.set_metric("layers_awaited", static_cast<double>(layers_waited_for_));
  out.set_metric("migrated_bytes", migrated_bytes_);
  out.set_metric("allreduces", static_cast<double>(allreduce_count_));
  out.set_metric("allreduce_bytes", allreduce_bytes_);
  std::uint64_t failed = failed_transfers_ + messages_.failed_transfers();
  for (const auto& [key, ar] : allreduces_) failed += ar->failed_transfers();
  for (const auto& ar : retired_allreduces_) failed += ar->failed_transfers();
  out.set_metric("failed_transfers", static_cast<double>(failed));
  out.set_metric("initial_estimate_s_per_minibatch", initial_estimate_s_);
  out.set_metric("initial_pipedream_objective_s", initial_pipedream_objective_s_);
  if (params_.memory.active()) {
    // Under mlsim's accounting (stage_memory.hpp), the largest stage of every configuration
    // run: a PipeDream configuration passes its optimizer's own check and may exceed it.
    const StageMemory memory(params_.layers, params_.memory, timing(), params_.hosts.size());
    // PipeDream's --use_memory_constraint figure for the same stages (its "stashed_data_size").
    const StageMemory check(params_.layers, params_.memory, timing(), params_.hosts.size(),
                            MemoryRule::kPipeDream);
    double peak = 0, fraction = 0, check_peak = 0;
    for (const auto& [at, p] : history_) {
      peak = std::max(peak, memory.peak_bytes(p));
      fraction = std::max(fraction, memory.peak_fraction(p));
      check_peak = std::max(check_peak, check.peak_bytes(p));
    }
    out.set_metric("memory_pipedream_check_peak_bytes", check_peak);
    out.set_metric("memory_capacity_bytes", *std::min_element(params_.memory.capacity.begin(),
                                                              params_.memory.capacity.end()));
    out.set_metric("memory_peak_stage_bytes", peak);
    out.set_metric("memory_peak_fraction", fraction);
  }
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
