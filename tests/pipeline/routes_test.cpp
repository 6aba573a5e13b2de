// The network beyond each host's own link as AutoPipe's timing model and planners see it
// (route_conditions.hpp, Conditions::Routes, transfer_bandwidths): the routes of a two-server
// leaf-spine by hand, the shares of its uplinks under two configurations, a job whose plan moves
// its cut away from the uplink (every planner, by hand), and on random leaf-spine jobs the
// bottleneck bound staying below the timing model, the DP exact for it and the branch and bound
// equal to the exhaustive search.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <vector>

#include "models/pipeline/autopipe_planner.hpp"
#include "models/pipeline/bottleneck.hpp"
#include "models/pipeline/dp_planner.hpp"
#include "models/pipeline/one_f_one_b.hpp"
#include "models/pipeline/rl_planner.hpp"
#include "models/pipeline/route_conditions.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "tests/pipeline/configurations.hpp"

using namespace mlsim;
using namespace mlsim::pipeline;

namespace {

// A platform of one topology, for host_routes.
struct RoutedPlatform {
  Topology topology;
  Engine engine;
  FluidNetwork network;
  LinkConditions links;
  explicit RoutedPlatform(Topology t)
      : topology(std::move(t)),
        network(engine, topology, Sharing::kMaxMin),
        links(topology, network) {}
};

// Two servers (leaves) of two GPUs (hosts) under one spine: host links `host_bw`, each leaf's
// one uplink 2 host_bw / oversubscription.
Topology routes_two_servers(double host_bw, double oversubscription, Time host_latency,
                            Time uplink_latency) {
  return build_topology(LeafSpineSpec{2, 2, 1, oversubscription,
                                      LinkSpec{Bandwidth{host_bw}, host_latency}, uplink_latency});
}

// `hosts` hosts with the profile's times, each with its own link of `bw` and no latency.
Conditions routes_conditions(const std::vector<LayerCost>& l, std::size_t hosts, double bw) {
  Conditions c;
  for (std::size_t h = 0; h < hosts; ++h) c.hosts.push_back(profiled_host(l, 1));
  c.bandwidth.assign(hosts, bw);
  c.latency_out.assign(hosts, 0);
  c.latency_in.assign(hosts, 0);
  return c;
}

}  // namespace

// Hosts 0, 1 on leaf A, 2, 3 on leaf B; host links 8e9 B/s and 1 us, uplinks 2 x 8e9 / 16 = 1e9
// B/s and 5 us. Within a server the route is the two hosts' links (8e9 B/s, 2 us, nothing
// shared); across, host -> leaf -> spine -> leaf -> host: 1e9 B/s, 1 + 5 + 5 + 1 = 12 us, over
// two shared links (the source leaf's uplink, the spine's link down to the other leaf). On a
// star nothing is shared: no routes (each host's own link, as before).
TEST(PipelineRoutes, TwoServersRoutesAndUplinkSharesByHand) {
  RoutedPlatform p(routes_two_servers(8e9, 16, Time::us(1), Time::us(5)));
  const std::vector<NodeId> hosts = p.topology.hosts();
  ASSERT_EQ(hosts.size(), 4u);
  const HostRoutes r = host_routes(p.links, hosts);
  ASSERT_EQ(r.routes.hosts, 4u);
  const auto at = [](std::size_t a, std::size_t b) { return a * 4 + b; };
  EXPECT_DOUBLE_EQ(r.routes.bandwidth[at(0, 1)], 8e9);
  EXPECT_NEAR(r.routes.latency[at(0, 1)], 2e-6, 1e-15);
  EXPECT_TRUE(r.routes.shared[at(0, 1)].empty());
  EXPECT_DOUBLE_EQ(r.routes.bandwidth[at(0, 2)], 1e9);
  EXPECT_NEAR(r.routes.latency[at(0, 2)], 12e-6, 1e-15);
  EXPECT_EQ(r.routes.shared[at(0, 2)].size(), 2u);
  EXPECT_EQ(r.routes.shared[at(1, 3)], r.routes.shared[at(0, 2)]);      // the same two links
  EXPECT_EQ(r.routes.shared_bandwidth, (std::vector<double>(4, 1e9)));  // 2 up, 2 down
  EXPECT_EQ(r.links.size(), 12u);  // 4 hosts x 2 access links, 2 leaves x 2 uplink directions

  const std::vector<LayerCost> l{{1, 1, 1e9, 0}, {1, 1, 0, 0}};
  Conditions c = routes_conditions(l, 4, 8e9);
  c.routes = r.routes;
  EXPECT_DOUBLE_EQ(c.bandwidth_between(0, 2), 1e9);
  EXPECT_NEAR(c.latency_between(0, 2), 12e-6, 1e-15);
  // Stage 0 on both hosts of A, stage 1 on both of B: minibatch m goes from host m mod 2 to host
  // 2 + m mod 2, so hosts 0 and 1 both send across A's uplink (1e9 / 2 each) and hosts 2 and 3
  // send their gradients back across B's (1e9 / 2 each). 0 -> 3 exchanges nothing: its route's.
  std::vector<double> b = transfer_bandwidths({0, 2, 4}, c);
  EXPECT_DOUBLE_EQ(b[at(0, 2)], 0.5e9);
  EXPECT_DOUBLE_EQ(b[at(1, 3)], 0.5e9);
  EXPECT_DOUBLE_EQ(b[at(2, 0)], 0.5e9);
  EXPECT_DOUBLE_EQ(b[at(3, 1)], 0.5e9);
  EXPECT_DOUBLE_EQ(b[at(0, 3)], 1e9);
  EXPECT_DOUBLE_EQ(b[at(0, 1)], 8e9);
  // A straight pipeline: only host 1 sends across A's uplink, only host 2 back across B's.
  b = transfer_bandwidths({0, 1, 2, 3, 4}, c);
  EXPECT_DOUBLE_EQ(b[at(1, 2)], 1e9);
  EXPECT_DOUBLE_EQ(b[at(2, 1)], 1e9);
  EXPECT_DOUBLE_EQ(b[at(0, 1)], 8e9);

  RoutedPlatform star(build_topology(StarSpec{4, LinkSpec{Bandwidth{8e9}, Time::us(1)}}));
  const HostRoutes none = host_routes(star.links, star.topology.hosts());
  EXPECT_EQ(none.routes.hosts, 0u);
  EXPECT_TRUE(none.links.empty());
}

