// ByteScheduler's Bayesian auto-tuner (models/commsched/bayesian_tuner.hpp): the Gaussian
// process, expected improvement and a search step, by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "models/commsched/bayesian_tuner.hpp"
#include "models/commsched/gaussian_process.hpp"

namespace mlsim::commsched {
namespace {

TEST(GaussianProcess, Matern52ByHand) {
  // r = sqrt(5) * 1 / 2 = 1.118034; (1 + r + r^2 / 3) e^-r = (1 + 1.118034 + 0.416667) * 0.326922
  EXPECT_NEAR(GaussianProcess::matern52(1, 2), 2.534701 * 0.3269219, 1e-6);
  EXPECT_DOUBLE_EQ(GaussianProcess::matern52(0, 3), 1.0);
}

TEST(GaussianProcess, TwoPointsByHand) {
  // Values 1 and 3 normalise to -1 and +1 (mean 2, standard deviation 1). With k the two points'
  // correlation and e = 1e-6, the log likelihood is -1 / (1 + e - k) - log((1 + e)^2 - k^2) / 2
  // - log(2 pi), which falls as k grows (its derivative in k is -(1 + k^2) / ((1 - k)^2 (1 + k))
  // for e = 0): the fit takes a length scale at which the points are uncorrelated (k < 1e-15 for
  // any l below 0.05, where the likelihood is flat).
  const GaussianProcess gp({{0.0}, {1.0}}, {1.0, 3.0});
  EXPECT_LT(gp.length_scale(), 0.05);
  EXPECT_GT(gp.log_marginal_likelihood(gp.length_scale()), gp.log_marginal_likelihood(0.5));
  const double l = 0.7, k = GaussianProcess::matern52(1, l), e = 1e-6;
  EXPECT_NEAR(
      gp.log_marginal_likelihood(l),
      -1 / (1 + e - k) - 0.5 * std::log((1 + e) * (1 + e) - k * k) - std::log(2 * std::numbers::pi),
      1e-9);
  // At the observed points the prediction is the observation, with almost no spread
  // (variance 1 - 1 / (1 + e) = e, so a standard deviation of 1e-3 in normalised units); far away
  // it is the mean, 2, with the prior's spread, 1.
  EXPECT_NEAR(gp.predict({0.0}).mean, 1.0, 1e-5);
  EXPECT_NEAR(gp.predict({1.0}).mean, 3.0, 1e-5);
  EXPECT_NEAR(gp.predict({0.0}).stddev, 1e-3, 1e-5);
  EXPECT_NEAR(gp.predict({0.5}).mean, 2.0, 1e-9);
  EXPECT_NEAR(gp.predict({0.5}).stddev, 1.0, 1e-9);
}

TEST(GaussianProcess, ExpectedImprovementByHand) {
  // a = best - xi - mean; EI = a Phi(a / s) + s phi(a / s).
  EXPECT_NEAR(expected_improvement({1.0, 1.0}, 1.0, 0.0), 1 / std::sqrt(2 * std::numbers::pi),
              1e-12);
  // a = 0.5, z = 0.5: 0.5 * 0.691462 + 1 * 0.352065 = 0.697796
  EXPECT_NEAR(expected_improvement({0.5, 1.0}, 1.0, 0.0), 0.6977965, 1e-6);
  // xi = 0.5 takes the improvement back to a = 0.
  EXPECT_NEAR(expected_improvement({0.5, 1.0}, 1.0, 0.5), 1 / std::sqrt(2 * std::numbers::pi),
              1e-12);
  EXPECT_DOUBLE_EQ(expected_improvement({0.5, 0.0}, 1.0, 0.0), 0.5);
  EXPECT_DOUBLE_EQ(expected_improvement({1.5, 0.0}, 1.0, 0.0), 0.0);
}

TEST(BayesianSearch, FirstAsksAreUniformThenSuggestionsNearTheMinimumOfAKnownFunction) {
  // f(c) = 1 + (c - 10)^2 / 100 on [1, 16] (a credit in millions against seconds per
  // iteration). After 10 uniform points the Gaussian process fits the smooth bowl, and with no
  // exploration margin (xi = 0) the suggestions home in on c = 10.
  auto f = [](double c) { return 1 + (c - 10) * (c - 10) / 100; };
  BayesianSearch search({{1.0, 16.0}}, 10, 0.0, 10'000, RandomStream(7, "bo"));
  for (int i = 0; i < 10; ++i) {
    const std::vector<double> x = search.ask();
    EXPECT_FALSE(search.last_ask_suggested());
    ASSERT_GE(x[0], 1.0);
    ASSERT_LE(x[0], 16.0);
    search.tell(x, f(x[0]));
  }
  // With seed 7 the uniform points leave the top edge unexplored, where the process is least
  // sure: the first suggestion goes there (15.9998); the next three close in on 10 (9.54, 10.08,
  // 10.0009). A uniform point would land within 0.1 of 10 with probability 0.2 / 15 = 1.3%.
  std::vector<double> suggestions;
  for (int i = 0; i < 4; ++i) {
    const std::vector<double> x = search.ask();
    EXPECT_TRUE(search.last_ask_suggested());
    search.tell(x, f(x[0]));
    suggestions.push_back(x[0]);
  }
  EXPECT_GT(suggestions[0], 15.9);
  EXPECT_NEAR(suggestions[2], 10, 0.5);
  EXPECT_NEAR(suggestions[3], 10, 0.1);
}

TEST(BayesianSearch, ExplorationMarginSendsTheSuggestionWhereTheProcessIsUnsure) {
  // Two told points at the ends of [0, 10], values 1 and 1.01 (normalised -1 and 1, the length
  // scale at its lower bound): everywhere between them the process predicts the mean, 1.005, with
  // its full spread, 0.005. With xi = 0 a point there expects 0.005 * (-1 Phi(-1) + phi(-1)) =
  // 0.000417 of improvement, more than either end (0 spread, 0 improvement): the suggestion is
  // inside, not at an end.
  BayesianSearch search({{0.0, 10.0}}, 0, 0.0, 1000, RandomStream(3, "bo"));
  search.tell({0.0}, 1.0);
  search.tell({10.0}, 1.01);
  const std::vector<double> x = search.ask();
  EXPECT_TRUE(search.last_ask_suggested());
  EXPECT_GT(x[0], 0.01);
  EXPECT_LT(x[0], 9.99);
}

}  // namespace
}  // namespace mlsim::commsched
