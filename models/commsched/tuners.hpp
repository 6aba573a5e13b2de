#pragma once
// Choosing ByteScheduler's (partition, credit):
//   - static: the given configuration for the whole run;
//   - grid_best: the best static configuration of a grid, found by running the whole scenario
//     (the scenario's events, e.g. bandwidth steps and stragglers, included) once per point: the
//     hindsight baseline "best static configuration" of AutoByte's claim, at least as good as
//     one-shot BO on that grid;
//   - bo: ByteScheduler's own Bayesian optimisation during the run (bayesian_tuner.hpp);
//   - autobyte: re-selection at run time (AutoByte class below).
#include <cstdint>
#include <optional>
#include <vector>

#include "models/commsched/meta_predictor.hpp"
#include "models/commsched/offline_run.hpp"
#include "models/commsched/training_job.hpp"

namespace mlsim::commsched {

struct Grid {
  std::vector<std::int64_t> partitions, credits;  // parameters
  std::vector<SchedulerConfig> points() const;    // partition-major
};

struct GridPoint {
  SchedulerConfig config;
  double time_s = 0;
};

// Every point run over the whole scenario (infinite time when it stalls); ties go to the earlier
// point.
std::vector<GridPoint> run_grid(const JobSpec& spec, const Topology& topology, Sharing sharing,
                                const PlatformEvents& events, const Grid& grid);
SchedulerConfig best_of(const std::vector<GridPoint>& points);

struct AutoByteParams {
  Grid grid;
  std::size_t interval = 20;           // iterations between re-selections
  std::size_t predict_iterations = 4;  // per pre-training run (first and last not counted)
  double min_gain = 0.02;              // predicted relative gain needed to switch
  double ridge = 1e-3;                 // the meta-network's ridge regularisation [inferred]
  Time restart_cost = Time::s(5);      // PS partition change
};

// What the predictor sees of the world: a star of equal links of the measured bandwidth.
struct Probe {
  LinkId up = 0, down = 0;  // worker 0's links to and from the network
  Time link_latency;
};

struct AutoByteDecision {
  std::size_t iteration = 0;
  Time at;
  double measured_bandwidth = 0;    // bytes/s
  std::vector<double> slowdown;     // per worker
  RuntimeStats stats;               // the meta-network's runtime inputs
  double measured_iteration_s = 0;  // the online sample's target (0: none this time)
  SchedulerConfig current, chosen;
  double predicted_current_s = 0, predicted_chosen_s = 0;
  bool switched = false;
};

// AutoByte [inferred where the paper was not readable; docs/commsched.md]: every `interval`
// iterations it measures runtime statistics (worker 0's link throughput while busy, from the NIC
// counters, and each worker's compute time over its profile time), feeds them with each grid
// configuration to its meta-network (meta_predictor.hpp: a linear model trained online), and
// switches to the predicted best when should_retune says so.
// The meta-network is trained in two ways [inferred]: once, at the first decision, on short
// private runs of the job (every grid point under four conditions around the first measured
// statistics: 1/4, 1 and 4 times the bandwidth at the measured compute slowdowns, and 1 time it
// with every worker twice as slow again),
// standing for offline training on a profiling cluster; then online, at every decision, on the
// iteration time the job measured under the configuration in force over the last interval.
class AutoByte final : public Controller {
 public:
  AutoByte(AutoByteParams params, const Network& network, Probe probe, Sharing sharing);
  std::optional<Decision> at_iteration(std::size_t iteration, TrainingJob& job) override;
  const std::vector<AutoByteDecision>& decisions() const { return decisions_; }
  const OnlineRidge& meta_network() const { return meta_; }
  std::size_t pretraining_samples() const { return pretraining_samples_; }

  // Simulated steady-state iteration time of `config` under the given conditions (a pre-training
  // sample's target); infinite when the job stalls.
  static double predict(const JobSpec& spec, const SchedulerConfig& config, double bandwidth,
                        Time latency, const std::vector<double>& slowdown, std::size_t iterations,
                        Sharing sharing);
  // The meta-network's inputs for `spec` at the given bandwidth (bytes/s) and slowdowns.
  static RuntimeStats stats_of(const JobSpec& spec, double bandwidth,
                               const std::vector<double>& slowdown);

 private:
  void pretrain(const JobSpec& spec, double bandwidth, const std::vector<double>& slowdown);

  AutoByteParams params_;
  const Network& network_;
  Probe probe_;
  Sharing sharing_;
  OnlineRidge meta_;
  std::size_t pretraining_samples_ = 0;
  LinkStats last_up_, last_down_;
  double bandwidth_ = 0;
  std::vector<AutoByteDecision> decisions_;
};

}  // namespace mlsim::commsched
