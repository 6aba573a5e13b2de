// A replicated stage's all-reduce through the training core's ring strategy
// (models/pipeline/stage_allreduce.hpp), by hand. Three replicas on a star of 1 GB/s links with
// 100 ns latency, 3 MB of parameters: a ring of 2 (n - 1) = 4 steps of 1 MB, each crossing two
// links, 1,000,000 + 200 ns: 4,000,800 ns per round.
#include "models/pipeline/stage_allreduce.hpp"

#include <gtest/gtest.h>

#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology_builders.hpp"

using namespace mlsim;
using namespace mlsim::pipeline;

namespace {

std::vector<Time> releases(const collectives::CostModel& costs) {
  const Topology topo = build_topology(StarSpec{3, LinkSpec{Bandwidth{1e9}, Time::ns(100)}});
  Engine engine;
  FluidNetwork net(engine, topo, Sharing::kMaxMin);
  LinkConditions links(topo, net);
  std::vector<Time> at;
  std::unique_ptr<StageAllReduce> ar;
  ar = std::make_unique<StageAllReduce>(engine, net, topo.hosts(), 3'000'000, costs,
                                        collectives::HostCosts{}, &links, [&] {
                                          at.push_back(engine.now());
                                          // The next round starts when every replica is in.
                                          if (at.size() == 1)
                                            for (std::size_t q : {2, 0, 1}) ar->contribute(q);
                                        });
  ar->contribute(0);
  ar->contribute(1);
  EXPECT_TRUE(at.empty());  // replica 2 is not in yet: nothing moves
  engine.run();
  EXPECT_TRUE(at.empty());
  ar->contribute(2);
  engine.run();
  EXPECT_EQ(ar->rounds(), 2u);
  EXPECT_EQ(ar->failed_transfers(), 0u);
  return at;
}

}  // namespace

TEST(StageAllReduce, RingRoundsByHand) {
  EXPECT_EQ(releases({}), (std::vector<Time>{Time::ns(4'000'800), Time::ns(8'001'600)}));
  // With a 5 us launch per collective, each round starts 5 us later.
  collectives::CostModel launch;
  launch.launch = Time::us(5);
  EXPECT_EQ(releases(launch), (std::vector<Time>{Time::ns(4'005'800), Time::ns(8'011'600)}));
}
