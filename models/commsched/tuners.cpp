#include "models/commsched/tuners.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "sim_core/base/error.hpp"
#include "sim_core/network/topology_builders.hpp"

namespace mlsim::commsched {

std::vector<SchedulerConfig> Grid::points() const {
  std::vector<SchedulerConfig> out;
  for (std::int64_t p : partitions)
    for (std::int64_t c : credits) out.push_back({p, c});
  return out;
}

std::vector<GridPoint> run_grid(const JobSpec& spec, const Topology& topology, Sharing sharing,
                                const PlatformEvents& events, const Grid& grid) {
  std::vector<GridPoint> out;
  for (const SchedulerConfig& c : grid.points()) {
    const OfflineRun run = run_offline(spec, topology, sharing, events, c);
    out.push_back(
        {c, run.finished ? run.total.seconds() : std::numeric_limits<double>::infinity()});
  }
  return out;
}

SchedulerConfig best_of(const std::vector<GridPoint>& points) {
  MLSIM_CHECK(!points.empty(), "an empty grid");
  const GridPoint* best = &points.front();
  for (const GridPoint& p : points)
    if (p.time_s < best->time_s) best = &p;
  return best->config;
}

AutoByte::AutoByte(AutoByteParams params, const Network& network, Probe probe, Sharing sharing)
    : params_(std::move(params)),
      network_(network),
      probe_(probe),
      sharing_(sharing),
      meta_(kMetaFeatures, params_.ridge),
      last_up_(network.link_stats(probe.up)),
      last_down_(network.link_stats(probe.down)) {
  MLSIM_CHECK(params_.interval > 0 && params_.predict_iterations >= 3, "bad AutoByte parameters");
}

double AutoByte::predict(const JobSpec& spec, const SchedulerConfig& config, double bandwidth,
                         Time latency, const std::vector<double>& slowdown, std::size_t iterations,
                         Sharing sharing) {
  const int hosts = static_cast<int>(spec.workers.size() + spec.servers.size());
  const Topology star = build_topology(StarSpec{hosts, LinkSpec{Bandwidth{bandwidth}, latency}});
  JobSpec s = spec;
  s.workers.assign(star.hosts().begin(), star.hosts().begin() + spec.workers.size());
  s.servers.assign(star.hosts().begin() + spec.workers.size(), star.hosts().end());
  s.iterations = iterations;
  std::vector<std::pair<NodeId, double>> speeds;
  for (std::size_t w = 0; w < s.workers.size(); ++w)
    speeds.emplace_back(s.workers[w], 1 / slowdown[w]);
  const OfflineRun run = run_offline(s, star, sharing, PlatformEvents{}, config, speeds);
  if (!run.finished) return std::numeric_limits<double>::infinity();
  // Steady state: leave out the first iteration (nothing to overlap with) and the last (its
  // time runs to the end of all communication).
  const auto& t = run.iteration_s;
  MLSIM_CHECK(t.size() == iterations, "the predictor lost iterations");
  return std::accumulate(t.begin() + 1, t.end() - 1, 0.0) / static_cast<double>(t.size() - 2);
}

RuntimeStats AutoByte::stats_of(const JobSpec& spec, double bandwidth,
                                const std::vector<double>& slowdown) {
  MLSIM_CHECK(bandwidth > 0 && slowdown.size() == spec.workers.size(), "bad runtime statistics");
  RuntimeStats out;
  std::int64_t parameters = 0;
  for (const Layer& l : spec.layers) parameters += l.parameters;
  out.comm_s = static_cast<double>(parameters * spec.bytes_per_parameter) / bandwidth;
  for (std::size_t w = 0; w < spec.workers.size(); ++w) {
    double nominal = 0;
    if (spec.worker_times.empty())
      for (const Layer& l : spec.layers) nominal += (l.forward + l.backward).seconds();
    else
      for (const LayerTimes& l : spec.worker_times[w])
        nominal += (l.forward + l.backward).seconds();
    out.compute_s = std::max(out.compute_s, nominal * slowdown[w]);
  }
  return out;
}

void AutoByte::pretrain(const JobSpec& spec, double bandwidth,
                        const std::vector<double>& slowdown) {
  // Around the first measured statistics: a quarter, the same and four times the bandwidth, and
  // the same bandwidth with every worker twice as slow.
  std::vector<double> slower = slowdown;
  for (double& s : slower) s *= 2;
  const std::pair<double, const std::vector<double>*> conditions[] = {{bandwidth / 4, &slowdown},
                                                                      {bandwidth, &slowdown},
                                                                      {bandwidth * 4, &slowdown},
                                                                      {bandwidth, &slower}};
  for (const auto& [b, slowdown] : conditions) {
    const RuntimeStats stats = stats_of(spec, b, *slowdown);
    for (const SchedulerConfig& c : params_.grid.points()) {
      const double t =
          predict(spec, c, b, probe_.link_latency, *slowdown, params_.predict_iterations, sharing_);
      if (!std::isfinite(t)) continue;  // a stalling configuration teaches nothing linear
      meta_.update(meta_features(c, stats), t);
      ++pretraining_samples_;
    }
  }
}

std::optional<Decision> AutoByte::at_iteration(std::size_t iteration, TrainingJob& job) {
  if (iteration % params_.interval != 0) return std::nullopt;
  // Runtime statistics of the last interval.
  const LinkStats up = network_.link_stats(probe_.up), down = network_.link_stats(probe_.down);
  double best_rate = 0;
  for (auto [now, last] : {std::pair{up, last_up_}, std::pair{down, last_down_}}) {
    const double busy = now.busy_seconds - last.busy_seconds;
    if (busy > 0)
      best_rate = std::max(
          best_rate, static_cast<double>((now.bytes_carried - last.bytes_carried).count) / busy);
  }
  last_up_ = up;
  last_down_ = down;
  if (best_rate > 0) bandwidth_ = best_rate;
  const std::vector<double> slowdown = job.take_compute_slowdown();
  if (bandwidth_ <= 0) return std::nullopt;  // nothing measured yet

  AutoByteDecision d;
  d.iteration = iteration;
  d.at = job.now();
  d.measured_bandwidth = bandwidth_;
  d.slowdown = slowdown;
  d.stats = stats_of(job.spec(), bandwidth_, slowdown);
  d.current = d.chosen = job.config();
  if (pretraining_samples_ == 0) pretrain(job.spec(), bandwidth_, slowdown);
  // The online sample: the mean time of the interval's full iterations under the configuration
  // in force (the first, which may follow a switch, left out; iteration `iteration` has not
  // started yet, so the last full one is iteration - 2 ... iteration - 1's start).
  const std::vector<Time>& starts = job.iteration_starts();
  if (params_.interval >= 3 && iteration >= params_.interval && starts.size() >= iteration) {
    const std::size_t first = iteration - params_.interval + 1, last = iteration - 1;
    d.measured_iteration_s =
        (starts[last] - starts[first]).seconds() / static_cast<double>(last - first);
    meta_.update(meta_features(d.current, d.stats), d.measured_iteration_s);
  }
  d.predicted_current_s = d.predicted_chosen_s = meta_.predict(meta_features(d.current, d.stats));
  for (const SchedulerConfig& c : params_.grid.points()) {
    if (c == job.config()) continue;
    const double t = meta_.predict(meta_features(c, d.stats));
    if (t < d.predicted_chosen_s) {
      d.predicted_chosen_s = t;
      d.chosen = c;
    }
  }
  const bool restart =
      job.spec().mode == Mode::kParameterServer && d.chosen.partition != d.current.partition;
  const double cost = restart ? params_.restart_cost.seconds() : 0.0;
  d.switched = d.chosen != d.current && should_retune(d.predicted_current_s, d.predicted_chosen_s,
                                                      params_.min_gain, params_.interval, cost);
  decisions_.push_back(d);
  if (!d.switched) return std::nullopt;
  return Decision{d.chosen, restart ? params_.restart_cost : Time::zero()};
}

}  // namespace mlsim::commsched
