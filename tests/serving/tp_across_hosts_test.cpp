// A tensor-parallel group spanning hosts (issue 15): its all-reduces are the collective layer's
// hierarchical all-reduce (sim_core/collectives/hierarchical.hpp: NCCL's ring or tree across
// hosts) over the network routes between its hosts, re-read when link events change them
// (models/serving/tp_allreduce.hpp, across_hosts, HostRoutes); its MoE all-to-alls stay one flat
// closed form over a GPU's share of the route (training's convention). Worked by hand.
#include <gtest/gtest.h>

#include "models/serving/serving_system.hpp"
#include "sim_core/collectives/collective.hpp"
#include "sim_core/collectives/hierarchical.hpp"
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
// fixtures::round_link_costs()'s launch and protocols, and 3 us per inter-node step.
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
    c.tp_allreduce.costs.inter_node_latency = Time::us(3);
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
// The hierarchical all-reduce over h = 2 hosts of g = 8 GPUs (n = 16): inside a host 100 GB/s and
// 1 us, between the hosts the star's route, 8 GB/s (all of it: NCCL's channels leave a host
// through different NICs) and 2 us, plus 3 us per inter-node step. The narrowest link: 8 GB/s.
//   Ring: 30 steps, 2 inter-node, 28 intra; 2 x 15/16 x S on the bus.
//     Fixed: 5,000 + 28 x 1,000 + 2 x (2,000 + 3,000) = 43,000 ns.
//   Tree: chains of 8, a binary tree over 2 hosts: 2 x (7 + 1) = 16 steps, 2 inter-node, 14
//     intra; 2S on the bus. Fixed: 5,000 + 14 x 1,000 + 2 x 5,000 = 29,000 ns.
//   decode, S = 4,096 B. Ring LL: 15,000 + 7,680 / 4 GB/s = 16,920 -> 59,920; tree LL: 8,000 +
//     8,192 / 4 GB/s = 10,048 -> 39,048; tree LL128: 16,000 + 8,192 / 7.5 GB/s = 17,092 -> 46,092;
//     Simple is worse still -> tree, LL, 39,048 ns; two: 78,096 ns.
//     Decode iteration: 40 us + 78.096 us = 118.096 us.
//   prefill, S = 12,288 B. Ring LL: 15,000 + 23,040 / 4 GB/s = 20,760 -> 63,760; tree LL:
//     8,000 + 24,576 / 4 GB/s = 14,144 -> 43,144; tree LL128: 16,000 + 3,276.8 -> 48,277
//     -> tree, LL, 43,144 ns; two: 86,288 ns.
//     Prefill iteration: 120 us + 86.288 us = 206.288 us (every TTFT).
//   Done at 206.288 + 118.096 = 324.384 us.
// (The former flat form, the route shared by a host's 8 GPUs: 1 GB/s and 2 us over 30 steps,
// 95,360 ns for the decode all-reduce.)
// On one 16-GPU host the same group's decode all-reduce takes 5,000 + 30 x 1,500 + 7,680 / 50 GB/s
// = 50,153.6 -> 50,154 ns (LL).
TEST(TpAcrossHosts, DecodeIterationAtTp16OverTwoHostsByHand) {
  TwoHosts s(8, 16, four_requests());
  const auto& cm = s.sys->replicas().front()->cost_model();
  const std::vector<WorkItem> decode(4, WorkItem{1, 3, true, true, 0, 1});
  const IterationCost dc = cm.cost(decode);
  EXPECT_EQ(dc.allreduces, 2);
  EXPECT_EQ(dc.allreduce, Time::ns(2 * 39'048));
  // The serving term is the collective layer's hierarchical cost with those inputs.
  collectives::HostGroup group;
  group.hosts = 2;
  group.gpus_per_host = 8;
  group.intra = Bandwidth{100e9};
  group.intra_latency = Time::us(1);
  group.inter = Bandwidth{8e9};
  group.inter_latency = Time::us(2);
  collectives::CostModel costs = fixtures::round_link_costs().costs;
  costs.inter_node_latency = Time::us(3);
  const auto one = collectives::hierarchical_all_reduce_cost(costs, group, Bytes{4'096});
  EXPECT_EQ(one.algorithm, collectives::Algorithm::kTree);
  EXPECT_EQ(one.protocol, collectives::Protocol::kLL);
  EXPECT_EQ(one.time, Time::ns(39'048));
  EXPECT_EQ(collectives::hierarchical_all_reduce_time(costs, group, collectives::Algorithm::kRing,
                                                      collectives::Protocol::kLL, Bytes{4'096}),
            Time::ns(59'920));
  const std::vector<WorkItem> prefill(4, WorkItem{3, 0, false, true, 0, 1});
  EXPECT_EQ(cm.cost(prefill).allreduce, Time::ns(2 * 43'144));

  s.run();
  const auto& m = s.sys->metrics();
  ASSERT_EQ(m.completed(), 4u);
  EXPECT_NEAR(m.ttft().mean(), 206.288e-6, 2e-9);
  EXPECT_NEAR(m.e2e().mean(), 324.384e-6, 3e-9);
  // The replica names both hosts; the all-reduces send nothing through the network (closed form).
  EXPECT_EQ(s.sys->replicas().front()->config().gpus.front(), s.topo.hosts()[0]);
  EXPECT_EQ(s.sys->replicas().front()->config().gpus.back(), s.topo.hosts()[1]);
  EXPECT_EQ(s.network.totals().transfers_started, 0u);

  // The same group on one 16-GPU host: the intra_node link only.
  TwoHosts one_host(16, 16, four_requests());
  EXPECT_EQ(one_host.sys->replicas().front()->cost_model().cost(decode).allreduce,
            Time::ns(2 * 50'154));
}

// Link events reach the group's route (issue 15): the same run, with every star link slowed
// from 8 to 2 GB/s at t = 100 us, during the prefill iteration (0 to 206.288 us, costed at its
// start with 8 GB/s: unchanged). The decode iteration starts at 206.288 us and re-reads the
// route: 2 GB/s, 2 us.
//   Ring LL: 15,000 + 7,680 / 1 GB/s = 22,680 -> 65,680 ns; tree LL: 8,000 + 8,192 / 1 GB/s =
//   16,192 -> 45,192 ns; tree LL128: 16,000 + 8,192 / 1.875 GB/s = 20,369 -> 49,369 ns
//   -> tree, LL, 45,192 ns; two: 90,384 ns. Decode iteration 40 + 90.384 = 130.384 us.
//   Done at 206.288 + 130.384 = 336.672 us (324.384 us without the event).
// Back to 8 GB/s and the cost is the first one again.
TEST(TpAcrossHosts, LinkEventsReachTheGroupsRouteByHand) {
  TwoHosts s(8, 16, four_requests());
  std::vector<LinkId> all;
  for (LinkId l = 0; l < s.topo.links().size(); ++l) all.push_back(l);
  s.engine.schedule_at(Time::us(100), [&] { s.links.set_bandwidth(all, Bandwidth{2e9}); });
  s.run();
  const auto& m = s.sys->metrics();
  ASSERT_EQ(m.completed(), 4u);
  EXPECT_NEAR(m.ttft().mean(), 206.288e-6, 2e-9);
  EXPECT_NEAR(m.e2e().mean(), 336.672e-6, 3e-9);

  const auto& cm = s.sys->replicas().front()->cost_model();
  const std::vector<WorkItem> decode(4, WorkItem{1, 3, true, true, 0, 1});
  EXPECT_EQ(cm.cost(decode).allreduce, Time::ns(2 * 45'192));
  s.links.set_bandwidth(all, Bandwidth{8e9});
  EXPECT_EQ(cm.cost(decode).allreduce, Time::ns(2 * 39'048));
}

// A group cut apart by a failed link cannot all-reduce: the next iteration's cost says so, naming
// the replica, rather than costing it over a route that is gone.
TEST(TpAcrossHosts, AGroupWhoseHostsAreCutApartIsReported) {
  TwoHosts s(8, 16, four_requests());
  s.links.set_link_up(s.topo.out_links(s.topo.hosts()[1]).front(), false);
  const std::vector<WorkItem> decode(4, WorkItem{1, 3, true, true, 0, 1});
  try {
    (void)s.sys->replicas().front()->cost_model().cost(decode);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("serving replica tp"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no route left"), std::string::npos) << e.what();
  }
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
// all-reduce (hierarchical: 39,048 ns, above), then the dispatch and combine all-to-alls and the
// all-gather over the same 16 GPUs, one flat closed form over a GPU's share of the route
// (8 GB/s / 8 = 1 GB/s, 2 us):
//   all-to-all: each GPU's slice of ceil(4 / 16) = 1 token, sent to its 2 experts: 2 x 1,024 B
//     = 2,048 B of send buffer, 15/16 of it on the bus: 1,920 B; 15 steps. LL: 7,500 + 3,840;
//     LL128: 15,000 + 2,048; Simple: 75,000 + 1,920 -> LL. 5,000 + 15 x 2,500 + 3,840 = 46,340 ns.
//   all-gather of 4,096 B: 15 steps, 3,840 B on the bus. LL: 7,500 + 7,680; LL128: 15,000 +
//     4,096; Simple 75,000 + 3,840 -> LL. 5,000 + 37,500 + 7,680 = 50,180 ns.
//   collectives: 2 x 46,340 + 50,180 = 142,860 ns.
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
  EXPECT_EQ(c.allreduce, Time::ns(39'048));
  EXPECT_EQ(c.moe_collectives, Time::ns(2 * 46'340 + 50'180));
  s.run();
  EXPECT_EQ(s.sys->metrics().completed(), 4u);
}