// Three GPUs of the two servers above (hosts 0 and 1 on A, host 2 on B), no latency, a straight
// pipeline of four layers (f + b: 3, 3, 1.5, 4.5 s; activations out 0.8, 0.8, 8 GB, 0; no
// parameters). Bottleneck terms (bottleneck.hpp), max(T, N) per stage, N = (gradient back +
// activation forward) / bandwidth, with each host's own 8e9 B/s link only:
//   1 | 1 | 2:  max(3, 0.1), max(3, 0.2), max(6, 0.1)                    -> 6
//   1 | 2 | 1:  max(3, 0.1), max(4.5, (0.8 + 8) / 8 = 1.1), max(4.5, 1)  -> 4.5
//   2 | 1 | 1:  max(6, 0.1), ...                                         -> 6
// so every planner cuts 1 | 2 | 1, sending the 8 GB activation from host 1 to host 2. Across
// the servers it crosses A's uplink (1e9 B/s, host 1 its only sender) and its gradient B's:
//   1 | 1 | 2:  host 1 0.1 + 0.8 = 0.9 < 3; host 2 0.8 < 6                -> 6
//   1 | 2 | 1:  host 1 0.1 + 8 = 8.1; host 2 8                           -> 8.1
//   2 | 1 | 1:  host 1 0.1 + 8 = 8.1                                     -> 8.1
// With the routes the cut moves to 1 | 1 | 2 (the 0.8 GB activation crosses the uplink).
TEST(PipelineRoutes, AnUplinkMovesThePlannersCutByHand) {
  RoutedPlatform p(routes_two_servers(8e9, 16, Time::zero(), Time::zero()));
  const std::vector<NodeId> all = p.topology.hosts();
  const std::vector<NodeId> hosts(all.begin(), all.begin() + 3);
  const std::vector<LayerCost> l{
      {1, 2, 0.8e9, 0}, {1, 2, 0.8e9, 0}, {0.5, 1, 8e9, 0}, {1.5, 3, 0, 0}};
  const Conditions own = routes_conditions(l, 3, 8e9);
  Conditions routed = own;
  routed.routes = host_routes(p.links, hosts).routes;
  ASSERT_TRUE(routed.routed());
  const Partition a{{0, 1, 2, 4}, {}}, b{{0, 1, 3, 4}, {}}, c{{0, 2, 3, 4}, {}};
  const Bottleneck before(l, own), after(l, routed);
  EXPECT_NEAR(before.of(a), 6, 1e-12);
  EXPECT_NEAR(before.of(b), 4.5, 1e-12);
  EXPECT_NEAR(before.of(c), 6, 1e-12);
  EXPECT_NEAR(after.of(a), 6, 1e-12);
  EXPECT_NEAR(after.of(b), 8.1, 1e-12);
  EXPECT_NEAR(after.of(c), 8.1, 1e-12);
  for (const Conditions* cond : std::vector<const Conditions*>{&own, &routed}) {
    const bool uplink = cond->routed();
    SCOPED_TRACE(uplink ? "routes" : "own links");
    const Partition& best = uplink ? a : b;
    const PlannerOptions o{true, {}};
    const Plan dp = dp_plan(l, *cond, o);
    EXPECT_EQ(dp.partition, best);
    EXPECT_NEAR(dp.bottleneck_seconds, uplink ? 6 : 4.5, 1e-12);
    EXPECT_EQ(autopipe_plan(l, *cond, o).partition, best);
    EXPECT_EQ(exhaustive_plan(l, *cond, o).partition, best);
    RlPlanner rl({}, RandomStream(3, "routes_test"));
    EXPECT_EQ(rl.plan(l, *cond, o).partition, best);
    // The timing model never runs faster than the bound.
    const Bottleneck bound(l, *cond);
    for (const Partition& q : {a, b, c})
      EXPECT_LE(bound.of(q), steady_state_seconds(l, q, *cond) * (1 + 1e-9));
  }
  // The timing model sees the uplink too: 1 | 2 | 1 is now slower than 1 | 1 | 2.
  EXPECT_LT(steady_state_seconds(l, b, own), steady_state_seconds(l, a, own));
  EXPECT_GT(steady_state_seconds(l, b, routed), steady_state_seconds(l, a, routed));
}

