// The collective layer's costs (sim_core/collectives/costs.hpp) against times computed by hand,
// and a property test over random collectives. Links are 1 GB/s (1 byte per ns) with 100 ns
// latency; on a star a message crosses two links.
#include <gtest/gtest.h>

#include <array>
#include <random>

#include "sim_core/base/error.hpp"
#include "sim_core/collectives/collective.hpp"
#include "sim_core/collectives/intra_host.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "sim_core/network/topology_builders.hpp"

using namespace mlsim;
using namespace mlsim::collectives;

namespace {
const LinkSpec kCostsLink{Bandwidth{1e9}, Time::ns(100)};

CollectiveResult costs_run(const Topology& topo, Sharing sharing, const CollectiveSpec& spec,
                           std::vector<NodeId> participants = {}) {
  Engine engine;
  FluidNetwork net(engine, topo, sharing);
  LinkConditions links(topo, net);
  if (participants.empty()) participants = topo.hosts();
  return run_collective(engine, net, participants, spec, &links);
}

CollectiveSpec ring(std::int64_t bytes) {
  CollectiveSpec s;
  s.bytes = Bytes{bytes};
  return s;
}

// LL, LL128 and Simple with NCCL-like shapes: LL cheap per hop but half the bandwidth.
CostModel three_protocols() {
  CostModel m;
  m.of(Protocol::kLL) = {true, Time::ns(500), 0.5};
  m.of(Protocol::kLL128) = {true, Time::us(1), 0.9375};
  m.of(Protocol::kSimple) = {true, Time::us(5), 1.0};
  return m;
}
}  // namespace

