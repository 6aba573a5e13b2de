// A tensor-parallel group spanning hosts (issue 15): its all-reduces are the collective layer's
// closed form over the network routes between its hosts, the route shared by the group's GPUs of a
// host (models/serving/tp_allreduce.hpp, across_hosts; the training executor's convention,
// sim_core/workload/graph_executor.cpp). Worked by hand.
#include <gtest/gtest.h>

#include "models/serving/serving_system.hpp"
#include "sim_core/collectives/collective.hpp"
#include "test_support.hpp"

using namespace mlsim;
using namespace mlsim::serving;

namespace {

// A 512-wide one-layer toy with 16 heads (so that TP 16 divides them).
TransformerShape toy16() {
  TransformerShape m = fixtures::toy_transformer(1, "toy16");
  m.heads = 16;
  m.kv_heads = 16;
  return m;
}

// Two hosts of `gpus` toy GPUs on a star whose links are 8 GB/s with 1 us latency each (host to
// host: 8 GB/s, 2 us), GPU work at 10 us per token per layer, and one replica of TP `tp` placed as
// the parser places it (host 0's GPUs first). The group's link inside a host: 100 GB/s, 1 us, with
// fixtures::round_link_costs()'s launch and protocols.
struct TwoHosts {
  Engine engine;
  Topology topo = build_topology(StarSpec{2, LinkSpec{Bandwidth{8e9}, Time::us(1)}});
  FluidNetwork network{engine, topo, Sharing::kMaxMin};
  LinkConditions links{topo, network};
  GpuSpec gpu = fixtures::toy_gpu();
  NodeHardware hardware{topo.nodes().size()};
  HostSpeeds speeds{topo.nodes().size()};
  CostModel costs;
  std::unique_ptr<Compute> compute;
  std::unique_ptr<ServingSystem> sys;

  TwoHosts(int gpus, int tp, std::vector<RequestSpec> requests, TransformerShape model = toy16(),
           ExpertParallel expert = {}) {
    for (NodeId h : topo.hosts())
      hardware.set_host(h, HostHardware{&gpu, gpus, nullptr, std::nullopt});
    costs.add(std::make_unique<fixtures::TenMicrosPerTokenPerLayer>());
    compute = std::make_unique<Compute>(engine, hardware, speeds, costs);
    ServingConfig c;
    c.gpu = gpu;
    c.tp_allreduce = fixtures::round_link_costs();
    DeploymentConfig d;
    d.name = "tp";
    d.model = model;
    d.tp = tp;
    d.expert = expert;
    d.exit_layers = {1};
    c.deployments = {d};
    std::vector<NodeId> slots;
    for (int g = 0; g < tp; ++g) slots.push_back(topo.hosts()[g < gpus ? 0 : 1]);
    sys = std::make_unique<ServingSystem>(
        engine, *compute, slots, c, std::make_unique<fixtures::ListSource>(std::move(requests)),
        RandomStream(1, "t"), RandomStream(1, "e"), &network, &links);
  }
  void run() {
    sys->start();
    engine.run();
  }
};

std::vector<RequestSpec> four_requests() {
  std::vector<RequestSpec> r;
  for (std::uint64_t id = 1; id <= 4; ++id) r.push_back({id, Time::zero(), 3, 2, 0, -1, {}});
  return r;
}

}  // namespace

