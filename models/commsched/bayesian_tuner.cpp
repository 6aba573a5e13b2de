#include "models/commsched/bayesian_tuner.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "models/commsched/gaussian_process.hpp"
#include "sim_core/base/error.hpp"

namespace mlsim::commsched {
namespace {

constexpr double kParametersPerMillion = 1e6;

std::int64_t whole_parameters(double millions) {
  // search.py keeps 6 decimals of a million; tuner.py then takes int(x * 10**6).
  return std::max<std::int64_t>(
      1, static_cast<std::int64_t>(std::floor(millions * kParametersPerMillion)));
}

}  // namespace

BayesianSearch::BayesianSearch(std::vector<std::pair<double, double>> box,
                               std::size_t random_points, double xi,
                               std::size_t acquisition_samples, RandomStream rng)
    : box_(std::move(box)),
      random_points_(random_points),
      xi_(xi),
      acquisition_samples_(acquisition_samples),
      rng_(std::move(rng)) {
  MLSIM_CHECK(!box_.empty() && acquisition_samples_ > 0, "an empty search");
}

std::vector<double> BayesianSearch::uniform_point() {
  std::vector<double> x;
  for (const auto& [low, high] : box_) x.push_back(low + rng_.uniform() * (high - low));
  return x;
}

std::vector<double> BayesianSearch::ask() {
  ++asked_;
  suggested_ = asked_ > random_points_ && !values_.empty();
  if (!suggested_) return uniform_point();
  const GaussianProcess gp(points_, values_);
  const double best = *std::min_element(values_.begin(), values_.end());
  std::vector<double> best_x;
  double best_ei = -1;
  for (std::size_t i = 0; i < acquisition_samples_; ++i) {
    std::vector<double> x = uniform_point();
    const double ei = expected_improvement(gp.predict(x), best, xi_);
    if (ei > best_ei) {
      best_ei = ei;
      best_x = std::move(x);
    }
  }
  return best_x;
}

void BayesianSearch::tell(std::vector<double> x, double value) {
  points_.push_back(std::move(x));
  values_.push_back(value);
}

namespace {

std::vector<std::pair<double, double>> box_of(const BayesianTunerParams& p) {
  std::vector<std::pair<double, double>> box{p.credit_range};
  if (p.partition_range) box.push_back(*p.partition_range);
  return box;
}

}  // namespace

BayesianTuner::BayesianTuner(BayesianTunerParams params, SchedulerConfig start, RandomStream rng)
    : params_(std::move(params)),
      start_(start),
      search_(box_of(params_), params_.random_points, params_.xi, params_.acquisition_samples,
              std::move(rng)),
      current_(start) {
  MLSIM_CHECK(params_.trial_iterations >= 2, "a trial needs two iterations");
  MLSIM_CHECK(params_.random_points + params_.suggested_points > 0, "nothing to search");
}

std::vector<double> BayesianTuner::coordinates(const SchedulerConfig& c) const {
  std::vector<double> x{static_cast<double>(c.credit) / kParametersPerMillion};
  if (params_.partition_range)
    x.push_back(static_cast<double>(c.partition) / kParametersPerMillion);
  return x;
}

SchedulerConfig BayesianTuner::config_at(const std::vector<double>& x) const {
  SchedulerConfig c = start_;
  c.credit = whole_parameters(x[0]);
  if (params_.partition_range) c.partition = whole_parameters(x[1]);
  return c;
}

std::optional<Decision> BayesianTuner::at_iteration(std::size_t iteration, TrainingJob& job) {
  if (done_) return std::nullopt;
  // The window runs from the end of the trial's first iteration to the end of the last one.
  if (iteration == trial_start_) window_start_ = job.now();
  if (iteration < trial_start_ + params_.trial_iterations - 1) return std::nullopt;
  const double mean =
      (job.now() - window_start_).seconds() / static_cast<double>(params_.trial_iterations - 1);
  const bool registered = !trials_.empty();  // Search.put drops the first point
  trials_.push_back({current_, mean, registered, registered && search_.last_ask_suggested()});
  if (registered) search_.tell(coordinates(current_), mean);
  trial_start_ = iteration + 1;
  if (points_asked_ < params_.random_points + params_.suggested_points) {
    ++points_asked_;
    current_ = config_at(search_.ask());
  } else {
    // The best registered point for the rest of the run (bayes_opt's max).
    done_ = true;
    const BayesianTrial* best = nullptr;
    for (const BayesianTrial& t : trials_)
      if (t.registered && (!best || t.mean_iteration_s < best->mean_iteration_s)) best = &t;
    current_ = best ? best->config : start_;
  }
  return Decision{current_, Time::zero()};
}

}  // namespace mlsim::commsched
