#pragma once
// A Gaussian-process regression of iteration time over tuning knobs, as ByteScheduler's
// auto-tuner gets it from the bayes_opt package [code: bytescheduler/common/search.py builds
// bayes_opt.BayesianOptimization, whose regressor is scikit-learn's
// GaussianProcessRegressor(kernel=Matern(nu=2.5), alpha=1e-6, normalize_y=True)]:
//   - one isotropic Matern 5/2 kernel of unit variance on the targets normalised to mean 0 and
//     standard deviation 1, k(r) = (1 + sqrt(5) r / l + 5 r^2 / (3 l^2)) exp(-sqrt(5) r / l);
//   - 1e-6 added to the kernel's diagonal;
//   - the length scale l maximises the log marginal likelihood within scikit-learn's default
//     bounds [1e-5, 1e5]. scikit-learn climbs to it with L-BFGS-B from 6 starts; here it is the
//     best of a log-spaced grid of 201 values refined by golden-section search around it
//     [simplified: deterministic, same optimum up to 1e-6 relative on a unimodal likelihood].
// Sizes are tiny (ByteScheduler evaluates 15 points), so Eigen's dense Cholesky does the algebra.
#include <vector>

#include <Eigen/Dense>

namespace mlsim::commsched {

class GaussianProcess {
 public:
  struct Prediction {
    double mean = 0, stddev = 0;
  };

  // x: one row per observed point; y: its value. Needs at least one point.
  GaussianProcess(std::vector<std::vector<double>> x, std::vector<double> y);

  Prediction predict(const std::vector<double>& x) const;
  double length_scale() const { return length_scale_; }
  // log p(y | X, l) of the normalised targets at length scale l (for tests).
  double log_marginal_likelihood(double length_scale) const;

  static double matern52(double distance, double length_scale);

 private:
  Eigen::MatrixXd kernel_matrix(double length_scale) const;

  std::vector<std::vector<double>> x_;
  Eigen::VectorXd y_;  // normalised
  double y_mean_ = 0, y_scale_ = 1;
  double length_scale_ = 1;
  Eigen::LLT<Eigen::MatrixXd> cholesky_;
  Eigen::VectorXd alpha_;  // K^-1 y
};

// Expected improvement of a point with predicted (mean, stddev) over the best (lowest) value seen,
// for minimisation, with exploration margin xi: bayes_opt's "ei" utility applied to the negated
// target, E[max(0, best - xi - Y)] = a Phi(a / s) + s phi(a / s), a = best - xi - mean.
double expected_improvement(GaussianProcess::Prediction p, double best, double xi);

}  // namespace mlsim::commsched
