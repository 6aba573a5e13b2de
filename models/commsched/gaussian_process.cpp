#include "models/commsched/gaussian_process.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "sim_core/base/error.hpp"

namespace mlsim::commsched {
namespace {

constexpr double kDiagonalNoise = 1e-6;  // alpha of bayes_opt's regressor [code]
constexpr double kMinLengthScale = 1e-5, kMaxLengthScale = 1e5;  // scikit-learn's default bounds

double distance(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += (a[i] - b[i]) * (a[i] - b[i]);
  return std::sqrt(sum);
}

}  // namespace

double GaussianProcess::matern52(double d, double length_scale) {
  const double r = std::sqrt(5.0) * d / length_scale;
  return (1 + r + r * r / 3) * std::exp(-r);
}

GaussianProcess::GaussianProcess(std::vector<std::vector<double>> x, std::vector<double> y)
    : x_(std::move(x)) {
  MLSIM_CHECK(!x_.empty() && x_.size() == y.size(), "a Gaussian process needs observations");
  const auto n = static_cast<Eigen::Index>(y.size());
  Eigen::VectorXd raw(n);
  for (Eigen::Index i = 0; i < n; ++i) raw[i] = y[static_cast<std::size_t>(i)];
  // scikit-learn's normalize_y: subtract the mean, divide by the standard deviation (1 if 0).
  y_mean_ = raw.mean();
  const double variance = (raw.array() - y_mean_).square().mean();
  y_scale_ = variance > 0 ? std::sqrt(variance) : 1.0;
  y_ = (raw.array() - y_mean_) / y_scale_;

  // Maximise the likelihood over log l: a grid, then golden-section search in the best cell.
  const double lo = std::log(kMinLengthScale), hi = std::log(kMaxLengthScale);
  constexpr int kSteps = 200;
  double best_log = lo, best_value = -std::numeric_limits<double>::infinity();
  for (int i = 0; i <= kSteps; ++i) {
    const double t = lo + (hi - lo) * i / kSteps;
    const double v = log_marginal_likelihood(std::exp(t));
    if (v > best_value) {
      best_value = v;
      best_log = t;
    }
  }
  const double cell = (hi - lo) / kSteps;
  double a = std::max(lo, best_log - cell), b = std::min(hi, best_log + cell);
  const double golden = (std::sqrt(5.0) - 1) / 2;
  double c = b - golden * (b - a), d = a + golden * (b - a);
  double fc = log_marginal_likelihood(std::exp(c)), fd = log_marginal_likelihood(std::exp(d));
  for (int i = 0; i < 60; ++i) {
    if (fc > fd) {
      b = d;
      d = c;
      fd = fc;
      c = b - golden * (b - a);
      fc = log_marginal_likelihood(std::exp(c));
    } else {
      a = c;
      c = d;
      fc = fd;
      d = a + golden * (b - a);
      fd = log_marginal_likelihood(std::exp(d));
    }
  }
  const double refined = (a + b) / 2;
  length_scale_ = log_marginal_likelihood(std::exp(refined)) >= best_value ? std::exp(refined)
                                                                           : std::exp(best_log);
  cholesky_.compute(kernel_matrix(length_scale_));
  MLSIM_CHECK(cholesky_.info() == Eigen::Success, "kernel matrix not positive definite");
  alpha_ = cholesky_.solve(y_);
}

Eigen::MatrixXd GaussianProcess::kernel_matrix(double length_scale) const {
  const auto n = static_cast<Eigen::Index>(x_.size());
  Eigen::MatrixXd k(n, n);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j <= i; ++j)
      k(i, j) = k(j, i) = matern52(
          distance(x_[static_cast<std::size_t>(i)], x_[static_cast<std::size_t>(j)]), length_scale);
  k.diagonal().array() += kDiagonalNoise;
  return k;
}

double GaussianProcess::log_marginal_likelihood(double length_scale) const {
  const Eigen::LLT<Eigen::MatrixXd> llt(kernel_matrix(length_scale));
  if (llt.info() != Eigen::Success) return -std::numeric_limits<double>::infinity();
  const Eigen::VectorXd alpha = llt.solve(y_);
  const Eigen::MatrixXd l = llt.matrixL();
  const double log_det = 2 * l.diagonal().array().log().sum();
  return -0.5 * y_.dot(alpha) - 0.5 * log_det -
         0.5 * static_cast<double>(y_.size()) * std::log(2 * std::numbers::pi);
}

GaussianProcess::Prediction GaussianProcess::predict(const std::vector<double>& x) const {
  const auto n = static_cast<Eigen::Index>(x_.size());
  Eigen::VectorXd k(n);
  for (Eigen::Index i = 0; i < n; ++i)
    k[i] = matern52(distance(x, x_[static_cast<std::size_t>(i)]), length_scale_);
  const double mean = k.dot(alpha_);
  const Eigen::VectorXd v = cholesky_.matrixL().solve(k);
  // scikit-learn's predictive variance excludes the diagonal noise: k(x, x) = 1.
  const double variance = std::max(0.0, 1.0 - v.squaredNorm());
  return {mean * y_scale_ + y_mean_, std::sqrt(variance) * y_scale_};
}

double expected_improvement(GaussianProcess::Prediction p, double best, double xi) {
  const double a = best - xi - p.mean;
  if (p.stddev <= 0) return std::max(0.0, a);
  const double z = a / p.stddev;
  const double cdf = 0.5 * std::erfc(-z / std::sqrt(2.0));
  const double pdf = std::exp(-0.5 * z * z) / std::sqrt(2 * std::numbers::pi);
  return a * cdf + p.stddev * pdf;
}

}  // namespace mlsim::commsched
