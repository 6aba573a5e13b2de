// The operations besides all-reduce, against times computed by hand. Links are 1 GB/s (1 byte per
// ns) with 100 ns latency; on a star a message crosses two links (host -> switch -> host).
#include <gtest/gtest.h>

#include <string>

#include "sim_core/base/error.hpp"
#include "sim_core/collectives/collective.hpp"
#include "sim_core/collectives/rat_plan.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "sim_core/network/topology_builders.hpp"

using namespace mlsim;
using namespace mlsim::collectives;

namespace {
const LinkSpec kOpsLink{Bandwidth{1e9}, Time::ns(100)};

CollectiveSpec ops_make(Operation op, Algorithm a, std::int64_t bytes, int chunks = 1) {
  CollectiveSpec s;
  s.operation = op;
  s.algorithm = a;
  s.bytes = Bytes{bytes};
  s.chunks = chunks;
  return s;
}

CollectiveResult ops_run(const Topology& topo, Sharing sharing, const CollectiveSpec& spec) {
  Engine engine;
  FluidNetwork net(engine, topo, sharing);
  return run_collective(engine, net, topo.hosts(), spec);
}
}  // namespace

TEST(Operations, ReduceScatterAndAllGatherAreHalfARing) {
  // n = 4 on a ring of links, S = 4 MB: n-1 = 3 steps of S/n = 1 MB, each 1 ms + 100 ns.
  const Topology topo = build_topology(RingSpec{4, kOpsLink});
  for (Operation op : {Operation::kReduceScatter, Operation::kAllGather}) {
    for (Sharing sharing : {Sharing::kNone, Sharing::kMaxMin}) {
      const auto r = ops_run(topo, sharing, ops_make(op, Algorithm::kRing, 4'000'000));
      ASSERT_TRUE(r.completed);
      EXPECT_EQ(r.finished, Time::ns(3 * 1'000'100)) << to_string(op);
      EXPECT_EQ(r.transfers, 12u);                 // n(n-1)
      EXPECT_EQ(r.bytes_sent, Bytes{12'000'000});  // (n-1) S
      // busbw = S / t x (n-1)/n
      EXPECT_DOUBLE_EQ(r.bus_bandwidth(), 4e6 / 3.0003e-3 * 0.75);
    }
  }
}

TEST(Operations, ChainBroadcastPipelinesItsPieces) {
  // Chain 0 -> 1 -> 2 -> 3 (arity 1) on a star, S = 4 MB in C = 4 pieces: each message takes
  // u = 1 MB / B + 2 x 100 ns = 1,000,200 ns; the last host gets the last piece after
  // C + (n - 1) - 1 = 6 message times.
  const Topology topo = build_topology(StarSpec{4, kOpsLink});
  CollectiveSpec spec = ops_make(Operation::kBroadcast, Algorithm::kTree, 4'000'000, 4);
  spec.arity = 1;
  for (Sharing sharing : {Sharing::kNone, Sharing::kMaxMin}) {
    const auto r = ops_run(topo, sharing, spec);
    ASSERT_TRUE(r.completed);
    EXPECT_EQ(r.finished, Time::ns(6 * 1'000'200));
    EXPECT_EQ(r.bytes_sent, Bytes{3 * 4'000'000});  // each of n-1 hosts receives S once
    EXPECT_DOUBLE_EQ(r.bus_bandwidth(), r.algorithm_bandwidth());
  }
}

TEST(Operations, SendRecvIsOneMessage) {
  // 1 MB over two links: 1 ms + 200 ns.
  const Topology topo = build_topology(StarSpec{2, kOpsLink});
  const auto r = ops_run(topo, Sharing::kMaxMin,
                         ops_make(Operation::kSendRecv, Algorithm::kDirect, 1'000'000));
  ASSERT_TRUE(r.completed);
  EXPECT_EQ(r.finished, Time::ns(1'000'200));
  EXPECT_EQ(r.transfers, 1u);
}

TEST(Operations, AllToAllStaggersItsReceivers) {
  // n = 4 on a star, S = 4 MB: each host sends 1 MB to each of the 3 others, one at a time
  // (window 1); host i sends to i+1, then i+2, then i+3, so each receiver gets one message at a
  // time: 3 x (1 ms + 200 ns), even with sharing.
  const Topology topo = build_topology(StarSpec{4, kOpsLink});
  const auto r = ops_run(topo, Sharing::kMaxMin,
                         ops_make(Operation::kAllToAll, Algorithm::kDirect, 4'000'000));
  ASSERT_TRUE(r.completed);
  EXPECT_EQ(r.finished, Time::ns(3 * 1'000'200));
  EXPECT_EQ(r.bytes_sent, Bytes{12'000'000});
}

TEST(Operations, RejectsWrongAlgorithmOrParticipants) {
  auto error = [](const CollectiveSpec& spec, std::size_t n) -> std::string {
    try {
      validate(spec, n, "system");
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(error(ops_make(Operation::kSendRecv, Algorithm::kDirect, 1), 3).find("exactly two"),
            std::string::npos);
  EXPECT_NE(
      error(ops_make(Operation::kReduceScatter, Algorithm::kTree, 1), 4).find("system.algorithm"),
      std::string::npos);
  EXPECT_EQ(error(ops_make(Operation::kAllGather, Algorithm::kRing, 1), 4), "no error");
}

TEST(Operations, NvlsReducesInTheSwitch) {
  // n = 4 on a star, S = 4 MB in C = 4 pieces, window 1: GPU i sends piece c to the switch once
  // piece c-1 arrived, so piece c is at the switch from all four at (c+1) x (1 ms + 100 ns); the
  // switch then sends it to each GPU on its own link, 1 ms + 100 ns. The last piece is back at
  // 4 x 1,000,100 + 1,000,100 = 5,000,500 ns: each link carries S once each way, against
  // 2(n-1)/n S for a ring (6 ms here). With window 0 the four pieces share each link: up at
  // 4,000,100, down at 8,000,200.
  const Topology topo = build_topology(StarSpec{4, kOpsLink});
  CollectiveSpec spec = ops_make(Operation::kAllReduce, Algorithm::kNvls, 4'000'000, 4);
  Engine engine;
  FluidNetwork net(engine, topo, Sharing::kMaxMin);
  LinkConditions links(topo, net);
  auto r = run_collective(engine, net, topo.hosts(), spec, &links);
  ASSERT_TRUE(r.completed);
  EXPECT_EQ(r.finished, Time::ns(5'000'500));
  EXPECT_EQ(r.ranks, 4);
  EXPECT_EQ(r.bytes_sent, Bytes{8 * 4'000'000});  // S up and S down per GPU
  spec.window = 0;
  Engine engine2;
  FluidNetwork net2(engine2, topo, Sharing::kMaxMin);
  r = run_collective(engine2, net2, topo.hosts(), spec, &links);
  EXPECT_EQ(r.finished, Time::ns(8'000'200));
  // A ring of hosts has no switch to reduce in.
  const Topology ring = build_topology(RingSpec{4, kOpsLink});
  EXPECT_FALSE(shared_switch(ring, ring.hosts()).has_value());
  EXPECT_EQ(shared_switch(topo, topo.hosts()), topo.find("sw0"));
}
