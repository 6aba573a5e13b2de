#include "models/commsched/meta_predictor.hpp"

#include <algorithm>
#include <cmath>

#include "sim_core/base/error.hpp"

namespace mlsim::commsched {

Eigen::VectorXd meta_features(const SchedulerConfig& config, const RuntimeStats& stats) {
  MLSIM_CHECK(config.partition > 0 && config.credit > 0, "a configuration without sizes");
  const double u = std::log2(static_cast<double>(config.partition) / 1e6);
  const double v = std::log2(static_cast<double>(config.credit) / 1e6);
  const double c = stats.compute_s, m = stats.comm_s;
  Eigen::VectorXd z(kMetaFeatures);
  z << 1, c, m, std::max(c, m), m * u, m * v, m * u * u, m * v * v, m * u * v;
  return z;
}

OnlineRidge::OnlineRidge(std::size_t dimension, double rho)
    : a_(Eigen::MatrixXd::Identity(static_cast<Eigen::Index>(dimension),
                                   static_cast<Eigen::Index>(dimension)) *
         rho),
      b_(Eigen::VectorXd::Zero(static_cast<Eigen::Index>(dimension))),
      weights_(Eigen::VectorXd::Zero(static_cast<Eigen::Index>(dimension))) {
  MLSIM_CHECK(dimension > 0 && rho > 0, "bad ridge regression parameters");
}

void OnlineRidge::update(const Eigen::VectorXd& z, double y) {
  MLSIM_CHECK(z.size() == b_.size(), "a sample of the wrong dimension");
  a_.noalias() += z * z.transpose();
  b_ += z * y;
  // A is symmetric positive definite (rho I plus outer products): Cholesky.
  weights_ = a_.llt().solve(b_);
  ++samples_;
}

bool should_retune(double predicted_current_s, double predicted_best_s, double min_gain,
                   std::size_t interval, double switch_cost_s) {
  if (!(predicted_current_s > 0)) return false;
  const double gain = predicted_current_s - predicted_best_s;
  return gain > min_gain * predicted_current_s &&
         gain * static_cast<double>(interval) > switch_cost_s;
}

}  // namespace mlsim::commsched
