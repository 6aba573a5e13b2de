// The hierarchical all-reduce across hosts (sim_core/collectives/hierarchical.hpp): NCCL's ring
// through all GPUs or its tree of intra-host chains, the cheaper by NCCL's cost model, with the
// inter-node latency on the inter-node steps. Worked by hand, and properties over random groups.
#include "sim_core/collectives/hierarchical.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

using namespace mlsim;
using namespace mlsim::collectives;

namespace {

// Round numbers: launch 5 us; LL 500 ns per step at half the bandwidth, LL128 1 us at 0.9375,
// Simple 5 us at 1; 3 us per inter-node step.
CostModel round_costs() {
  CostModel m;
  m.launch = Time::us(5);
  m.of(Protocol::kLL) = {true, Time::ns(500), 0.5};
  m.of(Protocol::kLL128) = {true, Time::us(1), 0.9375};
  m.of(Protocol::kSimple) = {true, Time::us(5), 1.0};
  m.inter_node_latency = Time::us(3);
  return m;
}

// Two hosts of two GPUs: NVLink-like 100 GB/s and 1 us inside a host, 10 GB/s and 4 us between
// the hosts.
HostGroup two_by_two() {
  HostGroup g;
  g.hosts = 2;
  g.gpus_per_host = 2;
  g.intra = Bandwidth{100e9};
  g.intra_latency = Time::us(1);
  g.inter = Bandwidth{10e9};
  g.inter_latency = Time::us(4);
  return g;
}

}  // namespace

