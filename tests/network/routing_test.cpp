#include "sim_core/network/routing.hpp"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "sim_core/engine/engine.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "sim_core/network/topology_builders.hpp"

using namespace mlsim;

namespace {
const LinkSpec kRoutingLink{Bandwidth{1e9}, Time::ns(100)};

std::vector<LinkId> path(Router& r, NodeId a, NodeId b, std::uint64_t label = 0) {
  auto p = r.route(a, b, label);
  if (!p) return {};
  EXPECT_EQ(p->latency, r.latency(p->links));
  return {p->links.begin(), p->links.end()};
}

// Follows a path and checks it is connected from a to b.
void expect_connected(const Topology& t, const std::vector<LinkId>& p, NodeId a, NodeId b) {
  NodeId at = a;
  for (LinkId l : p) {
    EXPECT_EQ(t.link(l).src, at);
    at = t.link(l).dst;
  }
  EXPECT_EQ(at, b);
}
}  // namespace

TEST(Routing, RingTakesTheShorterWay) {
  const Topology t = build_topology(RingSpec{8, kRoutingLink});
  Router r(t);
  // Clockwise links 0->1 is link 0; 1->0 is link 1.
  EXPECT_EQ(path(r, 0, 1), (std::vector<LinkId>{0}));
  EXPECT_EQ(path(r, 1, 0), (std::vector<LinkId>{1}));
  EXPECT_EQ(path(r, 0, 3).size(), 3u);
  EXPECT_EQ(path(r, 0, 6).size(), 2u);  // counter-clockwise: 0->7->6
  expect_connected(t, path(r, 0, 6), 0, 6);
  EXPECT_TRUE(r.route(3, 3, 0)->links.empty());
  EXPECT_EQ(r.latency(path(r, 0, 3)), Time::ns(300));
}

TEST(Routing, FatTreeHopCounts) {
  const Topology t = build_topology(FatTreeSpec{4, kRoutingLink});
  Router r(t);
  EXPECT_EQ(path(r, 0, 1).size(), 2u);   // same edge switch
  EXPECT_EQ(path(r, 0, 2).size(), 4u);   // same pod
  EXPECT_EQ(path(r, 0, 15).size(), 6u);  // another pod
  for (NodeId d = 1; d < 16; ++d) expect_connected(t, path(r, 0, d, d * 7), 0, d);
}

TEST(Routing, EcmpIsDeterministicAndSpreadsLabels) {
  const Topology t = build_topology(FatTreeSpec{4, kRoutingLink});
  Router r(t);
  Router other(t);
  std::set<std::vector<LinkId>> distinct;
  for (std::uint64_t label = 0; label < 64; ++label) {
    const auto p = path(r, 0, 15, label);
    EXPECT_EQ(p, path(r, 0, 15, label));      // same label, same path
    EXPECT_EQ(p, path(other, 0, 15, label));  // whatever was asked before
    distinct.insert(p);
  }
  // Between pods there are (k/2)^2 = 4 shortest paths; 64 labels use all of them.
  EXPECT_EQ(distinct.size(), 4u);
}

TEST(Routing, LinkFailureReroutesAndUnreachableIsReported) {
  const Topology t = build_topology(RingSpec{4, kRoutingLink});
  Router r(t);
  EXPECT_EQ(path(r, 0, 1).size(), 1u);
  const auto v = r.version();
  r.set_link_up(0, false);  // 0->1
  EXPECT_NE(r.version(), v);
  const auto detour = path(r, 0, 1);
  EXPECT_EQ(detour.size(), 3u);
  expect_connected(t, detour, 0, 1);
  r.set_link_up(7, false);  // 0->3: host 0 has no way out left
  EXPECT_FALSE(r.route(0, 1, 0).has_value());
  EXPECT_FALSE(r.route(0, 2, 0).has_value());
  EXPECT_TRUE(r.route(1, 0, 0).has_value());  // 1->0 still up
  r.set_link_up(0, true);
  EXPECT_EQ(path(r, 0, 1), (std::vector<LinkId>{0}));
}

TEST(Routing, LazyPerDestinationOnLargeRing) {
  const Topology t = build_topology(RingSpec{4096, kRoutingLink});
  Router r(t);
  // Neighbour routes need no search at all.
  for (int round = 0; round < 3; ++round)
    for (NodeId i = 0; i < 4096; ++i) ASSERT_EQ(path(r, i, (i + 1) % 4096).size(), 1u);
  EXPECT_EQ(r.searches(), 0u);
  // Farther ones: one search per destination, then the single-path cache answers.
  for (int round = 0; round < 3; ++round)
    for (NodeId i = 0; i < 4096; ++i) ASSERT_EQ(path(r, i, (i + 2) % 4096).size(), 2u);
  EXPECT_EQ(r.searches(), 4096u);
  EXPECT_EQ(path(r, 0, 2048).size(), 2048u);
}

TEST(Routing, DistanceCacheEvictsUnderItsLimit) {
  const Topology t = build_topology(FatTreeSpec{4, kRoutingLink});
  Router r(t);
  r.set_distance_cache_limit(2);
  // Multi-path pairs are not cached as paths, so every new destination beyond 2 searches again.
  const auto first = path(r, 0, 15, 1);
  path(r, 0, 14, 1);
  path(r, 0, 13, 1);
  const auto searches = r.searches();
  EXPECT_EQ(path(r, 0, 15, 1), first);  // evicted, searched again, same answer
  EXPECT_EQ(r.searches(), searches + 1);
}

// LinkConditions::router(): one Router per run (built on first use) that follows the links'
// state and latency as they change, before it exists and after. On the ring of 8, 0 -> 2 is two
// hops clockwise over links 0 (0->1) and 2 (1->2), six counter-clockwise without them.
TEST(Routing, LinkConditionsKeepOneRouterThatFollowsTheLinks) {
  const Topology t = build_topology(RingSpec{8, kRoutingLink});
  Engine engine;
  FluidNetwork net(engine, t, Sharing::kMaxMin);
  LinkConditions links(t, net);
  links.set_link_up(0, false);  // before the router exists
  Router& r = links.router();
  EXPECT_EQ(&r, &links.router());
  EXPECT_EQ(path(r, 0, 2).size(), 6u);
  links.set_link_up(0, true);
  EXPECT_EQ(path(r, 0, 2).size(), 2u);
  links.set_node_up(1, false);  // takes 0->1 and 1->2 down with it
  EXPECT_EQ(path(r, 0, 2).size(), 6u);
  links.set_node_up(1, true);
  EXPECT_EQ(path(r, 0, 2).size(), 2u);
  links.set_latency(0, Time::us(5));
  EXPECT_EQ(r.route(0, 1, 0)->latency, Time::us(5));
}
