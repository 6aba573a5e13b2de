// PipeDream layer times moved between catalog GPUs: by hand.
#include "sim_core/hardware/profile_scaling.hpp"

#include <gtest/gtest.h>

#include "gpu_fixtures.hpp"

#include "sim_core/base/error.hpp"

namespace mlsim {
namespace {

TEST(ProfileScaling, MemoryBoundShareByBandwidthTheRestByFp32Peak) {
  const GpuSpec v = test::make_gpu("V", 0, 15.7, 900), a = test::make_gpu("A", 0, 19.5, 2039);
  LayerProfile l;
  l.forward_ms = 10;
  l.backward_ms = 20;
  l.parameters = Bytes{2'250'000'000};
  l.activation = Bytes{2'250'000'000};
  // Forward: 4.5e9 bytes take 5 ms at 900 GB/s, half of 10 ms: 10 ms x (0.5 x 900/2039 + 0.5 x
  // 15.7/19.5) = 6.23261 ms. Backward: twice the bytes, 10 ms of 20: the same halves, 12.46522 ms.
  const auto s = layer_seconds_on(l, v, a, "v", "a");
  EXPECT_NEAR(s.forward, 0.010 * (0.5 * 900.0 / 2039.0 + 0.5 * 15.7 / 19.5), 1e-15);
  EXPECT_NEAR(s.forward, 6.23261e-3, 1e-8);
  EXPECT_NEAR(s.backward, 2 * s.forward, 1e-15);
  // The same GPU: unchanged.
  const auto same = layer_seconds_on(l, v, v, "v", "v");
  EXPECT_DOUBLE_EQ(same.forward, 0.010);
  EXPECT_DOUBLE_EQ(same.backward, 0.020);
  // A profile of this layer and an input node (left out): ratio 18.69783 ms / 30 ms.
  DnnProfile p;
  LayerProfile input;
  input.is_input = true;
  input.forward_ms = 100;
  p.layers = {input, l};
  EXPECT_NEAR(profile_time_ratio(p, v, a, "v", "a"), (s.forward + s.backward) / 0.030, 1e-12);
  // A GPU without an FP32 rate: InputError naming where.
  GpuSpec no_fp32 = a;
  no_fp32.peak.clear();
  no_fp32.peak[Dtype::kFp16] = FlopRate{1e12};
  EXPECT_THROW(layer_seconds_on(l, v, no_fp32, "v", "workload.gpu"), InputError);
}

}  // namespace
}  // namespace mlsim