// Four requests (prompt 3, output 2) at t = 0 on one TP 16 replica over two 8-GPU hosts: one
// prefill iteration of 12 tokens, one decode iteration of 4. Each iteration runs the layer's two
// all-reduces of tokens x 512 x 2 B after its compute (10 us per token).
//
// The group's links: inside a host 100 GB/s and 1 us; between the hosts the star's route, 8 GB/s
// and 2 us, shared by the 8 GPUs of a host: 1 GB/s. A ring step ends with its slowest message:
// bandwidth min(100, 8 / 8) = 1 GB/s, latency max(1, 2) = 2 us. A ring all-reduce over 16 GPUs
// has 30 steps and puts 2 x 15/16 x S on the bus.
//   decode, S = 4,096 B, bus 7,680 B. LL: 30 x 500 + 7,680 / (0.5 x 1 GB/s) = 15,000 + 15,360
//     = 30,360 ns; LL128: 30,000 + 8,192 = 38,192; Simple: 150,000 + 7,680 -> LL.
//     5,000 + 30 x (500 + 2,000) + 15,360 = 95,360 ns; two: 190,720 ns.
//     Decode iteration: 40 us + 190.72 us = 230.72 us.
//   prefill, S = 12,288 B, bus 23,040 B. LL: 15,000 + 46,080 = 61,080; LL128: 30,000 + 24,576
//     = 54,576; Simple: 150,000 + 23,040 -> LL128.
//     5,000 + 30 x (1,000 + 2,000) + 24,576 = 119,576 ns; two: 239,152 ns.
//     Prefill iteration: 120 us + 239.152 us = 359.152 us (every TTFT).
//   Done at 359.152 + 230.72 = 589.872 us.
// On one 16-GPU host the same group's decode all-reduce takes 5,000 + 30 x 1,500 + 7,680 / 50 GB/s
// = 50,153.6 -> 50,154 ns (LL).
TEST(TpAcrossHosts, DecodeIterationAtTp16OverTwoHostsByHand) {
  TwoHosts s(8, 16, four_requests());
  const auto& cm = s.sys->replicas().front()->cost_model();
  const std::vector<WorkItem> decode(4, WorkItem{1, 3, true, true, 0, 1});
  const IterationCost dc = cm.cost(decode);
  EXPECT_EQ(dc.allreduces, 2);
  EXPECT_EQ(dc.allreduce, Time::ns(190'720));
  // The serving term is the collective layer's closed form with those inputs.
  const auto one = collectives::collective_cost(
      fixtures::round_link_costs().costs, collectives::Operation::kAllReduce,
      collectives::Algorithm::kRing, 16, 2, Bytes{4'096}, Bandwidth{1e9}, Time::us(2));
  EXPECT_EQ(one.protocol, collectives::Protocol::kLL);
  EXPECT_EQ(one.time, Time::ns(95'360));
  const std::vector<WorkItem> prefill(4, WorkItem{3, 0, false, true, 0, 1});
  EXPECT_EQ(cm.cost(prefill).allreduce, Time::ns(239'152));

  s.run();
  const auto& m = s.sys->metrics();
  ASSERT_EQ(m.completed(), 4u);
  EXPECT_NEAR(m.ttft().mean(), 359.152e-6, 2e-9);
  EXPECT_NEAR(m.e2e().mean(), 589.872e-6, 3e-9);
  // The replica names both hosts; the all-reduces send nothing through the network (closed form).
  EXPECT_EQ(s.sys->replicas().front()->config().gpus.front(), s.topo.hosts()[0]);
  EXPECT_EQ(s.sys->replicas().front()->config().gpus.back(), s.topo.hosts()[1]);
  EXPECT_EQ(s.network.totals().transfers_started, 0u);

  // The same group on one 16-GPU host: the intra_node link only.
  TwoHosts one_host(16, 16, four_requests());
  EXPECT_EQ(one_host.sys->replicas().front()->cost_model().cost(decode).allreduce,
            Time::ns(2 * 50'154));
}

// Smaller groups stay on one host: TP 8 on an 8-GPU host never sees the network's route.
TEST(TpAcrossHosts, GroupsOnOneHostKeepTheIntraNodeLink) {
  TwoHosts s(8, 8, four_requests());
  const std::vector<WorkItem> decode(4, WorkItem{1, 3, true, true, 0, 1});
  // TP 8, 4,096 B: 26,143 ns per all-reduce (tp_allreduce_test.cpp).
  EXPECT_EQ(s.sys->replicas().front()->cost_model().cost(decode).allreduce, Time::ns(2 * 26'143));
}

// Expert parallelism across hosts: a toy MoE (the 16-head toy with 16 experts of width 1024,
// top-2) at TP 16 = EP 16 over the two hosts, decoding T = 4 tokens. Per layer: the attention's
// all-reduce (95,360 ns, above), then the dispatch and combine all-to-alls and the all-gather over
// the same 16 GPUs, on the same routes (1 GB/s, 2 us):
//   all-to-all: each GPU's slice of ceil(4 / 16) = 1 token, sent to its 2 experts: 2 x 1,024 B
//     = 2,048 B of send buffer, 15/16 of it on the bus: 1,920 B; 15 steps. LL: 7,500 + 3,840;
//     LL128: 15,000 + 2,048; Simple: 75,000 + 1,920 -> LL. 5,000 + 15 x 2,500 + 3,840 = 46,340 ns.
//   all-gather of 4,096 B: 15 steps, 3,840 B on the bus. LL: 7,500 + 7,680; LL128: 15,000 +
//     4,096; Simple 75,000 + 3,840 -> LL. 5,000 + 37,500 + 7,680 = 50,180 ns.
//   95,360 + 2 x 46,340 + 50,180 = 238,220 ns.
TEST(TpAcrossHosts, ExpertParallelAllToAllsCrossTheHostsByHand) {
  TransformerShape m = toy16();
  m.experts = 16;
  m.experts_per_token = 2;
  m.expert_ffn = 1024;
  TwoHosts s(8, 16, four_requests(), m, ExpertParallel{16, 1.0, std::nullopt});
  const std::vector<WorkItem> decode(4, WorkItem{1, 3, true, true, 0, 1});
  const IterationCost c = s.sys->replicas().front()->cost_model().cost(decode);
  EXPECT_EQ(c.allreduces, 1);
  EXPECT_EQ(c.alltoalls, 2);
  EXPECT_EQ(c.alltoall_bytes, 2 * 2'048);
  EXPECT_EQ(c.allreduce, Time::ns(95'360));
  EXPECT_EQ(c.moe_collectives, Time::ns(2 * 46'340 + 50'180));
  s.run();
  EXPECT_EQ(s.sys->metrics().completed(), 4u);
}