// 2 hosts x 2 GPUs (n = 4), by hand.
//   Ring: 2(n-1) = 6 steps, 2(h-1) = 2 of them inter-node, 4 intra; bus bytes 2(n-1)/n S = 1.5 S.
//     Fixed part: launch 5,000 + 4 x 1,000 (intra latency) + 2 x (4,000 + 3,000) = 23,000 ns.
//   Tree: chains of g = 2 in each host, a binary tree over 2 hosts: 2((g-1) + ceil(log2 2)) = 4
//     steps, 2 inter-node, 2 intra; every link carries 2S.
//     Fixed part: 5,000 + 2 x 1,000 + 2 x 7,000 = 21,000 ns.
//   The narrowest link either crosses: min(100, 10) = 10 GB/s.
// S = 1,000,000 B:
//   Ring: LL 6 x 500 + 1.5e6 / 5e9 = 3,000 + 300,000; LL128 6,000 + 1.5e6 / 9.375e9 = 6,000 +
//     160,000 = 166,000; Simple 30,000 + 150,000 = 180,000 -> LL128, 23,000 + 166,000 = 189,000.
//   Tree: LL 2,000 + 400,000; LL128 4,000 + 2e6 / 9.375e9 = 4,000 + 213,333.3; Simple 20,000 +
//     200,000 -> LL128, 21,000 + 217,333.3 = 238,333 ns.
//   -> ring, LL128, 189,000 ns.
// S = 1,000 B:
//   Ring: LL 3,000 + 1,500 / 5e9 = 3,300; LL128 6,000 + 160; Simple 30,000 + 150 -> LL,
//     23,000 + 3,300 = 26,300 ns.
//   Tree: LL 2,000 + 2,000 / 5e9 = 2,400 -> 21,000 + 2,400 = 23,400 ns.
//   -> tree, LL, 23,400 ns (fewer latency steps win a small call).
TEST(Hierarchical, TwoHostsOfTwoGpusByHand) {
  const CostModel m = round_costs();
  const HostGroup g = two_by_two();
  EXPECT_EQ(hierarchical_steps(Algorithm::kRing, g).total, 6);
  EXPECT_EQ(hierarchical_steps(Algorithm::kRing, g).inter, 2);
  EXPECT_EQ(hierarchical_steps(Algorithm::kTree, g).total, 4);
  EXPECT_EQ(hierarchical_steps(Algorithm::kTree, g).inter, 2);

  EXPECT_EQ(
      hierarchical_all_reduce_time(m, g, Algorithm::kRing, Protocol::kLL128, Bytes{1'000'000}),
      Time::ns(189'000));
  EXPECT_EQ(
      hierarchical_all_reduce_time(m, g, Algorithm::kTree, Protocol::kLL128, Bytes{1'000'000}),
      Time::ns(238'333));
  const HierarchicalCost big = hierarchical_all_reduce_cost(m, g, Bytes{1'000'000});
  EXPECT_EQ(big.algorithm, Algorithm::kRing);
  EXPECT_EQ(big.protocol, Protocol::kLL128);
  EXPECT_EQ(big.time, Time::ns(189'000));

  EXPECT_EQ(hierarchical_all_reduce_time(m, g, Algorithm::kRing, Protocol::kLL, Bytes{1'000}),
            Time::ns(26'300));
  const HierarchicalCost small = hierarchical_all_reduce_cost(m, g, Bytes{1'000});
  EXPECT_EQ(small.algorithm, Algorithm::kTree);
  EXPECT_EQ(small.protocol, Protocol::kLL);
  EXPECT_EQ(small.time, Time::ns(23'400));

  // Without the inter-node latency each inter-node step is 3 us shorter: 2 steps, 6 us less.
  CostModel no_inter = m;
  no_inter.inter_node_latency = Time::zero();
  EXPECT_EQ(hierarchical_all_reduce_cost(no_inter, g, Bytes{1'000}).time, Time::ns(17'400));
}

// One GPU per host (1 x 2): both rings' steps cross hosts; the bus carries S once. No protocols:
// no hop latency, efficiency 1. S = 1 MB over 10 GB/s: 5,000 + 2 x (4,000 + 3,000) + 100,000 =
// 119,000 ns (the tree: 2 steps too, but 2S: 219,000).
TEST(Hierarchical, OneGpuPerHostWithoutProtocolsByHand) {
  CostModel m;
  m.launch = Time::us(5);
  m.inter_node_latency = Time::us(3);
  HostGroup g = two_by_two();
  g.gpus_per_host = 1;
  g.intra = Bandwidth{0};  // not used with one GPU per host
  const HierarchicalCost c = hierarchical_all_reduce_cost(m, g, Bytes{1'000'000});
  EXPECT_EQ(c.algorithm, Algorithm::kRing);
  EXPECT_FALSE(c.protocol.has_value());
  EXPECT_EQ(c.time, Time::ns(119'000));
  EXPECT_EQ(hierarchical_all_reduce_time(m, g, Algorithm::kTree, std::nullopt, Bytes{1'000'000}),
            Time::ns(219'000));
}

// One host: the layer's flat ring (collective_cost), whatever the route between hosts says, so
// single-host figures do not move. One GPU: nothing to reduce.
TEST(Hierarchical, OneHostIsTheFlatRing) {
  const CostModel m = round_costs();
  HostGroup g = two_by_two();
  g.hosts = 1;
  g.gpus_per_host = 8;
  for (std::int64_t s : {1'000, 1'000'000, 64'000'000}) {
    const CollectiveCost flat = collective_cost(m, Operation::kAllReduce, Algorithm::kRing, 8, 2,
                                                Bytes{s}, g.intra, g.intra_latency);
    const HierarchicalCost h = hierarchical_all_reduce_cost(m, g, Bytes{s});
    EXPECT_EQ(h.time, flat.time) << s;
    EXPECT_EQ(h.protocol, flat.protocol) << s;
  }
  g.gpus_per_host = 1;
  EXPECT_EQ(hierarchical_all_reduce_cost(m, g, Bytes{1'000}).time, Time::zero());
}

// Three hosts: the tree takes ceil(log2 3) = 2 levels each way (4 inter-node steps), the ring
// 2(h-1) = 4 as well. g = 1, no protocols, S = 1,000 B at 10 GB/s, launch 5 us, 7 us per
// inter-node step: ring 5,000 + 4 x 7,000 + 2 x 2/3 x 1,000 / 10 = 33,133.3 -> 33,133 ns.
TEST(Hierarchical, ThreeHostsCountLog2LevelsByHand) {
  CostModel m;
  m.launch = Time::us(5);
  m.inter_node_latency = Time::us(3);
  HostGroup g = two_by_two();
  g.hosts = 3;
  g.gpus_per_host = 1;
  EXPECT_EQ(hierarchical_steps(Algorithm::kTree, g).inter, 4);
  EXPECT_EQ(hierarchical_steps(Algorithm::kRing, g).inter, 4);
  EXPECT_EQ(hierarchical_all_reduce_cost(m, g, Bytes{1'000}).time, Time::ns(33'133));
}

// Properties over random groups, sizes, links and costs:
// - never faster than the intra-node-only lower bound: the flat ring all-reduce of the same S
//   among one host's g GPUs on their own link (a cross-host all-reduce does at least that
//   host's work: at least 2(g-1) steps, at least 2(g-1)/g S through links no faster than the
//   intra link);
// - never faster than the same group with the network as good as the intra link and no
//   inter-node latency (the inter-node part only adds);
// - never faster for a smaller S, nor with more hosts of the same size.
TEST(Hierarchical, NeverFasterThanTheIntraNodeLowerBound) {
  std::mt19937_64 rng(15);
  std::uniform_int_distribution<int> hosts(2, 16), gpus(1, 8), proto_mask(0, 7);
  std::uniform_real_distribution<double> log_bw(8.5, 11.7), log_size(2, 9.5), us(0, 30),
      eff(0.2, 1.0);
  for (int trial = 0; trial < 400; ++trial) {
    CostModel m;
    m.launch = Time::from_seconds(us(rng) * 1e-6);
    m.inter_node_latency = Time::from_seconds(us(rng) * 1e-6);
    const int mask = proto_mask(rng);
    for (Protocol p : kProtocols)
      if (mask & (1 << static_cast<int>(p)))
        m.of(p) = {true, Time::from_seconds(us(rng) * 1e-6), eff(rng)};
    HostGroup g;
    g.hosts = hosts(rng);
    g.gpus_per_host = gpus(rng);
    g.intra = Bandwidth{std::pow(10.0, log_bw(rng))};
    g.intra_latency = Time::from_seconds(us(rng) * 1e-7);
    g.inter = Bandwidth{std::pow(10.0, log_bw(rng))};
    g.inter_latency = Time::from_seconds(us(rng) * 1e-7);
    const Bytes s{static_cast<std::int64_t>(std::pow(10.0, log_size(rng)))};
    const HierarchicalCost h = hierarchical_all_reduce_cost(m, g, s);

    const Time one_host = g.gpus_per_host > 1
                              ? collective_cost(m, Operation::kAllReduce, Algorithm::kRing,
                                                g.gpus_per_host, 2, s, g.intra, g.intra_latency)
                                    .time
                              : Time::zero();
    EXPECT_GE(h.time, one_host) << trial;

    HostGroup free_network = g;
    free_network.inter = g.gpus_per_host > 1 ? g.intra : g.inter;
    free_network.inter = Bandwidth{std::max(free_network.inter.bytes_per_s, g.inter.bytes_per_s)};
    free_network.inter_latency = std::min(g.inter_latency, g.intra_latency);
    CostModel no_inter = m;
    no_inter.inter_node_latency = Time::zero();
    EXPECT_GE(h.time, hierarchical_all_reduce_cost(no_inter, free_network, s).time) << trial;

    EXPECT_GE(h.time, hierarchical_all_reduce_cost(m, g, Bytes{s.count / 2}).time) << trial;
    HostGroup fewer = g;
    fewer.hosts = g.hosts - 1;
    if (fewer.hosts * fewer.gpus_per_host > 1) {
      EXPECT_GE(h.time, hierarchical_all_reduce_cost(m, fewer, s).time) << trial;
    }
  }
}
