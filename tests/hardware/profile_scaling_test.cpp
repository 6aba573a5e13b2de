// PipeDream layer times moved between catalog GPUs: by hand.
#include "sim_core/hardware/profile_scaling.hpp"

#include <gtest/gtest.h>

#include "gpu_fixtures.hpp"

#include "sim_core/base/error.hpp"
#include "sim_core/hardware/cost_model.hpp"

namespace mlsim {
namespace {

// Forward 10 ms and backward 20 ms, moving 4.5e9 bytes forward (parameters and activation).
LayerProfile layer_10_20() {
  LayerProfile l;
  l.forward_ms = 10;
  l.backward_ms = 20;
  l.parameters = Bytes{2'250'000'000};
  l.activation = Bytes{2'250'000'000};
  return l;
}

TEST(ProfileScaling, MemoryBoundShareByBandwidthTheRestByFp32Peak) {
  const GpuSpec v = test::make_gpu("V", 0, 15.7, 900), a = test::make_gpu("A", 0, 19.5, 2039);
  const LayerProfile l = layer_10_20();
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
  // A GPU without an FP32 rate: InputError naming where.
  GpuSpec no_fp32 = a;
  no_fp32.peak.clear();
  no_fp32.peak[Dtype::kFp16] = FlopRate{1e12};
  EXPECT_THROW(layer_seconds_on(l, v, no_fp32, "v", "workload.gpu"), InputError);
}

TEST(ProfileScaling, EachHostGetsItsOwnGpusTimesOneTablePerGpuType) {
  const GpuSpec v = test::make_gpu("V", 0, 15.7, 900), a = test::make_gpu("A", 0, 19.5, 2039);
  const LayerProfile l = layer_10_20();
  LayerProfile input;
  input.is_input = true;
  input.forward_ms = 100;
  DnnProfile p;
  p.layers = {input, l};
  // Hosts 0 and 2 have V (the profiling GPU), host 1 has A, host 3 nothing.
  NodeHardware hw(4);
  hw.set_host(0, HostHardware{.gpu = &v, .gpus = 1, .nic = nullptr, .intra_node = {}});
  hw.set_host(1, HostHardware{.gpu = &a, .gpus = 1, .nic = nullptr, .intra_node = {}});
  hw.set_host(2, HostHardware{.gpu = &v, .gpus = 1, .nic = nullptr, .intra_node = {}});
  auto where = [](std::size_t i) { return "worker " + std::to_string(i); };
  const std::vector<NodeId> hosts = {0, 1, 2};
  const auto t = profile_seconds_on_hosts(p, false, v, "v", hw, hosts, where);
  ASSERT_EQ(t.size(), 3u);
  // V: the measured 10 and 20 ms; A: 6.23261 and 12.46522 ms as above; the input node left out.
  ASSERT_EQ(t[0]->size(), 1u);
  EXPECT_DOUBLE_EQ((*t[0])[0].forward, 0.010);
  EXPECT_DOUBLE_EQ((*t[0])[0].backward, 0.020);
  EXPECT_NEAR((*t[1])[0].forward, 6.23261e-3, 1e-8);
  EXPECT_NEAR((*t[1])[0].backward, 12.46522e-3, 1e-8);
  EXPECT_EQ(t[0], t[2]);  // one table per GPU type
  // With the input node: first, its measured 100 ms on every GPU (it runs on the CPU).
  const auto with_input = profile_seconds_on_hosts(p, true, v, "v", hw, hosts, where);
  ASSERT_EQ(with_input[1]->size(), 2u);
  EXPECT_DOUBLE_EQ((*with_input[1])[0].forward, 0.100);
  EXPECT_NEAR((*with_input[1])[1].forward, 6.23261e-3, 1e-8);
  // A host without a GPU: InputError at its place.
  const std::vector<NodeId> bare = {0, 3};
  try {
    profile_seconds_on_hosts(p, false, v, "v", hw, bare, where);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("worker 1"), std::string::npos) << e.what();
  }
}

TEST(ProfileScaling, ATimeOfUnknownTrafficMovesByThePeakRatio) {
  // A cluster trace's duration measured on V (FP32 15.7 TFLOPS): on A (19.5) it takes
  // 15.7 / 19.5 = 0.805128 of the time, whatever the HBM bandwidths; on V itself exactly 1.
  const GpuSpec v = test::make_gpu("V", 125, 15.7, 900), a = test::make_gpu("A", 312, 19.5, 2039);
  EXPECT_DOUBLE_EQ(profiled_time_factor(v, a, Dtype::kFp32, "v", "a"), 15.7 / 19.5);
  EXPECT_NEAR(profiled_time_factor(v, a, Dtype::kFp32, "v", "a"), 0.805128, 1e-6);
  EXPECT_DOUBLE_EQ(profiled_time_factor(v, a, Dtype::kFp16, "v", "a"), 125.0 / 312.0);
  EXPECT_DOUBLE_EQ(profiled_time_factor(v, v, Dtype::kFp32, "v", "v"), 1.0);
  // As Compute prices ProfiledWork of one second measured on V without bytes.
  CostModel costs;
  EXPECT_DOUBLE_EQ(profiled_time_factor(v, a, Dtype::kFp32, "v", "a"),
                   costs.seconds(ProfiledWork{1.0, &v, Dtype::kFp32, 0}, a));
  // A format the measuring GPU lacks: InputError at its place, even toward itself.
  try {
    profiled_time_factor(v, v, Dtype::kFp8, "system.reference_gpu", "v");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("system.reference_gpu"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mlsim
