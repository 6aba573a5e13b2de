// The serving model prices its operators through the platform's cost providers: by hand.
#include <gtest/gtest.h>

#include "models/serving/compute_model.hpp"
#include "sim_core/base/error.hpp"
#include "test_support.hpp"

using namespace mlsim;
using namespace mlsim::serving;

TEST(OperatorTimer, RooflineByHand) {
  const GpuSpec g = fixtures::toy_gpu();  // 100 TFLOP/s fp16, 1 TB/s
  CostModel costs;
  auto roofline = fixtures::ideal_roofline("toy");
  roofline->add("toy", "mlp_down_proj", {RooflineRegime{0, true, 0.5, 0.8, 2e-6, 1}});
  costs.add(std::move(roofline));
  const OperatorTimer t(costs, g, Dtype::kFp16);
  const OperatorShape shape{512, 8, 8, 1024, 1};
  // Compute bound: 1e12 FLOPs at 50 TFLOP/s = 20 ms (bytes 1e9 at 0.8 TB/s = 1.25 ms), + 2 us.
  EXPECT_DOUBLE_EQ(t.seconds(Op::kMlpDown, {1e12, 1e9}, 4096, shape), 0.02 + 2e-6);
  // Memory bound: 8e9 bytes at 0.8 TB/s = 10 ms.
  EXPECT_DOUBLE_EQ(t.seconds(Op::kMlpDown, {1e9, 8e9}, 4096, shape), 0.01 + 2e-6);
  EXPECT_DOUBLE_EQ(t.seconds(Op::kResidualAdd, {0, 1e12}, 4096, shape), 1.0);  // 1 TB at 1 TB/s
}

TEST(OperatorTimer, ProfiledShapeComesFromTheTableOthersFromTheRoofline) {
  const GpuSpec g = fixtures::toy_gpu();
  CostModel costs;
  auto profiles = std::make_unique<ProfileTableProvider>();
  const OperatorShape measured{512, 8, 8, 1024, 1};
  profiles->add_point("toy", "mlp_act", measured, 16, 4e-6);
  profiles->add_point("toy", "mlp_act", measured, 32, 6e-6);
  costs.add(std::move(profiles));
  costs.add(fixtures::ideal_roofline("toy"));
  const OperatorTimer t(costs, g, Dtype::kFp16);
  // 24 tokens of the measured shape: halfway between 4 and 6 us.
  EXPECT_NEAR(t.seconds(Op::kMlpAct, {1e6, 1e6}, 24, measured), 5e-6, 1e-18);
  // TP 2 is not measured: the ideal roofline, 1e6 bytes at 1 TB/s = 1 us.
  EXPECT_NEAR(t.seconds(Op::kMlpAct, {1e6, 1e6}, 24, OperatorShape{512, 8, 8, 1024, 2}), 1e-6,
              1e-18);
  // Every serving operator is priced on the toy GPU; on another GPU it is an InputError.
  OperatorTimer::check(costs, g, "compute");
  GpuSpec other = g;
  other.name = "other";
  EXPECT_THROW(OperatorTimer::check(costs, other, "compute"), InputError);
}
