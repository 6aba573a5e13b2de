// Collective algorithms against completion times computed by hand. Links are 1 GB/s (1 byte per
// ns) with 100 ns latency, so every expected time is a whole number of nanoseconds.
#include <gtest/gtest.h>

#include <vector>

#include "sim_core/collectives/collective.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology_builders.hpp"

using namespace mlsim;
using namespace mlsim::collectives;

namespace {
const LinkSpec kLink{Bandwidth{1e9}, Time::ns(100)};

CollectiveResult run(const Topology& topo, Sharing sharing, const CollectiveSpec& spec) {
  Engine engine;
  FluidNetwork net(engine, topo, sharing);
  return run_collective(engine, net, topo.hosts(), spec);
}

CollectiveSpec make(Algorithm a, std::int64_t bytes, int chunks = 1) {
  CollectiveSpec s;
  s.algorithm = a;
  s.bytes = Bytes{bytes};
  s.chunks = chunks;
  return s;
}
}  // namespace

TEST(Ring, ChunksAddLatencyOnly) {
  // n = 4, S = 4 MB, C chunks, window 1: every link is busy from start to end, so the time is
  // 2(n-1) C messages of S/(nC) bytes, each paying the latency:
  // 2(n-1)/n S/B + 2(n-1) C a.
  const Topology topo = build_topology(RingSpec{4, kLink});
  for (int chunks : {1, 4}) {
    for (Sharing sharing : {Sharing::kNone, Sharing::kMaxMin}) {
      const auto r = run(topo, sharing, make(Algorithm::kRing, 4'000'000, chunks));
      ASSERT_TRUE(r.completed);
      EXPECT_EQ(r.finished, Time::ns(6'000'000 + 6 * chunks * 100)) << chunks;
      EXPECT_EQ(r.transfers, 24u * chunks);
      EXPECT_EQ(r.bytes_sent, Bytes{24'000'000});  // 2(n-1)/n S per node, n nodes
      EXPECT_EQ(r.ranks, 4);
    }
  }
}

