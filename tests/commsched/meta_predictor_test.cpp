// AutoByte's learned meta-network (models/commsched/meta_predictor.hpp): the ridge regression's
// online update and the features by hand, the trigger at its threshold, and the tuner switching
// iff the predicted gain exceeds the threshold.
#include <gtest/gtest.h>

#include <cmath>

#include "models/commsched/meta_predictor.hpp"
#include "models/commsched/tuners.hpp"
#include "tests/commsched/test_support.hpp"

namespace mlsim::commsched {
namespace {

using testing::Bench;
using testing::layer;

TEST(MetaPredictor, RidgeUpdateByHand) {
  // rho = 1, two features. Sample 1: z = (1, 1), y = 3. A = I + z z^T = [[2, 1], [1, 2]],
  // b = (3, 3), w = A^-1 b = (1, 1) (A (1, 1) = (3, 3)).
  OnlineRidge r(2, 1.0);
  EXPECT_DOUBLE_EQ(r.predict(Eigen::Vector2d(5, 7)), 0.0);  // no sample yet: w = 0
  r.update(Eigen::Vector2d(1, 1), 3);
  EXPECT_NEAR(r.weights()(0), 1.0, 1e-12);
  EXPECT_NEAR(r.weights()(1), 1.0, 1e-12);
  // Sample 2: z = (1, 0), y = 2. A = [[3, 1], [1, 2]] (det 5), b = (5, 3),
  // w = [[2, -1], [-1, 3]] (5, 3) / 5 = (7, 4) / 5 = (1.4, 0.8).
  r.update(Eigen::Vector2d(1, 0), 2);
  EXPECT_NEAR(r.weights()(0), 1.4, 1e-12);
  EXPECT_NEAR(r.weights()(1), 0.8, 1e-12);
  EXPECT_NEAR(r.predict(Eigen::Vector2d(2, 1)), 3.6, 1e-12);
  EXPECT_EQ(r.samples(), 2u);
}

TEST(MetaPredictor, SmallRidgeRecoversALinearFunction) {
  // y = 2 + 3x sampled at x = 0, 1, 2: with rho = 1e-9 the fit is least squares, exact here.
  OnlineRidge r(2, 1e-9);
  for (double x : {0.0, 1.0, 2.0}) r.update(Eigen::Vector2d(1, x), 2 + 3 * x);
  EXPECT_NEAR(r.weights()(0), 2.0, 1e-6);
  EXPECT_NEAR(r.weights()(1), 3.0, 1e-6);
  EXPECT_NEAR(r.predict(Eigen::Vector2d(1, 10)), 32.0, 1e-5);
}

TEST(MetaPredictor, FeaturesByHand) {
  // P = 2M, C = 4M: u = 1, v = 2; c = 0.5 s, m = 2 s.
  // z = [1, c, m, max(c, m), m u, m v, m u^2, m v^2, m u v] = [1, .5, 2, 2, 2, 4, 2, 8, 4].
  const Eigen::VectorXd z = meta_features({2'000'000, 4'000'000}, RuntimeStats{0.5, 2.0});
  ASSERT_EQ(z.size(), static_cast<Eigen::Index>(kMetaFeatures));
  const double want[] = {1, 0.5, 2, 2, 2, 4, 2, 8, 4};
  for (int i = 0; i < 9; ++i) EXPECT_DOUBLE_EQ(z(i), want[i]) << i;
}

TEST(MetaPredictor, RetunesIffThePredictedGainExceedsTheThreshold) {
  // Threshold 2% of the current 1.0 s: a gain of 2.1% triggers, 1.9% does not.
  EXPECT_TRUE(should_retune(1.0, 0.979, 0.02, 10, 0));
  EXPECT_FALSE(should_retune(1.0, 0.981, 0.02, 10, 0));
  EXPECT_FALSE(should_retune(1.0, 1.2, 0.02, 10, 0));  // a loss
  // A restart of 0.5 s against 0.03 s saved per iteration for 10 iterations (0.3 s): no;
  // against 0.2 s: yes.
  EXPECT_FALSE(should_retune(1.0, 0.97, 0.02, 10, 0.5));
  EXPECT_TRUE(should_retune(1.0, 0.97, 0.02, 10, 0.2));
  EXPECT_FALSE(should_retune(0.0, -1.0, 0.02, 10, 0));  // nothing predicted
}

// The tuner on a small PS job with a straggler: every decision switches exactly when the
// predicted gain exceeds the threshold (credit-only grid: no restart cost); with a threshold of
// 100% it never switches.
TEST(MetaPredictor, TunerSwitchesIffPredictedGainExceedsThreshold) {
  auto run = [](double min_gain, std::size_t& switches) {
    Bench b(4);
    JobSpec spec = b.autobyte_ps_spec();
    // A per-credit delay makes small credits slow (each chunk's credit returns 0.3 s late), so
    // the starting credit of 1M is worth leaving.
    spec.credit_delay = Time::from_seconds(0.3);
    b.straggle(1, 3.0, Time::s(20), Time::s(200));
    AutoByteParams params;
    params.grid = {{1'000'000}, {1'000'000, 2'000'000, 4'000'000, 8'000'000}};
    params.interval = 4;
    params.min_gain = min_gain;
    const LinkId up = b.topology.out_links(b.topology.hosts()[0])[0];
    AutoByte tuner(params, b.network, Probe{up, up, Time::zero()}, Sharing::kMaxMin);
    const TrainingJob& job = b.run(std::move(spec), {1'000'000, 1'000'000}, &tuner);
    ASSERT_FALSE(tuner.decisions().empty());
    for (const AutoByteDecision& d : tuner.decisions()) {
      const double gain = d.predicted_current_s - d.predicted_chosen_s;
      EXPECT_EQ(d.switched, d.chosen != d.current && gain > min_gain * d.predicted_current_s)
          << "iteration " << d.iteration;
    }
    switches = job.changes().size();
    std::size_t decided = 0;
    for (const AutoByteDecision& d : tuner.decisions()) decided += d.switched;
    EXPECT_EQ(switches, decided);
  };
  std::size_t never = 0, some = 0;
  run(1.0, never);
  EXPECT_EQ(never, 0u);
  run(0.0, some);
  EXPECT_GT(some, 0u);  // with no threshold it leaves the 1M credit (predicted ~48% slower)
}

}  // namespace
}  // namespace mlsim::commsched
