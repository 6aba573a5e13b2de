// InterHostClosedForm (sim_core/collectives/inter_host.hpp), the closed form the execution graph
// and the training core price collectives and messages across hosts with, against times computed
// by hand. A star of 4 hosts, links of 1 GB/s (1 byte per ns) and 100 ns: a route between two
// hosts crosses two links, 200 ns. Costs: 5 us launch, the Simple protocol with 1 us per hop.
#include <gtest/gtest.h>

#include <array>

#include "sim_core/collectives/collective.hpp"
#include "sim_core/collectives/inter_host.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "sim_core/network/topology_builders.hpp"

using namespace mlsim;
using namespace mlsim::collectives;

namespace inter_host_test {

struct Star {
  Star()
      : topo(build_topology(StarSpec{4, LinkSpec{Bandwidth{1e9}, Time::ns(100)}})),
        net(engine, topo, Sharing::kMaxMin),
        links(topo, net) {
    costs.launch = Time::us(5);
    costs.of(Protocol::kSimple) = {true, Time::us(1), 1.0};
  }
  Engine engine;
  Topology topo;
  FluidNetwork net;
  LinkConditions links;
  CostModel costs;
};

}  // namespace inter_host_test

// Ring all-reduce among the 4 hosts, 2 MB per GPU: launch + 2(n-1) steps x (hop + route
// latency) + 2(n-1)/n S / bandwidth = 5 us + 6 x 1.2 us + 1.5 x 2 MB / 1 GB/s = 3,012,200 ns.
// With 2 GPUs sharing each host link the bandwidth term doubles: 6,012,200 ns. A message
// (send/recv, one step, bus factor 1) of 1 MB between two hosts: 5 + 1.2 us + 1 ms =
// 1,006,200 ns. Hosts repeated in the list (two GPUs of each host as participants) make the same
// ring of hosts: 4 participants on hosts 0, 0, 1, 1, sharing 2: 5 + 7.2 us + 1.5 x 1 MB /
// 0.5 GB/s = 3,012,200 ns.
TEST(InterHostClosedForm, PricesByHandAndSplitsTheHostLink) {
  inter_host_test::Star s;
  InterHostClosedForm closed(s.links, s.costs);
  const std::vector<NodeId> hosts = s.topo.hosts();
  ASSERT_EQ(hosts.size(), 4u);
  EXPECT_EQ(closed.time(Operation::kAllReduce, 4, Bytes{2'000'000}, hosts, 1).count_ns(),
            3'012'200);
  EXPECT_EQ(closed.time(Operation::kAllReduce, 4, Bytes{2'000'000}, hosts, 2).count_ns(),
            6'012'200);
  const std::array<NodeId, 2> pair = {hosts[0], hosts[1]};
  EXPECT_EQ(closed.time(Operation::kSendRecv, 2, Bytes{1'000'000}, pair, 1).count_ns(), 1'006'200);
  const std::array<NodeId, 4> repeated = {hosts[0], hosts[0], hosts[1], hosts[1]};
  EXPECT_EQ(closed.time(Operation::kAllReduce, 4, Bytes{1'000'000}, repeated, 2).count_ns(),
            3'012'200);
}

// No traffic: a collective priced while a flow fills the same links takes the same time, and the
// network carries nothing for it.
TEST(InterHostClosedForm, IgnoresTrafficOnTheLinks) {
  inter_host_test::Star s;
  InterHostClosedForm closed(s.links, s.costs);
  const std::vector<NodeId> hosts = s.topo.hosts();
  const std::array<NodeId, 2> pair = {hosts[0], hosts[1]};
  CollectiveSpec busy;
  busy.operation = Operation::kSendRecv;
  busy.algorithm = Algorithm::kDirect;
  busy.bytes = Bytes{100'000'000};
  Collective flow(s.engine, s.net, {hosts[0], hosts[1]}, busy, [](const CollectiveResult&) {});
  flow.start();
  s.engine.run_until(Time::us(10));
  EXPECT_EQ(closed.time(Operation::kSendRecv, 2, Bytes{1'000'000}, pair, 1).count_ns(), 1'006'200);
}
