// Prefill/decode disaggregation (serving_system.hpp, PoolRole) against schedules worked by hand.
//
// Simple numbers: a two-layer toy transformer (hidden 512, 8 KV heads of 64, fp16) whose layer
// costs 10 us per token (fixtures::TenMicrosPerTokenPerLayer). Its KV is 2 x 8 x 64 x 2 B =
// 2,048 B per token and layer, so a 100-token prompt's KV over both layers is 409,600 B. One
// prefill replica and one decode replica, tp 1.
#include <gtest/gtest.h>

#include "models/serving/serving_system.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "test_support.hpp"

using namespace mlsim;
using namespace mlsim::serving;

namespace {

// Pools on the hosts of fixtures::TwoHostStar (1 GB/s links, 200 ns host to host).
struct Pools : fixtures::TwoHostStar {
  std::unique_ptr<ServingSystem> sys;

  // The prefill replica on host `prefill_host`, the decode replica on `decode_host`; `decode_gpu`
  // (if given) is the decode pool's GPU; a link within a host of 1.024 GB/s and 1 us.
  Pools(int prefill_host, int decode_host, std::vector<RequestSpec> requests,
        std::optional<GpuSpec> decode_gpu = std::nullopt) {
    ServingConfig c;
    c.gpu = gpu;
    DeploymentConfig p;
    p.model = fixtures::toy_transformer(2, "toy");
    p.exit_layers = {2};
    DeploymentConfig d = p;
    p.name = "prefill";
    p.role = PoolRole::kPrefill;
    p.decode_pool = 1;
    d.name = "decode";
    d.role = PoolRole::kDecode;
    d.gpu = decode_gpu;
    d.host_link = HostLink{Bandwidth{1.024e9}, Time::us(1)};
    c.deployments = {p, d};
    sys = std::make_unique<ServingSystem>(
        engine, *compute, std::vector<NodeId>{host(prefill_host), host(decode_host)}, c,
        std::make_unique<fixtures::ListSource>(std::move(requests)), RandomStream(1, "t"),
        RandomStream(1, "e"), &network, &links);
  }
  void run() {
    sys->start();
    engine.run();
  }
};

RequestSpec spec(std::uint64_t id, int prompt, int output) {
  return {id, Time::zero(), prompt, output, 0, -1, {}};
}

}  // namespace

TEST(Disaggregation, OneRequestAcrossHosts) {
  // Prompt 100, output 3, prefill on host 0, decode on host 1:
  //   prefill: 2 layers x 100 tokens x 10 us = 2,000 us, which samples the first token: TTFT 2 ms;
  //   KV: 409,600 B at 1 GB/s = 409.6 us + 200 ns of latency = 409.8 us, arriving at 2,409.8 us;
  //   decode: 2 steps of 2 layers x 10 us = 40 us: done at 2,449.8 us;
  //   TPOT (2,449.8 - 2,000) / 2 = 224.9 us.
  Pools s(0, 1, {spec(1, 100, 3)});
  s.run();
  const auto& m = s.sys->metrics();
  ASSERT_EQ(m.completed(), 1u);
  EXPECT_NEAR(m.ttft().mean(), 2000e-6, 2e-9);
  EXPECT_NEAR(m.e2e().mean(), 2449.8e-6, 3e-9);
  EXPECT_NEAR(m.tpot().mean(), 224.9e-6, 3e-9);
  EXPECT_NEAR(m.kv_transfer().mean(), 409.8e-6, 2e-9);
  EXPECT_EQ(s.sys->transfers().bytes_sent(), 409'600);
  EXPECT_EQ(s.sys->transfers().bytes_delivered(), 409'600);
  // The prefill replica ran one iteration, the decode replica two; both pools are empty.
  EXPECT_EQ(s.sys->replicas()[0]->iterations(), 1u);
  EXPECT_EQ(s.sys->replicas()[1]->iterations(), 2u);
  EXPECT_EQ(s.sys->replicas()[0]->kv().used(), 0);
  EXPECT_EQ(s.sys->replicas()[1]->kv().used(), 0);
}

TEST(Disaggregation, OneRequestWithinAHost) {
  // Both pools on host 0: the KV crosses the host's link, 409,600 B at 1.024 GB/s = 400 us + 1 us.
  // Done at 2,000 + 401 + 40 = 2,441 us.
  Pools s(0, 0, {spec(1, 100, 3)});
  s.run();
  EXPECT_NEAR(s.sys->metrics().e2e().mean(), 2441e-6, 3e-9);
  EXPECT_NEAR(s.sys->metrics().kv_transfer().mean(), 401e-6, 2e-9);
}

TEST(Disaggregation, DecodeAdmissionWaitsForKvMemory) {
  // The decode GPU holds 20 layer-blocks of KV (16 tokens x 2,048 B = 32 KiB each): its HBM is
  // 14,678,472 B, 90% of it is 13,210,624.8 B, less the toy model's 12,538,880 B of weights
  // (6,269,440 parameters) leaves 671,744.8 B = 20.5 blocks. One request needs ceil(101 / 16) x 2
  // = 14 blocks to arrive, so the second waits for the first to finish:
  //   both prefills in one iteration: 2 x 200 tokens x 10 us = 4,000 us (both TTFTs 4 ms);
  //   A's KV 409.8 us, arrives 4,409.8; 2 decode steps: done at 4,449.8 us, its blocks freed;
  //   B waited 449.8 us for room, its KV arrives 4,859.6, done at 4,899.6 us.
  GpuSpec small = fixtures::toy_gpu();
  small.hbm_capacity = Bytes{14'678'472};
  Pools s(0, 1, {spec(1, 100, 3), spec(2, 100, 3)}, small);
  s.run();
  const auto& m = s.sys->metrics();
  ASSERT_EQ(m.completed(), 2u);
  EXPECT_EQ(s.sys->replicas()[1]->kv().total(), 20);
  EXPECT_NEAR(m.ttft().quantile(1.0), 4000e-6, 2e-9);
  EXPECT_NEAR(m.e2e().quantile(0.0), 4449.8e-6, 3e-9);
  EXPECT_NEAR(m.e2e().quantile(1.0), 4899.6e-6, 5e-9);
  EXPECT_EQ(s.sys->replicas()[1]->kv().peak(), 14);
  EXPECT_EQ(s.sys->transfers().bytes_delivered(), 2 * 409'600);
}

TEST(Disaggregation, OneTokenAnswerNeedsNoTransfer) {
  // The prefill samples the only token: the request completes on the prefill replica.
  Pools s(0, 1, {spec(1, 100, 1)});
  s.run();
  EXPECT_EQ(s.sys->metrics().completed(), 1u);
  EXPECT_EQ(s.sys->transfers().transfers(), 0u);
  EXPECT_NEAR(s.sys->metrics().e2e().mean(), 2000e-6, 2e-9);
}
