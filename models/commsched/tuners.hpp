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

#include "models/commsched/offline_run.hpp"
#include "models/commsched/training_job.hpp"
#include "sim_core/engine/random.hpp"

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
  std::size_t predict_iterations = 4;  // simulated per candidate (first and last not counted)
  double noise = 0.05;                 // sigma of the predictor's lognormal error
  double min_gain = 0.02;              // predicted relative gain needed to switch
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
  double measured_bandwidth = 0;  // bytes/s
  std::vector<double> slowdown;   // per worker
  SchedulerConfig current, chosen;
  double predicted_current_s = 0, predicted_chosen_s = 0;
  bool switched = false;
};

// AutoByte [inferred: the paper's meta-network was not readable]: every `interval` iterations it
// measures runtime statistics (worker 0's link throughput while busy, from the NIC counters, and
// each worker's compute time over its profile time), predicts the iteration time of every
// candidate configuration, and switches to the predicted best when the gain over the next
// interval outweighs the switching cost. The predictor is an oracle: the job itself simulated for
// a few iterations under the measured conditions, times a lognormal error standing for the
// meta-network's prediction error.
class AutoByte final : public Controller {
 public:
  AutoByte(AutoByteParams params, const Network& network, Probe probe, Sharing sharing,
           RandomStream noise);
  std::optional<Decision> at_iteration(std::size_t iteration, TrainingJob& job) override;
  const std::vector<AutoByteDecision>& decisions() const { return decisions_; }

  // Predicted iteration time of `config`, without noise, under the given conditions; infinite
  // when the job stalls.
  static double predict(const JobSpec& spec, const SchedulerConfig& config, double bandwidth,
                        Time latency, const std::vector<double>& slowdown, std::size_t iterations,
                        Sharing sharing);

 private:
  AutoByteParams params_;
  const Network& network_;
  Probe probe_;
  Sharing sharing_;
  RandomStream noise_;
  LinkStats last_up_, last_down_;
  double bandwidth_ = 0;
  std::vector<AutoByteDecision> decisions_;
};

}  // namespace mlsim::commsched