// Random jobs (up to 6 layers) on the hosts of two servers of one or two GPUs under random
// uplinks (oversubscription 0.5 to 20), every host used, 1F1B and GPipe, straight or
// replicated: the bottleneck bound never exceeds the timing model's steady state on any
// configuration, the DP's optimum is the bound's minimum over all of them, and the branch and
// bound returns the exhaustive search's time.
TEST(PipelineRoutes, BoundStaysBelowTheTimingModelAndThePlannersStayExactOnLeafSpines) {
  std::mt19937 rng(21);
  std::uniform_real_distribution<double> u(0.1, 1);
  for (int trial = 0; trial < 40; ++trial) {
    const int per_leaf = 1 + static_cast<int>(rng() % 2);
    RoutedPlatform p(build_topology(LeafSpineSpec{
        2, per_leaf, 1, 0.5 + 19.5 * u(rng), LinkSpec{Bandwidth{1e9}, Time::us(1)}, Time::us(5)}));
    const std::vector<NodeId> all = p.topology.hosts();
    const std::size_t H = per_leaf == 1 ? 2 : 3 + rng() % 2;
    const std::vector<NodeId> hosts(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(H));
    const std::size_t n = H + rng() % (7 - H);
    std::vector<LayerCost> l;
    for (std::size_t i = 0; i < n; ++i)
      l.push_back({u(rng), 2 * u(rng), u(rng) * 4e8, u(rng) * 4e8});
    Conditions c = routes_conditions(l, H, 1e9);
    for (std::size_t h = 0; h < H; ++h) c.hosts[h].speed = 0.3 + u(rng);
    c.routes = host_routes(p.links, hosts).routes;
    ASSERT_TRUE(c.routed()) << trial;
    for (const ScheduleTiming schedule :
         {ScheduleTiming{}, ScheduleTiming{training::PipelineSchedule::Kind::kGPipe, 3}}) {
      const Bottleneck bound(l, c, schedule);
      for (const bool straight : {true, false}) {
        double best = std::numeric_limits<double>::infinity();
        test_support::each_configuration(n, H, straight, [&](const Partition& q) {
          const double b = bound.of(q);
          best = std::min(best, b);
          EXPECT_LE(b, steady_state_seconds(l, q, c, schedule) * (1 + 1e-9)) << trial;
        });
        const PlannerOptions o{straight, schedule};
        const Plan dp = dp_plan(l, c, o);
        EXPECT_NEAR(dp.bottleneck_seconds, best, 1e-12 * best) << trial;
        const Plan exact = autopipe_plan(l, c, o), all_timed = exhaustive_plan(l, c, o);
        if (std::isinf(all_timed.seconds_per_minibatch)) continue;
        EXPECT_NEAR(exact.seconds_per_minibatch, all_timed.seconds_per_minibatch,
                    1e-9 * all_timed.seconds_per_minibatch)
            << trial;
      }
    }
  }
}
