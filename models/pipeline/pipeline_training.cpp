#include "models/pipeline/pipeline_training.hpp"

#include <map>

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
      stages_(params_.hosts.size()) {
  MLSIM_CHECK(!params_.hosts.empty() && params_.host_links.size() == params_.hosts.size() &&
                  params_.link_latency.size() + 1 == params_.hosts.size() &&
                  params_.minibatches > 0,
              "pipeline needs a host per stage and at least one minibatch");
  MLSIM_CHECK(params_.profiled_on != nullptr, "pipeline needs the GPU its profile was measured on");
  // Every layer's nominal time on every stage host's GPU: a re-partition may move any layer to
  // any stage.
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

double PipelineTraining::host_bandwidth(std::size_t s) const {
  const auto [up, down] = params_.host_links[s];
  return std::min(links_.bandwidth(up).bytes_per_s, links_.bandwidth(down).bytes_per_s);
}

void PipelineTraining::start() {
  started_ = true;
  const std::size_t n = params_.hosts.size();
  for (std::size_t s = 0; s < n; ++s) now_.hosts[s].speed = speeds_.speed(params_.hosts[s]);
  for (std::size_t b = 0; b + 1 < n; ++b)
    now_.link_bandwidth.push_back(std::min(host_bandwidth(b), host_bandwidth(b + 1)));
  now_.link_latency = params_.link_latency;
  Partition p;
  if (params_.policy == Policy::kPipeDream) {
    p = pipedream_partition(params_.layers, now_);
  } else {
    p = autopipe_plan(params_.layers, now_).partition;
  }
  initial_estimate_s_ = steady_state_seconds(params_.layers, p, now_);
  initial_pipedream_objective_s_ = pipedream_objective(params_.layers, p, now_);
  begin_segment(p);
}

void PipelineTraining::begin_segment(const Partition& p) {
  partition_ = p;
  history_.emplace_back(engine_.now(), p);
  Conditions unit = now_;
  for (StageHost& h : unit.hosts) h.speed = 1;
  base_costs_ = stage_costs(params_.layers, p, unit);
  segment_limit_ = params_.minibatches - completed_;
  for (Stage& s : stages_) s = Stage{};
  for (std::size_t s = 0; s < stages_.size(); ++s) try_start(s);
}

void PipelineTraining::try_start(std::size_t s) {
  Stage& st = stages_[s];
  if (st.busy) return;
  const Op op = next_op(s, stages_.size(), st.forwards, st.backwards, segment_limit_);
  if (op == Op::kNone) return;
  const bool forward = op == Op::kForward;
  const std::size_t m = forward ? st.forwards : st.backwards;
  if (forward && s > 0) {
    if (!st.activations.erase(m)) return;  // waits for its input
  } else if (!forward) {
    if (!st.gradients.erase(m)) return;
  }
  st.busy = true;
  st.running_forward = forward;
  const double nominal = forward ? base_costs_.forward_s[s] : base_costs_.backward_s[s];
  compute_.run_for(std::span<const NodeId>(&params_.hosts[s], 1),
                   std::span<const double>(&nominal, 1),
                   [this, s, forward, m] { op_done(s, forward, m); });
}

void PipelineTraining::op_done(std::size_t s, bool forward, std::size_t m) {
  Stage& st = stages_[s];
  st.busy = false;
  const std::size_t last = stages_.size() - 1;
  // Minibatch m's activation (forward) or gradient (backward) from stage `from` to `to`.
  auto send = [this, m](std::size_t from, std::size_t to, std::size_t boundary, bool activation) {
    network_.start_transfer(
        params_.hosts[from], params_.hosts[to],
        Bytes{static_cast<std::int64_t>(base_costs_.boundary_bytes[boundary])},
        [this, to, m, activation](const TransferResult& r) {
          if (r.failed) {  // no route left: counted and reported; the pipeline stalls
            ++failed_transfers_;
            return;
          }
          (activation ? stages_[to].activations : stages_[to].gradients).insert(m);
          try_start(to);
        });
  };
  if (forward) {
    ++st.forwards;
    if (s < last) {
      send(s, s + 1, s, true);
    } else {
      st.gradients.insert(m);
    }
  } else {
    ++st.backwards;
    if (s > 0) {
      send(s, s - 1, s - 1, false);
    } else {
      ++completed_;
      progress_series_.add(engine_.now(), {static_cast<double>(completed_)});
      if (finished()) finish_ = engine_.now();
    }
  }
  try_start(s);
  if (switching_) maybe_resume();
}

void PipelineTraining::speed_changed(NodeId host, double speed) {
  if (!started_) return;  // start() reads the speeds
  bool mine = false;
  for (std::size_t s = 0; s < params_.hosts.size(); ++s)
    if (params_.hosts[s] == host) {
      now_.hosts[s].speed = speed;
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
  // A boundary's transfers cross both stages' host links.
  for (std::size_t b = 0; b + 1 < now_.stages(); ++b)
    now_.link_bandwidth[b] = std::min(host_bandwidth(b), host_bandwidth(b + 1));
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
  const Plan plan = autopipe_plan(params_.layers, now_);
  const double current = steady_state_seconds(params_.layers, partition_, now_);
  ++plans_evaluated_;
  if (plan.partition == partition_ ||
      plan.seconds_per_minibatch >= current * (1 - params_.min_gain))
    return;
  switching_ = true;
  next_ = plan.partition;
  switch_started_ = engine_.now();
  // Stop admitting: the segment ends with the minibatches the input stage has started.
  segment_limit_ = stages_[0].forwards + (stages_[0].busy && stages_[0].running_forward ? 1 : 0);
  // Parameters (and optimizer state) of every layer that changes GPU, one transfer per GPU pair.
  std::map<std::pair<std::size_t, std::size_t>, double> moves;
  std::size_t a = 0, b = 0;
  for (std::size_t l = 0; l < params_.layers.size(); ++l) {
    while (partition_.first[a + 1] <= l) ++a;
    while (next_.first[b + 1] <= l) ++b;
    if (a != b) moves[{a, b}] += params_.layers[l].parameter_bytes * params_.migrated_state_factor;
  }
  for (const auto& [pair, bytes] : moves) {
    migrated_bytes_ += bytes;
    ++migrations_in_flight_;
    network_.start_transfer(params_.hosts[pair.first], params_.hosts[pair.second],
                            Bytes{static_cast<std::int64_t>(bytes)},
                            [this](const TransferResult& r) {
                              if (r.failed) ++failed_transfers_;
                              --migrations_in_flight_;
                              maybe_resume();
                            });
  }
  // Stages waiting for a forward the segment no longer has move on to their backwards.
  for (std::size_t s = 0; s < stages_.size(); ++s) try_start(s);
  maybe_resume();
}

void PipelineTraining::maybe_resume() {
  if (!switching_ || migrations_in_flight_ > 0) return;
  for (const Stage& s : stages_)
    if (s.busy || s.backwards < segment_limit_ || s.forwards < segment_limit_) return;
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
  out.set_metric("failed_transfers", static_cast<double>(failed_transfers_));
  out.set_metric("initial_estimate_s_per_minibatch", initial_estimate_s_);
  out.set_metric("initial_pipedream_objective_s", initial_pipedream_objective_s_);
  auto& d = out.details();
  d["policy"] = params_.policy == Policy::kPipeDream ? "pipedream" : "autopipe";
  d["stages"] = now_.stages();
  d["layers"] = params_.layers.size();
  d["plans_evaluated"] = plans_evaluated_;
  auto& hist = d["partitions"];
  hist = nlohmann::json::array();
  for (const auto& [at, p] : history_)
    hist.push_back({{"from_s", at.seconds()}, {"first_layer", p.first}});
  out.add_series(progress_series_);
}

}  // namespace mlsim::pipeline
