#pragma once
// ByteScheduler's auto-tuner as its code runs it [code: bytescheduler/common/tuner.py (Tuner),
// search.py (Search, BayesianSearch)]: Bayesian optimisation of (partition, credit) during the
// run. What the code does, and how it maps here:
//   - The search space is continuous, in millions of parameters: credit in [1, 16] (PS) or
//     [4, 64] (all-reduce), partition in [2, 32]; in PS mode only the credit is tuned (tuner.py
//     creates the tuner with partition tuning off for PS). A point is cut to 1e-6 million, i.e.
//     whole parameters.
//   - Each point runs for a window of iterations (tuner.py: 100 steps, ignoring the first three
//     and last two durations; here `trial_iterations`, the first not counted) and is scored by its
//     mean iteration time. The first point scored, the configuration the job started with, is
//     dropped ("typically not accurate", Search.put).
//   - The first 10 points are uniform random in the space (BayesianSearch._init), then
//     bayes_opt's suggestions by expected improvement with xi = 0.1 (UtilityFunction(kind='ei',
//     xi=0.1)) on a Gaussian process of the scores (gaussian_process.hpp); max_num_steps = 15
//     makes that 4 suggestions, after which the best registered point is kept for the rest of
//     the run.
//   - bayes_opt maximises the acquisition over 10,000 uniform random points and polishes the best
//     with L-BFGS-B from 10 more; here the 10,000 points only [simplified].
//   - In the code the new point applies 10 steps after it is chosen; here at the next iteration.
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "models/commsched/training_job.hpp"
#include "sim_core/engine/random.hpp"

namespace mlsim::commsched {

struct BayesianTunerParams {
  std::size_t trial_iterations = 10;  // per point (tuner.py: 100 steps)
  std::size_t random_points = 10;     // BayesianSearch._init
  std::size_t suggested_points = 4;   // max_num_steps = 15: steps 11-14 are suggestions
  double xi = 0.1;                    // seconds of iteration time (the target's unit)
  std::size_t acquisition_samples = 10'000;
  // Millions of parameters; no partition range: the partition is not tuned (PS).
  std::pair<double, double> credit_range{1, 16};
  std::optional<std::pair<double, double>> partition_range;
};

// The search itself, ask/tell over a box in R^d (search.py's BayesianSearch without the
// bookkeeping of steps): the first `random_points` asks are uniform, later ones maximise the
// expected improvement over the told points. Values are minimised.
class BayesianSearch {
 public:
  BayesianSearch(std::vector<std::pair<double, double>> box, std::size_t random_points, double xi,
                 std::size_t acquisition_samples, RandomStream rng);
  std::vector<double> ask();  // sets last_ask_suggested()
  void tell(std::vector<double> x, double value);
  bool last_ask_suggested() const { return suggested_; }
  std::size_t told() const { return values_.size(); }

 private:
  std::vector<double> uniform_point();

  std::vector<std::pair<double, double>> box_;
  std::size_t random_points_;
  double xi_;
  std::size_t acquisition_samples_;
  RandomStream rng_;
  std::vector<std::vector<double>> points_;
  std::vector<double> values_;
  std::size_t asked_ = 0;
  bool suggested_ = false;
};

struct BayesianTrial {
  SchedulerConfig config;
  double mean_iteration_s = 0;
  bool registered = false;  // false: the dropped first point
  bool suggested = false;   // chosen by expected improvement, not at random
};

class BayesianTuner final : public Controller {
 public:
  BayesianTuner(BayesianTunerParams params, SchedulerConfig start, RandomStream rng);
  std::optional<Decision> at_iteration(std::size_t iteration, TrainingJob& job) override;
  const std::vector<BayesianTrial>& trials() const { return trials_; }

 private:
  std::vector<double> coordinates(const SchedulerConfig& c) const;  // millions
  SchedulerConfig config_at(const std::vector<double>& x) const;

  BayesianTunerParams params_;
  SchedulerConfig start_;
  BayesianSearch search_;
  std::vector<BayesianTrial> trials_;
  SchedulerConfig current_;
  std::size_t points_asked_ = 0;
  std::size_t trial_start_ = 1;  // iteration whose start opens the current trial's window
  Time window_start_;
  bool done_ = false;
};

}  // namespace mlsim::commsched
