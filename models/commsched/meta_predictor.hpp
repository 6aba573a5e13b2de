#pragma once
// AutoByte's meta-network as a small learned predictor [inferred design; the paper's abstract
// (arXiv 2112.13509) says only that the meta-network "takes the system's runtime statistics as its
// input and outputs predictions for speedups under specific configurations"; its architecture,
// features, training and trigger were not readable].
//
// The predictor is a linear model over a few features of (configuration, runtime statistics),
// fitted by ridge regression and updated online, one sample at a time: it keeps the normal
// equations A = rho I + sum z z^T and b = sum z y, and its weights are w = A^-1 b after every
// update (the same weights recursive least squares reaches; kept as A and b so that an update is
// exact and hand-checkable). Eigen (Debian libeigen3-dev) does the algebra.
#include <cstddef>

#include <Eigen/Dense>

#include "models/commsched/training_job.hpp"

namespace mlsim::commsched {

// What the tuner measures at run time, per iteration.
struct RuntimeStats {
  double compute_s = 0;  // the slowest worker's compute time (profile time x its slowdown)
  double comm_s = 0;     // one copy of the gradients over the measured link throughput
};

// The features z(config, stats) [inferred]: with u = log2(partition / 1M), v = log2(credit / 1M),
// c = compute_s and m = comm_s,
//   z = [1, c, m, max(c, m), m u, m v, m u^2, m v^2, m u v].
// Iteration time is about max(compute, communication) plus what the schedule adds; the
// configuration's share scales with the communication time, hence its terms times m.
inline constexpr std::size_t kMetaFeatures = 9;
Eigen::VectorXd meta_features(const SchedulerConfig& config, const RuntimeStats& stats);

class OnlineRidge {
 public:
  // `dimension` features, ridge `rho` > 0 (keeps A invertible before enough samples).
  OnlineRidge(std::size_t dimension, double rho);
  // Adds one sample (features z, target y) and refits.
  void update(const Eigen::VectorXd& z, double y);
  double predict(const Eigen::VectorXd& z) const { return weights_.dot(z); }
  const Eigen::VectorXd& weights() const { return weights_; }
  std::size_t samples() const { return samples_; }

 private:
  Eigen::MatrixXd a_;
  Eigen::VectorXd b_, weights_;
  std::size_t samples_ = 0;
};

// AutoByte's trigger [inferred value; the paper's threshold was not readable]: re-tune when the
// predicted gain of the best candidate over the current configuration, (current - best) /
// current, exceeds `min_gain`, and the predicted time saved over the next `interval` iterations
// exceeds the switching cost (a restart for a PS partition change).
bool should_retune(double predicted_current_s, double predicted_best_s, double min_gain,
                   std::size_t interval, double switch_cost_s);

}  // namespace mlsim::commsched
