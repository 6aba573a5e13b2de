// Compute: work on a host's GPU, per-host speed, rescaling of work in progress. Every expected
// time is computed by hand in the comment next to it.
#include "sim_core/hardware/compute.hpp"

#include <gtest/gtest.h>

#include "gpu_fixtures.hpp"

#include <vector>

#include "sim_core/base/error.hpp"

namespace mlsim {
namespace {

struct Fixture {
  explicit Fixture(std::size_t nodes) : hardware(nodes), speeds(nodes) {}
  Engine engine;
  NodeHardware hardware;
  HostSpeeds speeds;
  CostModel costs;
  std::vector<Time> done_at;
  Compute::Done record() {
    return [this] { done_at.push_back(engine.now()); };
  }
};

TEST(Compute, FixedWorkOnANominalHostTakesItsDuration) {
  Fixture f(2);
  Compute compute(f.engine, f.hardware, f.speeds, f.costs);
  compute.run(0, FixedWork{Time::ms(10)}, f.record());
  EXPECT_EQ(compute.in_progress(), 1u);
  f.engine.run();
  ASSERT_EQ(f.done_at.size(), 1u);
  EXPECT_EQ(f.done_at[0], Time::ms(10));
  EXPECT_EQ(compute.in_progress(), 0u);
}

TEST(Compute, SpeedHalvingMidOperationStretchesOnlyWhatRemains) {
  Fixture f(2);
  Compute compute(f.engine, f.hardware, f.speeds, f.costs);
  compute.run(0, FixedWork{Time::ms(10)}, f.record());
  compute.run(1, FixedWork{Time::ms(10)}, f.record());  // another host: unaffected
  f.engine.schedule_at(Time::ms(4), [&] { f.speeds.set_speed(0, 0.5); });
  f.engine.run();
  // Host 1: 10 ms. Host 0: 4 ms at speed 1 leaves 6 ms of nominal work; at speed 0.5 that is
  // 12 ms more, so it ends at 4 + 12 = 16 ms.
  ASSERT_EQ(f.done_at.size(), 2u);
  EXPECT_EQ(f.done_at[0], Time::ms(10));
  EXPECT_EQ(f.done_at[1], Time::ms(16));
}

TEST(Compute, SpeedChangesTwiceAndWorkStartedOnASlowHost) {
  Fixture f(1);
  Compute compute(f.engine, f.hardware, f.speeds, f.costs);
  f.speeds.set_speed(0, 0.5);
  compute.run(0, FixedWork{Time::ms(10)}, f.record());
  f.engine.schedule_at(Time::ms(4), [&] { f.speeds.set_speed(0, 2.0); });
  f.engine.schedule_at(Time::ms(6), [&] { f.speeds.set_speed(0, 1.0); });
  f.engine.run();
  // 0-4 ms at 0.5: 2 ms of work done, 8 left. 4-6 ms at 2: 4 ms done, 4 left. From 6 ms at 1:
  // ends at 10 ms.
  ASSERT_EQ(f.done_at.size(), 1u);
  EXPECT_EQ(f.done_at[0], Time::ms(10));
}

TEST(Compute, LockStepGroupEndsWithItsSlowestHostAndHostTimeIsNotScaled) {
  Fixture f(3);
  Compute compute(f.engine, f.hardware, f.speeds, f.costs);
  f.speeds.set_speed(1, 0.5);
  const NodeId hosts[] = {0, 1};
  const double nominal[] = {0.010, 0.006};
  compute.run_for(hosts, nominal, f.record(), 0.002);
  f.engine.schedule_at(Time::ms(4), [&] { f.speeds.set_speed(0, 0.5); });
  f.engine.run();
  // Host 1 at 0.5 needs 12 ms. Host 0: 4 ms at 1 leaves 6 ms, at 0.5 that is 12 ms more, 16 ms.
  // The slowest is host 0 at 16 ms; then 2 ms of host (CPU) time no GPU speed scales: 18 ms.
  ASSERT_EQ(f.done_at.size(), 1u);
  EXPECT_EQ(f.done_at[0], Time::ms(18));
}

TEST(Compute, SpeedChangeDuringTheHostPartLeavesItAlone) {
  Fixture f(1);
  Compute compute(f.engine, f.hardware, f.speeds, f.costs);
  const NodeId host = 0;
  const double nominal = 0.004;
  compute.run_for({&host, 1}, {&nominal, 1}, f.record(), 0.004);
  f.engine.schedule_at(Time::ms(6), [&] { f.speeds.set_speed(0, 0.25); });
  f.engine.run();
  // GPU part ends at 4 ms; by 6 ms 2 of the 4 ms of host time are done; the rest is not slowed.
  ASSERT_EQ(f.done_at.size(), 1u);
  EXPECT_EQ(f.done_at[0], Time::ms(8));
}

TEST(Compute, CancelledWorkNeverCallsBack) {
  Fixture f(1);
  Compute compute(f.engine, f.hardware, f.speeds, f.costs);
  auto h = compute.run(0, FixedWork{Time::ms(5)}, f.record());
  compute.run(0, FixedWork{Time::ms(7)}, f.record());
  f.engine.schedule_at(Time::ms(1), [&] { EXPECT_TRUE(compute.cancel(h)); });
  f.engine.run();
  ASSERT_EQ(f.done_at.size(), 1u);
  EXPECT_EQ(f.done_at[0], Time::ms(7));
  EXPECT_FALSE(compute.cancel(h));  // already gone
}

TEST(Compute, OperatorWorkIsPricedForTheHostsGpu) {
  // Two GPU types on one topology: node 0 a "slow" GPU, node 1 a "fast" one, one roofline
  // calibration each (one regime, efficiencies 0.5, overhead 10 us).
  const GpuSpec slow = test::make_gpu("slow", 100, 12.5, 1000),
                fast = test::make_gpu("fast", 400, 50, 2000);
  Fixture f(2);
  f.hardware.set_host(0, HostHardware{&slow, 1, nullptr, std::nullopt});
  f.hardware.set_host(1, HostHardware{&fast, 1, nullptr, std::nullopt});
  auto roofline = std::make_unique<RooflineProvider>();
  const std::vector<RooflineRegime> one{{0, true, 0.5, 0.5, 10e-6}};
  roofline->add("slow", "gemm", one);
  roofline->add("fast", "gemm", one);
  f.costs.add(std::move(roofline));
  Compute compute(f.engine, f.hardware, f.speeds, f.costs);
  // 1e12 FLOPs and 1e9 bytes in fp16.
  const OperatorWork op{"gemm", 1e12, 1e9, Dtype::kFp16, 4096, {}};
  // slow: max(1e12 / (0.5 * 100e12), 1e9 / (0.5 * 1000e9)) + 10e-6 = max(0.02, 0.002) + 1e-5.
  EXPECT_DOUBLE_EQ(compute.nominal_seconds(0, op), 0.02001);
  // fast: max(1e12 / (0.5 * 400e12), 1e9 / (0.5 * 2000e9)) + 10e-6 = 0.005 + 1e-5.
  EXPECT_DOUBLE_EQ(compute.nominal_seconds(1, op), 0.00501);
  compute.run(0, op, f.record());
  compute.run(1, op, f.record());
  f.engine.run();
  ASSERT_EQ(f.done_at.size(), 2u);
  EXPECT_EQ(f.done_at[0], Time::us(5010));
  EXPECT_EQ(f.done_at[1], Time::us(20010));
}

TEST(Compute, OperatorWorkOnAHostWithoutHardwareIsAnInputError) {
  Fixture f(1);
  Compute compute(f.engine, f.hardware, f.speeds, f.costs);
  EXPECT_THROW(compute.nominal_seconds(0, OperatorWork{"gemm", 1, 1, Dtype::kFp16, 1, {}}),
               InputError);
}

}  // namespace
}  // namespace mlsim