TEST(Ring, UnevenSegmentsStillSumToTheTensor) {
  const Topology topo = build_topology(RingSpec{3, kLink});
  const auto r = run(topo, Sharing::kMaxMin, make(Algorithm::kRing, 1'000, 2));
  ASSERT_TRUE(r.completed);
  EXPECT_EQ(r.bytes_sent, Bytes{2 * 2 * 1'000});  // 2(n-1) segments per node, n nodes: 2(n-1) S
}

TEST(Tree, BinaryTreeOnAStarAnalytic) {
  // 7 hosts on a star, binary tree 0 <- {1, 2}, 1 <- {3, 4}, 2 <- {5, 6}. Analytic (no
  // sharing): every message of S/C bytes takes u = S/(C B) + 2a. With window 1 the root's
  // broadcast is the bottleneck (two sends per piece): the last leaf has everything at (2C+4) u.
  const Topology topo = build_topology(StarSpec{7, kLink});
  for (int chunks : {1, 2}) {
    const auto r = run(topo, Sharing::kNone, make(Algorithm::kTree, 1'000'000, chunks));
    ASSERT_TRUE(r.completed);
    const std::int64_t u = 1'000'000 / chunks + 200;
    EXPECT_EQ(r.finished, Time::ns((2 * chunks + 4) * u)) << chunks;
    EXPECT_EQ(r.transfers, 2u * 6 * chunks);
  }
}

TEST(Tree, SharedRootPortOnFlow) {
  // 3 hosts, binary tree 0 <- {1, 2}: both leaves push S into the root's port at B/2 (2S/B + 2a),
  // then the root sends to each child in turn (window 1): 2 (S/B + 2a). Total 4S/B + 6a.
  const Topology topo = build_topology(StarSpec{3, kLink});
  const auto r = run(topo, Sharing::kMaxMin, make(Algorithm::kTree, 1'000'000));
  EXPECT_EQ(r.finished, Time::ns(4'000'000 + 600));
}

TEST(Tree, ArityOneIsAChain) {
  // 4 hosts in a chain 0 <- 1 <- 2 <- 3 on a star, analytic, one piece: 3 hops up, 3 down.
  const Topology topo = build_topology(StarSpec{4, kLink});
  auto spec = make(Algorithm::kTree, 1'000);
  spec.arity = 1;
  const auto r = run(topo, Sharing::kNone, spec);
  EXPECT_EQ(r.finished, Time::ns(6 * (1'000 + 200)));
}

TEST(ParameterServer, DedicatedShardingOnFlow) {
  // 4 workers + K dedicated servers on a star, window 0 (all messages at once), flow backend.
  // K = 1: pushes share the server port (4 S / B), pulls share it again: 8 S/B + 4a.
  // K = 2: each server port carries 4 half shards (2 S/B) each way: 4 S/B + 4a.
  for (int servers : {1, 2}) {
    const Topology topo = build_topology(StarSpec{4 + servers, kLink});
    auto spec = make(Algorithm::kParameterServer, 1'000'000);
    spec.servers = servers;
    spec.window = 0;
    const auto r = run(topo, Sharing::kMaxMin, spec);
    ASSERT_TRUE(r.completed);
    EXPECT_EQ(r.finished, Time::ns(8'000'000 / servers + 400)) << servers;
    EXPECT_EQ(r.ranks, 4);
    EXPECT_EQ(r.bytes_sent, Bytes{2 * 4 * 1'000'000});
  }
}

TEST(ParameterServer, ColocatedEveryWorkerServesAShard) {
  // 4 hosts, 4 colocated servers (each owns S/4), window 0, flow: every host sends three
  // quarter-shards and receives three, each port shared three ways: (S/4)/(B/3) per phase.
  const Topology topo = build_topology(StarSpec{4, kLink});
  auto spec = make(Algorithm::kParameterServer, 4'000'000);
  spec.servers = 4;
  spec.placement = Placement::kColocated;
  spec.window = 0;
  const auto r = run(topo, Sharing::kMaxMin, spec);
  ASSERT_TRUE(r.completed);
  EXPECT_EQ(r.finished, Time::ns(2 * 3'000'000 + 400));
  EXPECT_EQ(r.transfers, 2u * 4 * 3);
}

TEST(ParameterServer, SpreadPutsOneServerPerRack) {
  // 2 leaves x 2 hosts, one spine, 4:1 (leaf-spine links 0.5 GB/s each way), 2 servers owning
  // S/2 each, window 0, flow. Cross-rack transfers take four hops (4a).
  // spread: servers 0 and 2, one per leaf. Each direction of each leaf-spine link carries two
  // pushes of S/2 (0.25 GB/s each): 2 S/B + 4a; the pulls likewise: 4 S/B + 8a in all.
  // colocated: servers 0 and 1, both on leaf0: the spine->leaf0 link carries four pushes
  // (0.125 GB/s each): 4 S/B + 4a; leaf0->spine the four pulls: 8 S/B + 8a in all.
  const Topology topo = build_topology(LeafSpineSpec{2, 2, 1, 4.0, kLink, Time::ns(100)});
  auto spec = make(Algorithm::kParameterServer, 1'000'000);
  spec.servers = 2;
  spec.window = 0;
  spec.placement = Placement::kSpread;
  auto r = run(topo, Sharing::kMaxMin, spec);
  ASSERT_TRUE(r.completed);
  EXPECT_EQ(r.finished, Time::ns(4'000'000 + 800));
  EXPECT_EQ(r.ranks, 4);
  spec.placement = Placement::kColocated;
  r = run(topo, Sharing::kMaxMin, spec);
  ASSERT_TRUE(r.completed);
  EXPECT_EQ(r.finished, Time::ns(8'000'000 + 800));
}

TEST(Collective, MetricsFollowFromTime) {
  const Topology topo = build_topology(RingSpec{4, kLink});
  const auto r = run(topo, Sharing::kNone, make(Algorithm::kRing, 4'000'000));
  EXPECT_DOUBLE_EQ(r.algorithm_bandwidth(), 4e6 / r.seconds());
  EXPECT_DOUBLE_EQ(r.bus_bandwidth(), r.algorithm_bandwidth() * 1.5);
}

TEST(Collective, SingleParticipantIsDoneAtOnce) {
  const Topology topo = build_topology(StarSpec{1, kLink});
  for (Algorithm a : {Algorithm::kRing, Algorithm::kTree}) {
    const auto r = run(topo, Sharing::kMaxMin, make(a, 1'000));
    EXPECT_TRUE(r.completed);
    EXPECT_EQ(r.finished, Time::zero());
    EXPECT_EQ(r.transfers, 0u);
  }
}

TEST(Collective, LinkFailureReroutesOrReportsIncomplete) {
  // Ring of 4: failing one direction of a cable mid-run reroutes around the ring; the
  // collective completes, later than without the failure.
  const Topology ring = build_topology(RingSpec{4, kLink});
  const auto spec = make(Algorithm::kRing, 4'000'000);
  const auto base = run(ring, Sharing::kMaxMin, spec);
  {
    Engine engine;
    FluidNetwork net(engine, ring, Sharing::kMaxMin);
    engine.schedule_at(Time::us(500), [&n = net] { n.set_link_up(0, false); });
    const auto r = run_collective(engine, net, ring.hosts(), spec);
    EXPECT_TRUE(r.completed);
    EXPECT_GT(r.finished, base.finished);
  }
  // Star: a host's cable fails, nothing can reach it: the collective stops, reported incomplete,
  // and the engine runs dry instead of hanging.
  const Topology star = build_topology(StarSpec{4, kLink});
  Engine engine;
  FluidNetwork net(engine, star, Sharing::kMaxMin);
  engine.schedule_at(Time::us(500), [&n = net] { n.set_link_up(0, false); });
  const auto r = run_collective(engine, net, star.hosts(), spec);
  EXPECT_FALSE(r.completed);
  EXPECT_GT(r.failed_transfers, 0u);
  EXPECT_EQ(net.totals().transfers_in_flight, 0u);
}

TEST(Collective, FailureCallbackRunsOnceAtTheFirstFailedTransfer) {
  // Star of 4, ring all-reduce of 4 MB: step one sends 1 MB per host, 1 ms at 1 byte per ns, so
  // at 500 us every first message is still in flight. Host 0's cable (link 0) fails then: the
  // message on it fails at that instant, the callback runs once with the collective unfinished,
  // on_done never runs, and later failures (none can be delivered any more) report nothing.
  const Topology star = build_topology(StarSpec{4, kLink});
  Engine engine;
  FluidNetwork net(engine, star, Sharing::kMaxMin);
  int done_calls = 0, failure_calls = 0;
  Time failed_at;
  CollectiveResult at_failure;
  Collective c(engine, net, star.hosts(), make(Algorithm::kRing, 4'000'000),
               [&](const CollectiveResult&) { ++done_calls; });
  c.set_failure_callback([&](const CollectiveResult& r) {
    ++failure_calls;
    failed_at = engine.now();
    at_failure = r;
  });
  engine.schedule_at(Time::us(500), [&n = net] { n.set_link_up(0, false); });
  c.start();
  engine.run();
  EXPECT_EQ(failure_calls, 1);
  EXPECT_EQ(failed_at, Time::us(500));
  EXPECT_FALSE(at_failure.completed);
  EXPECT_GE(at_failure.failed_transfers, 1u);
  EXPECT_EQ(done_calls, 0);
  EXPECT_FALSE(c.done());
  EXPECT_EQ(net.totals().transfers_in_flight, 0u);
}