TEST(Costs, RingAllReduceHasALatencyFloor) {
  // n = 4 on a ring of links; launch 5 us, Simple only with 1 us per hop. Each of the 2(n-1) = 6
  // steps moves S/4 and pays the link's 100 ns and the 1 us hop:
  //   S = 4 MB:  5 us + 6 x (1,000,000 + 100 + 1,000) ns = 6,011,600 ns
  //   S = 400 B: 5 us + 6 x (100 + 100 + 1,000) ns       = 12,200 ns: the floor, 5 us + 6 x 1.1 us,
  //   is 98% of it.
  const Topology topo = build_topology(RingSpec{4, kCostsLink});
  for (Sharing sharing : {Sharing::kNone, Sharing::kMaxMin}) {
    CollectiveSpec spec = ring(4'000'000);
    spec.costs.launch = Time::us(5);
    spec.costs.of(Protocol::kSimple) = {true, Time::us(1), 1.0};
    auto r = costs_run(topo, sharing, spec);
    ASSERT_TRUE(r.completed);
    EXPECT_EQ(r.finished, Time::ns(6'011'600));
    EXPECT_EQ(r.protocol, Protocol::kSimple);
    spec.bytes = Bytes{400};
    r = costs_run(topo, sharing, spec);
    EXPECT_EQ(r.finished, Time::ns(12'200));
  }
}

TEST(Costs, ProtocolFollowsTheSizeLikeNccl) {
  // Estimated time per protocol: 6 hops x h + 1.5 S / (efficiency x 1 GB/s) (ring, n = 4):
  //   S = 1 kB:   LL 3 + 3 = 6 us,  LL128 6 + 1.6 = 7.6 us,  Simple 30 + 1.5 us      -> LL
  //   S = 100 kB: LL 3 + 300 us,    LL128 6 + 160 = 166 us,  Simple 30 + 150 = 180   -> LL128
  //   S = 10 MB:  LL 30,003 us,     LL128 16,006 us,         Simple 15,030 us        -> Simple
  const Topology topo = build_topology(RingSpec{4, kCostsLink});
  CollectiveSpec spec = ring(1'000);
  spec.costs = three_protocols();
  auto r = costs_run(topo, Sharing::kMaxMin, spec);
  EXPECT_EQ(r.protocol, Protocol::kLL);
  // LL on the wire: each 250 B piece is 500 B (4 data bytes per 8): 6 x (500 + 100 + 500) ns.
  EXPECT_EQ(r.finished, Time::ns(6 * 1'100));
  EXPECT_EQ(r.bytes_sent, Bytes{6'000});  // 2(n-1) S
  EXPECT_EQ(r.wire_bytes, Bytes{12'000});
  spec.bytes = Bytes{100'000};
  EXPECT_EQ(costs_run(topo, Sharing::kMaxMin, spec).protocol, Protocol::kLL128);
  spec.bytes = Bytes{10'000'000};
  EXPECT_EQ(costs_run(topo, Sharing::kMaxMin, spec).protocol, Protocol::kSimple);
  // The choice is the closed form's argmin.
  EXPECT_EQ(choose_protocol(spec.costs, Operation::kAllReduce, Algorithm::kRing, 4, 2,
                            Bytes{100'000}, Bandwidth{1e9}),
            Protocol::kLL128);
  // Over a 100x faster link the same 100 kB is latency-bound: LL.
  EXPECT_EQ(choose_protocol(spec.costs, Operation::kAllReduce, Algorithm::kRing, 4, 2,
                            Bytes{100'000}, Bandwidth{1e11}),
            Protocol::kLL);
}

TEST(Costs, ProtocolIsChosenFromTheLinksWhenTheCollectiveStarts) {
  // Built on a ring of 4 at 100 GB/s, where 100 kB is latency-bound (LL, above); the links drop
  // to 1 GB/s before it starts (a model builds its collective at prepare time, then the events
  // at "0s" apply): it runs LL128, the choice for 1 GB/s. Each of the 6 steps moves 25,000 B as
  // ceil(25,000 / 0.9375) = 26,667 wire bytes at 1 byte/ns, plus the link's 100 ns and LL128's
  // 1 us hop: 6 x 27,767 = 166,602 ns. (Chosen at build time it would be LL: 6 x (50,000 + 100 +
  // 500) = 303,600 ns.)
  const Topology topo = build_topology(RingSpec{4, LinkSpec{Bandwidth{1e11}, Time::ns(100)}});
  Engine engine;
  FluidNetwork net(engine, topo, Sharing::kMaxMin);
  LinkConditions links(topo, net);
  CollectiveSpec spec = ring(100'000);
  spec.costs = three_protocols();
  Collective c(engine, net, topo.hosts(), spec, nullptr, &links);
  std::vector<LinkId> all(topo.links().size());
  for (LinkId l = 0; l < all.size(); ++l) all[l] = l;
  links.set_bandwidth(all, Bandwidth{1e9});
  c.start();
  engine.run();
  const CollectiveResult r = c.result();
  ASSERT_TRUE(r.completed);
  EXPECT_EQ(r.protocol, Protocol::kLL128);
  EXPECT_EQ(r.finished, Time::ns(166'602));
}

TEST(Costs, ClosedFormOfARingAllReduceByHand) {
  // collective_cost, n = 4, launch 5 us, LL/LL128/Simple as in three_protocols(), 1 GB/s and a
  // 200 ns route (two 100 ns links through a switch):
  //   S = 1 kB:  LL (see ProtocolFollowsTheSizeLikeNccl): 5 us + 6 x (0.5 + 0.2) us
  //              + 1.5 x 1,000 / (0.5 x 1 GB/s) = 5,000 + 4,200 + 3,000 = 12,200 ns.
  //   S = 10 MB: Simple: 5 us + 6 x (5 + 0.2) us + 15,000,000 ns = 15,036,200 ns.
  CostModel m = three_protocols();
  m.launch = Time::us(5);
  auto c = collective_cost(m, Operation::kAllReduce, Algorithm::kRing, 4, 2, Bytes{1'000},
                           Bandwidth{1e9}, Time::ns(200));
  EXPECT_EQ(c.protocol, Protocol::kLL);
  EXPECT_EQ(c.time, Time::ns(12'200));
  c = collective_cost(m, Operation::kAllReduce, Algorithm::kRing, 4, 2, Bytes{10'000'000},
                      Bandwidth{1e9}, Time::ns(200));
  EXPECT_EQ(c.protocol, Protocol::kSimple);
  EXPECT_EQ(c.time, Time::ns(15'036'200));
  // Without protocols: no hop latency, efficiency 1: 5 us + 6 x 0.2 us + 15 ms.
  c = collective_cost(CostModel{Time::us(5), {}, Time::zero()}, Operation::kAllReduce,
                      Algorithm::kRing, 4, 2, Bytes{10'000'000}, Bandwidth{1e9}, Time::ns(200));
  EXPECT_EQ(c.protocol, std::nullopt);
  EXPECT_EQ(c.time, Time::ns(15'006'200));
}

TEST(Costs, ClosedFormIsWhatTheEventDrivenRingTakesOnAStar) {
  // One formula: the closed form equals the simulated ring (chunks 1, channels 1, window 1) on
  // an NVSwitch-like star, where every message crosses two links (route latency 2 x 100 ns),
  // for 2, 4 and 8 participants, sizes from the latency-bound to the bandwidth-bound, with and
  // without protocols, on both backends. The simulated ring cuts S into n segments of whole
  // bytes, so the two may differ by the rounding of S/n (under a ns per byte here, per step).
  for (int n : {2, 4, 8}) {
    const Topology topo = build_topology(StarSpec{n, kCostsLink});
    for (std::int64_t bytes : {800LL, 96'000LL, 8'000'000LL}) {
      for (bool protocols : {false, true}) {
        CollectiveSpec spec = ring(bytes);
        spec.costs.launch = Time::us(5);
        if (protocols) {
          spec.costs = three_protocols();
          spec.costs.launch = Time::us(5);
        }
        const auto c = collective_cost(spec.costs, Operation::kAllReduce, Algorithm::kRing, n, 2,
                                       Bytes{bytes}, kCostsLink.bandwidth, kCostsLink.latency * 2);
        for (Sharing sharing : {Sharing::kNone, Sharing::kMaxMin}) {
          const auto r = costs_run(topo, sharing, spec);
          ASSERT_TRUE(r.completed);
          EXPECT_EQ(r.protocol, c.protocol) << n << " GPUs, " << bytes << " B";
          EXPECT_NEAR(static_cast<double>(r.finished.count_ns()),
                      static_cast<double>(c.time.count_ns()), 2.0 * 2 * (n - 1))
              << n << " GPUs, " << bytes << " B, protocols " << protocols;
        }
      }
    }
  }
}

TEST(Costs, ClosedFormAgreesWithTheRingForRandomCalls) {
  // Property: for random participant counts (2-8), sizes (1 B to 10 MB), launch, per-protocol
  // latencies and efficiencies, and link speeds, the closed form equals the simulated ring on a
  // star (flow backend) within the rounding of S/n to whole bytes (at most one byte, i.e.
  // 1 / efficiency / bandwidth, per step), and never decreases when S grows.
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 80; ++trial) {
    const int n = 2 + static_cast<int>(rng() % 7);
    const LinkSpec link{Bandwidth{1e9 * static_cast<double>(1 + rng() % 300)},
                        Time::ns(static_cast<std::int64_t>(rng() % 2'000))};
    const Topology topo = build_topology(StarSpec{n, link});
    CollectiveSpec spec = ring(1 + static_cast<std::int64_t>(rng() % 10'000'000));
    spec.costs.launch = Time::ns(static_cast<std::int64_t>(rng() % 50'000));
    if (rng() % 4 != 0) {
      for (Protocol p : kProtocols) {
        if (rng() % 3 == 0) continue;
        spec.costs.of(p) = {true, Time::ns(static_cast<std::int64_t>(rng() % 20'000)),
                            0.25 + 0.75 * static_cast<double>(rng() % 1'000) / 1'000.0};
      }
    }
    const auto c = collective_cost(spec.costs, Operation::kAllReduce, Algorithm::kRing, n, 2,
                                   spec.bytes, link.bandwidth, link.latency * 2);
    const auto r = costs_run(topo, Sharing::kMaxMin, spec);
    ASSERT_TRUE(r.completed);
    EXPECT_EQ(r.protocol, c.protocol) << "trial " << trial;
    double worst_byte_ns = 1e9 / link.bandwidth.bytes_per_s;
    for (Protocol p : kProtocols)
      if (spec.costs.of(p).enabled) worst_byte_ns /= std::min(1.0, spec.costs.of(p).efficiency);
    EXPECT_NEAR(static_cast<double>(r.finished.count_ns()), static_cast<double>(c.time.count_ns()),
                2 * (n - 1) * (worst_byte_ns + 1) + 1)
        << "trial " << trial << ": " << n << " participants, " << spec.bytes.count << " B";
    const auto larger =
        collective_cost(spec.costs, Operation::kAllReduce, Algorithm::kRing, n, 2,
                        Bytes{spec.bytes.count * 2}, link.bandwidth, link.latency * 2);
    EXPECT_GE(larger.time, c.time) << "trial " << trial;
  }
}

TEST(Costs, SendRecvPaysLaunchAndOneHop) {
  // 1 MB over two links: 2 us launch + 1,000,000 + 200 ns + 1 us hop.
  const Topology topo = build_topology(StarSpec{2, kCostsLink});
  CollectiveSpec spec;
  spec.operation = Operation::kSendRecv;
  spec.algorithm = Algorithm::kDirect;
  spec.bytes = Bytes{1'000'000};
  spec.costs.launch = Time::us(2);
  spec.costs.of(Protocol::kSimple) = {true, Time::us(1), 1.0};
  const auto r = costs_run(topo, Sharing::kMaxMin, spec);
  EXPECT_EQ(r.finished, Time::ns(1'003'200));
}

TEST(Costs, ParameterServerSumsAtItsRate) {
  // Workers 0 and 1 push 1 MB each to the dedicated server 2 on a star; the server sums at
  // 0.5 GB/s (2 ms per push, one after the other), then pulls one at a time (window 1).
  //   analytic (no sharing): pushes arrive at 1,000,200; sums end at 3,000,200 and 5,000,200;
  //     pulls end at 6,000,400 and 7,000,600.
  //   flow: the pushes share the server's link: both arrive at 2,000,200; sums end at
  //     4,000,200 and 6,000,200; pulls end at 7,000,400 and 8,000,600.
  // Without the rate each is 4 ms earlier (2 x 1 MB / 0.5 GB/s).
  const Topology topo = build_topology(StarSpec{3, kCostsLink});
  CollectiveSpec spec;
  spec.algorithm = Algorithm::kParameterServer;
  spec.bytes = Bytes{1'000'000};
  spec.host.ps_aggregation = Bandwidth{0.5e9};
  EXPECT_EQ(costs_run(topo, Sharing::kNone, spec).finished, Time::ns(7'000'600));
  EXPECT_EQ(costs_run(topo, Sharing::kMaxMin, spec).finished, Time::ns(8'000'600));
  spec.host.ps_aggregation = Bandwidth{0};
  EXPECT_EQ(costs_run(topo, Sharing::kNone, spec).finished, Time::ns(3'000'600));
  EXPECT_EQ(costs_run(topo, Sharing::kMaxMin, spec).finished, Time::ns(4'000'600));
}

TEST(Costs, MessageOverheadIsPaidPerMessage) {
  // Ring, n = 4, S = 4 MB, 10 us of CPU per message before it leaves: 6 x (10 us + 1 ms + 100 ns).
  const Topology topo = build_topology(RingSpec{4, kCostsLink});
  CollectiveSpec spec = ring(4'000'000);
  spec.host.message_overhead = Time::us(10);
  EXPECT_EQ(costs_run(topo, Sharing::kMaxMin, spec).finished, Time::ns(6 * 1'010'100));
  EXPECT_EQ(costs_run(topo, Sharing::kNone, spec).finished, Time::ns(6 * 1'010'100));
}

TEST(Costs, ChannelsLeaveEachNodeThroughDifferentNics) {
  // Two nodes of two GPUs: each node's GPUs on a switch at 1 TB/s (NVLink-like), each GPU with
  // its own NIC (1 TB/s PCIe link) on a 1 GB/s link to one fabric switch; no latency. Ring of 4
  // (a0 a1 b0 b1), S = 4 MB.
  //   1 channel: every step moves 1 MB across a1 -> b0 and b1 -> a0 at 1 GB/s: 6 x 1 ms = 6 ms
  //     (the NVLink hops add 6 x 2 us at most).
  //   2 channels: channel 1 is a1 a0 b1 b0 and crosses on a0 -> b1 and b0 -> a1, other NICs:
  //     each channel moves 0.5 MB per step on its own NICs: 6 x 0.5 ms = 3 ms.
  Topology t;
  const Bandwidth fast{1e12}, nic{1e9};
  const NodeId fabric = t.add_node("fabric", NodeKind::kSwitch);
  for (const char* node : {"a", "b"}) {
    const NodeId sw = t.add_node(std::string(node) + "/switch", NodeKind::kSwitch);
    for (int g = 0; g < 2; ++g) {
      const std::string name = std::string(node) + std::to_string(g);
      const NodeId gpu = t.add_node(name, NodeKind::kHost);
      t.add_duplex_link(gpu, sw, fast, Time::zero());
      const NodeId n = t.add_node(name + "/nic", NodeKind::kSwitch);
      t.add_duplex_link(gpu, n, fast, Time::zero());
      t.add_duplex_link(n, fabric, nic, Time::zero());
    }
  }
  CollectiveSpec spec = ring(4'000'000);
  const auto one = costs_run(t, Sharing::kMaxMin, spec);
  spec.channels = 2;
  const auto two = costs_run(t, Sharing::kMaxMin, spec);
  ASSERT_TRUE(one.completed && two.completed);
  EXPECT_NEAR(one.seconds(), 6e-3, 12e-6);
  EXPECT_NEAR(two.seconds(), 3e-3, 12e-6);
  EXPECT_EQ(two.bytes_sent, one.bytes_sent);
  EXPECT_EQ(two.transfers, 2 * one.transfers);
}

TEST(Costs, RandomCollectivesDeliverEveryByteSent) {
  // Property: for random operations, algorithms, sizes, chunks, channels and costs, the
  // collective completes, the network delivered exactly the wire bytes handed to it, and the
  // payload is the operation's: ring all-reduce 2(n-1) S, reduce-scatter and all-gather
  // (n-1) S, broadcast (n-1) S, send/recv S, all-to-all (n-1) S (S/n per pair, S divisible).
  std::mt19937_64 rng(7);
  const Topology topo = build_topology(StarSpec{6, kCostsLink});
  for (int trial = 0; trial < 60; ++trial) {
    const int n = 2 + static_cast<int>(rng() % 5);
    CollectiveSpec spec;
    const Operation ops[] = {Operation::kAllReduce, Operation::kReduceScatter,
                             Operation::kAllGather, Operation::kBroadcast,
                             Operation::kSendRecv,  Operation::kAllToAll};
    spec.operation = ops[rng() % 6];
    if (spec.operation == Operation::kSendRecv) {
      spec.algorithm = Algorithm::kDirect;
    } else {
      spec.algorithm = algorithms_for(spec.operation).front();
    }
    const int ranks = spec.operation == Operation::kSendRecv ? 2 : n;
    spec.bytes = Bytes{static_cast<std::int64_t>(ranks * (1 + rng() % 100'000))};
    spec.chunks = 1 + static_cast<int>(rng() % 3);
    spec.channels = spec.algorithm == Algorithm::kRing ? 1 + static_cast<int>(rng() % 3) : 1;
    spec.window = static_cast<int>(rng() % 3);
    if (rng() % 2) {
      spec.costs = three_protocols();
      spec.costs.launch = Time::ns(static_cast<std::int64_t>(rng() % 5'000));
    }
    if (rng() % 2) spec.host.message_overhead = Time::ns(static_cast<std::int64_t>(rng() % 800));
    std::vector<NodeId> participants(topo.hosts().begin(), topo.hosts().begin() + ranks);
    Engine engine;
    FluidNetwork net(engine, topo, Sharing::kMaxMin);
    LinkConditions links(topo, net);
    const auto r = run_collective(engine, net, participants, spec, &links);
    ASSERT_TRUE(r.completed) << trial;
    EXPECT_EQ(net.totals().bytes_delivered, r.wire_bytes) << trial;
    EXPECT_EQ(net.totals().bytes_started, r.wire_bytes) << trial;
    const std::int64_t s = spec.bytes.count;
    std::int64_t payload = (ranks - 1) * s;
    if (spec.operation == Operation::kAllReduce) payload = 2 * (ranks - 1) * s;
    if (spec.operation == Operation::kSendRecv) payload = s;
    EXPECT_EQ(r.bytes_sent, Bytes{payload}) << trial << " " << to_string(spec.operation);
    if (!spec.costs.has_protocols()) {
      EXPECT_EQ(r.wire_bytes, r.bytes_sent) << trial;
    }
  }
}

TEST(Costs, CriticalBytesFollowTheBusiestLink) {
  // S = 1,000 B. Ring all-reduce, n = 4: 2(n-1)/n S = 1,500. Broadcast: S. nvls: up S, down S.
  // 3-ary tree over 4 ranks (one level of 3 children): 3 S up, 3 S down = 6,000. Binary tree over
  // 7 ranks (levels of 2 and 2 children per parent): (2 + 2) S each way = 8,000. Binary over 16
  // ranks: levels of 2, 2, 2 and 1 children: 7 S each way = 14,000.
  const Bytes s{1'000};
  EXPECT_DOUBLE_EQ(critical_bytes(Operation::kAllReduce, Algorithm::kRing, 4, 2, s), 1'500);
  EXPECT_DOUBLE_EQ(critical_bytes(Operation::kBroadcast, Algorithm::kTree, 4, 2, s), 1'000);
  EXPECT_DOUBLE_EQ(critical_bytes(Operation::kAllReduce, Algorithm::kNvls, 8, 2, s), 2'000);
  EXPECT_DOUBLE_EQ(critical_bytes(Operation::kAllReduce, Algorithm::kTree, 4, 3, s), 6'000);
  EXPECT_DOUBLE_EQ(critical_bytes(Operation::kAllReduce, Algorithm::kTree, 7, 2, s), 8'000);
  EXPECT_DOUBLE_EQ(critical_bytes(Operation::kAllReduce, Algorithm::kTree, 16, 2, s), 14'000);
}

TEST(Costs, AlgorithmBySizeTakesTheTreeForSmallAndTheRingForLargeCalls) {
  // 16 ranks on a star (1 GB/s links, 200 ns per route), Simple only with a 5 us hop:
  //   ring: 30 steps x 5.2 us + 1.875 S ns;  binary tree: 8 steps x 5.2 us + 14 S ns
  // (critical_bytes above). S = 1,000 B: ring 157,875 ns, tree 55,600 ns -> tree.
  // S = 1 MB: ring 156 us + 1,875,000 ns, tree 41.6 us + 14,000,000 ns -> ring. The crossing
  // is at 114.4 us / 12.125 ns = 9,435 B.
  CostModel m;
  m.of(Protocol::kSimple) = {true, Time::us(5), 1.0};
  const std::array both = {Algorithm::kRing, Algorithm::kTree};
  auto c = choose_algorithm(m, Operation::kAllReduce, both, 16, 2, Bytes{1'000}, Bandwidth{1e9},
                            Time::ns(200));
  EXPECT_EQ(c.algorithm, Algorithm::kTree);
  EXPECT_EQ(c.cost.time, Time::ns(55'600));
  c = choose_algorithm(m, Operation::kAllReduce, both, 16, 2, Bytes{1'000'000}, Bandwidth{1e9},
                       Time::ns(200));
  EXPECT_EQ(c.algorithm, Algorithm::kRing);
  EXPECT_EQ(c.cost.time, Time::ns(156'000 + 1'875'000));
  EXPECT_EQ(choose_algorithm(m, Operation::kAllReduce, both, 16, 2, Bytes{9'000}, Bandwidth{1e9},
                             Time::ns(200))
                .algorithm,
            Algorithm::kTree);
  EXPECT_EQ(choose_algorithm(m, Operation::kAllReduce, both, 16, 2, Bytes{10'000}, Bandwidth{1e9},
                             Time::ns(200))
                .algorithm,
            Algorithm::kRing);

  // The Collective makes the same choice from the links, and it is the faster one when both are
  // simulated (the closed form is an estimate: the simulated tree sends to its children one
  // after another with window 1, 71.2 us at 1,000 B, still far below the ring's 158 us).
  const Topology topo = build_topology(StarSpec{16, kCostsLink});
  for (std::int64_t bytes : {1'000LL, 1'000'000LL}) {
    CollectiveSpec spec = ring(bytes);
    spec.costs = m;
    spec.algorithm_by_size = true;
    const auto chosen = costs_run(topo, Sharing::kMaxMin, spec);
    ASSERT_TRUE(chosen.completed);
    EXPECT_EQ(chosen.algorithm, bytes == 1'000 ? Algorithm::kTree : Algorithm::kRing);
    spec.algorithm_by_size = false;
    spec.algorithm = chosen.algorithm == Algorithm::kTree ? Algorithm::kRing : Algorithm::kTree;
    const auto other = costs_run(topo, Sharing::kMaxMin, spec);
    ASSERT_TRUE(other.completed);
    EXPECT_LT(chosen.finished, other.finished) << bytes << " B";
  }
  CollectiveSpec broadcast = ring(1'000);
  broadcast.operation = Operation::kBroadcast;
  broadcast.algorithm = Algorithm::kTree;
  broadcast.algorithm_by_size = true;
  EXPECT_THROW(validate(broadcast, 4, "system"), InputError);
}

TEST(Costs, AlgorithmBySizeLooksAtTheLinksWhenItStarts) {
  // 10,000 B among 16 on a star, Simple with a 5 us hop: at 1 GB/s the ring is cheaper
  // (156 + 18.75 us against 41.6 + 140 us), at 10 GB/s the tree (156 + 1.875 against 41.6 + 14).
  // Built at 1 GB/s, the links raised to 10 GB/s before it starts: the tree runs.
  const Topology topo = build_topology(StarSpec{16, kCostsLink});
  Engine engine;
  FluidNetwork net(engine, topo, Sharing::kMaxMin);
  LinkConditions links(topo, net);
  CollectiveSpec spec = ring(10'000);
  spec.costs.of(Protocol::kSimple) = {true, Time::us(5), 1.0};
  spec.algorithm_by_size = true;
  Collective c(engine, net, topo.hosts(), spec, nullptr, &links);
  EXPECT_EQ(c.progress(), 0);
  std::vector<LinkId> all(topo.links().size());
  for (LinkId l = 0; l < all.size(); ++l) all[l] = l;
  links.set_bandwidth(all, Bandwidth{1e10});
  c.start();
  engine.run();
  ASSERT_TRUE(c.done());
  EXPECT_EQ(c.result().algorithm, Algorithm::kTree);
}

// IntraHostPriceCache: the same times as intra_host_collective_time, by hand for one case (an
// all-reduce of 8 GB among 4 GPUs over 100 GB/s, no protocol costs: 2 x 3/4 x 8e9 / 1e11 = 0.12 s
// of bandwidth, and 2 x 3 latency steps of 1 us), and priced once per distinct argument set.
TEST(IntraHostPriceCache, RemembersTheSameTimePerDistinctArguments) {
  CostModel costs;
  HostHardware host;
  host.gpus = 4;
  host.intra_node = IntraNodeLink{IntraNodeFabric::kNvSwitch, Bandwidth{1e11}, Time::us(1), ""};
  HostHardware slower = host;
  slower.intra_node->bandwidth = Bandwidth{5e10};
  IntraHostPriceCache cache(costs);
  const Time direct =
      intra_host_collective_time(costs, Operation::kAllReduce, 4, Bytes{8'000'000'000}, &host);
  EXPECT_NEAR(direct.seconds(), 0.12 + 6e-6, 1e-12);
  EXPECT_EQ(cache.time(Operation::kAllReduce, 4, Bytes{8'000'000'000}, &host), direct);
  EXPECT_EQ(cache.time(Operation::kAllReduce, 4, Bytes{8'000'000'000}, &host), direct);
  EXPECT_EQ(cache.computed(), 1);
  // Another size, GPU count or link is priced anew, and equals the direct price.
  EXPECT_EQ(
      cache.time(Operation::kAllReduce, 4, Bytes{4'000'000'000}, &host),
      intra_host_collective_time(costs, Operation::kAllReduce, 4, Bytes{4'000'000'000}, &host));
  EXPECT_EQ(
      cache.time(Operation::kAllReduce, 2, Bytes{8'000'000'000}, &host),
      intra_host_collective_time(costs, Operation::kAllReduce, 2, Bytes{8'000'000'000}, &host));
  EXPECT_EQ(
      cache.time(Operation::kAllReduce, 4, Bytes{8'000'000'000}, &slower),
      intra_host_collective_time(costs, Operation::kAllReduce, 4, Bytes{8'000'000'000}, &slower));
  EXPECT_EQ(cache.computed(), 4);
  EXPECT_EQ(
      cache.time(Operation::kAllReduce, 4, Bytes{8'000'000'000}, &slower),
      intra_host_collective_time(costs, Operation::kAllReduce, 4, Bytes{8'000'000'000}, &slower));
  EXPECT_EQ(cache.computed(), 4);
}
