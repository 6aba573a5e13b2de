// RAT (Resilient Allreduce Tree): completion times computed by hand, region detection, trees
// that avoid failed and slowed links, and data-flow properties. Host links are 1 GB/s (1 byte
// per ns) with 100 ns latency, so expected times are whole nanoseconds.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "sim_core/collectives/collective.hpp"
#include "sim_core/collectives/rat_plan.hpp"
#include "sim_core/collectives/sender.hpp"
#include "sim_core/engine/random.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "sim_core/run/events.hpp"

using namespace mlsim;
using namespace mlsim::collectives;

namespace {
const LinkSpec kRatLink{Bandwidth{1e9}, Time::ns(100)};

CollectiveSpec rat_spec(std::int64_t bytes, int chunks, int window = 1) {
  CollectiveSpec s;
  s.algorithm = Algorithm::kRat;
  s.bytes = Bytes{bytes};
  s.chunks = chunks;
  s.window = window;
  return s;
}

NodeId node(const Topology& t, const std::string& name) {
  return *t.find(name);
}

// A change of both directions of the cable a-b, as the `events` section's {"link": [a, b]}.
PlatformEvent slow(const Topology& t, const std::string& a, const std::string& b,
                   double bytes_per_s, Time at = Time::zero()) {
  PlatformEvent e;
  e.at = at;
  e.change = EventChange::kBandwidth;
  e.links = links_between(t, node(t, a), node(t, b));
  e.bandwidth = Bandwidth{bytes_per_s};
  return e;
}

PlatformEvent fail(const Topology& t, const std::string& a, const std::string& b,
                   Time at = Time::zero()) {
  PlatformEvent e = slow(t, a, b, 1, at);
  e.change = EventChange::kLinkUp;
  e.up = false;
  return e;
}

// The platform's link state with the changes played through the runner's EventScheduler.
struct Platform {
  Platform(Engine& engine, const Topology& topo, Network& net, std::vector<PlatformEvent> changes)
      : links(topo, net), speeds(topo.nodes().size()), health(topo.nodes().size()) {
    events.events = std::move(changes);
    scheduler.emplace(engine, PlatformState{links, speeds, health}, events, RandomStream(1));
    scheduler->start();
  }
  LinkConditions links;
  HostSpeeds speeds;
  NodeHealth health;
  PlatformEvents events;
  std::optional<EventScheduler> scheduler;
};

void apply_now(LinkConditions& links, const PlatformEvent& e) {
  HostSpeeds speeds(links.topology().nodes().size());
  NodeHealth health(links.topology().nodes().size());
  apply_platform_event(e, PlatformState{links, speeds, health});
}

CollectiveResult run_rat(const Topology& topo, Sharing sharing, const CollectiveSpec& spec,
                         const std::vector<PlatformEvent>& changes = {}) {
  Engine engine;
  FluidNetwork net(engine, topo, sharing);
  Platform platform(engine, topo, net, changes);
  return run_collective(engine, net, topo.hosts(), spec, &platform.links);
}
}  // namespace

TEST(Rat, HandComputedTimeOnAnOversubscribedLeafSpine) {
  // 2 leaves x 2 hosts, one spine, 4:1: each leaf-spine link carries 2 x 1 GB/s / 4 = 0.5 GB/s.
  // Regions {0, 1} under leaf0 and {2, 3} under leaf1. A message of p bytes takes
  // u = p/B + 2a inside a rack and v = 2p/B + 4a across (four hops, 0.5 GB/s bottleneck).
  const Topology topo = build_topology(LeafSpineSpec{2, 2, 1, 4.0, kRatLink, Time::ns(100)});
  constexpr std::int64_t S = 1'000'000;
  for (Sharing sharing : {Sharing::kNone, Sharing::kMaxMin}) {
    // One piece (p = S): aggregators 0 and 2, root region 0. 1->0 and 3->2 gather (u); 2->0
    // reduces up (v); 0 sends down to 2 (v), then, window 1, scatters to 1 (u) while 2 scatters
    // to 3 (u). 2u + 2v = 6 S/B + 12a.
    auto r = run_rat(topo, sharing, rat_spec(S, 1));
    ASSERT_TRUE(r.completed);
    EXPECT_EQ(r.finished, Time::ns(6 * S + 1'200));
    // Two pieces (p = S/2, so v = 2u). Roots rotate (region 0, then 1); aggregators advance
    // once per round of 2 pieces, so both pieces gather at hosts 0 and 2. Window 1 throughout.
    // Analytic (no sharing):
    //   0..2u   1->0 and 3->2 send piece 0 (arrives u), then piece 1 (arrives 2u);
    //   u..3u   piece 0 reduces up 2->0;  2u..4u  piece 1 reduces up 0->2 (region 1 is its root);
    //   4u..6u  host 0, free again, sends piece 0 down 0->2 while host 2 sends piece 1 down 2->0;
    //   6u..7u  host 0 scatters piece 0 to 1, host 2 scatters piece 1 to 3;
    //   7u..8u  then the other piece each (0->1 piece 1, 2->3 piece 0).
    //   8u = 4 S/B + 16a.
    // Flow (max-min): from u, the gather 1->0 of piece 1 and the reduction 2->0 of piece 0 share
    // host 0's downlink at B/2 each (the reduction is held to B/2 by the uplink anyway), so the
    // gather ends at u + 2p/B + 2a = 3u - 2a instead of 2u; everything that follows on host 0's
    // side shifts by p/B: 8u + p/B = 4.5 S/B + 16a.
    r = run_rat(topo, sharing, rat_spec(S, 2));
    ASSERT_TRUE(r.completed);
    EXPECT_EQ(r.finished, Time::ns((sharing == Sharing::kNone ? 4 * S : 9 * S / 2) + 1'600));
    EXPECT_EQ(r.transfers, 2u * 3 * 2);         // 2(n-1) messages per piece
    EXPECT_EQ(r.bytes_sent, Bytes{2 * 3 * S});  // 2(n-1) S
    EXPECT_EQ(r.verified_pieces, 4u * 2);       // every host holds both reduced pieces
  }
}

TEST(Rat, RegionsAreTheHostsUnderOneSwitch) {
  const Topology ls = build_topology(LeafSpineSpec{3, 4, 2, 4.0, kRatLink, Time::ns(100)});
  auto regions = find_regions(ls, ls.hosts());
  ASSERT_EQ(regions.size(), 3u);
  for (std::uint32_t r = 0; r < 3; ++r) {
    EXPECT_EQ(ls.node(regions[r].gateway).kind, NodeKind::kSwitch);
    EXPECT_EQ(regions[r].members,
              (std::vector<std::uint32_t>{4 * r, 4 * r + 1, 4 * r + 2, 4 * r + 3}));
    EXPECT_DOUBLE_EQ(oversubscription(ls, regions[r]), 4.0);
  }
  // The gateways differ, whatever their names.
  EXPECT_NE(regions[0].gateway, regions[1].gateway);

  // A subset of the hosts: the regions they fall in.
  const std::vector<NodeId> six(ls.hosts().begin(), ls.hosts().begin() + 6);
  regions = find_regions(ls, six);
  ASSERT_EQ(regions.size(), 2u);
  EXPECT_EQ(regions[1].members, (std::vector<std::uint32_t>{4, 5}));

  // One switch: one region, with no uplink; a ring has no switch: every host alone.
  const Topology star = build_topology(StarSpec{5, kRatLink});
  ASSERT_EQ(find_regions(star, star.hosts()).size(), 1u);
  EXPECT_EQ(oversubscription(star, find_regions(star, star.hosts())[0]), 0.0);
  const Topology ring = build_topology(RingSpec{4, kRatLink});
  EXPECT_EQ(find_regions(ring, ring.hosts()).size(), 4u);
  // A k=4 fat-tree: 8 edge switches with 2 hosts each, not oversubscribed.
  const Topology fat = build_topology(FatTreeSpec{4, kRatLink});
  regions = find_regions(fat, fat.hosts());
  ASSERT_EQ(regions.size(), 8u);
  for (const Region& g : regions) {
    EXPECT_EQ(g.members.size(), 2u);
    EXPECT_DOUBLE_EQ(oversubscription(fat, g), 1.0);
  }
}

TEST(Rat, RootAndAggregatorsRotate) {
  const Topology topo = build_topology(LeafSpineSpec{3, 2, 1, 1.0, kRatLink, Time::ns(100)});
  Engine engine;
  FluidNetwork net(engine, topo, Sharing::kMaxMin);
  LinkConditions links(topo, net);
  RatPlanner planner(links, topo.hosts(), 0);
  // Over r x m = 6 pieces, every host is the root's aggregator exactly once.
  std::vector<int> root_aggregator(6, 0);
  for (std::uint32_t c = 0; c < 6; ++c) {
    const auto a = planner.aggregators(c);
    const std::uint32_t k = (c / 3) % 2;  // aggregators advance once per round of 3 roots
    EXPECT_EQ(a, (std::vector<std::uint32_t>{k, 2 + k, 4 + k}));
    const RegionTree t = planner.tree(c, a);
    EXPECT_EQ(t.root, c % 3);
    ++root_aggregator[a[t.root]];
    // A healthy fabric: every route is as wide, so the tree is a star around the root.
    for (std::uint32_t r = 0; r < 3; ++r) EXPECT_EQ(t.parent[r], t.root);
  }
  EXPECT_EQ(root_aggregator, std::vector<int>(6, 1));
}

TEST(Rat, TreeLeavesOutASlowedLink) {
  // Three racks whose switches form a triangle; the t0-t1 cable is slowed to 1%. t2's links are
  // the only ones at full capacity, so region 2 is always the root and the tree is the star
  // t0 - t2 - t1, which does not use the slow cable (the route t0 -> t1 would).
  ExplicitSpec spec;
  for (const char* h : {"a0", "a1", "b0", "b1", "c0", "c1"})
    spec.nodes.push_back({h, NodeKind::kHost});
  for (const char* s : {"t0", "t1", "t2"}) spec.nodes.push_back({s, NodeKind::kSwitch});
  for (const auto& [h, s] : std::vector<std::pair<const char*, const char*>>{
           {"a0", "t0"}, {"a1", "t0"}, {"b0", "t1"}, {"b1", "t1"}, {"c0", "t2"}, {"c1", "t2"}})
    spec.links.push_back({h, s, kRatLink});
  spec.links.push_back({"t0", "t1", kRatLink});
  spec.links.push_back({"t1", "t2", kRatLink});
  spec.links.push_back({"t0", "t2", kRatLink});
  const Topology topo = build_topology(spec);

  Engine engine;
  FluidNetwork net(engine, topo, Sharing::kMaxMin);
  LinkConditions links(topo, net);
  apply_now(links, slow(topo, "t0", "t1", 1e7));
  RatPlanner planner(links, topo.hosts(), 0);
  ASSERT_EQ(planner.regions().size(), 3u);
  for (std::uint32_t c = 0; c < 4; ++c) {
    const RegionTree t = planner.tree(c, planner.aggregators(c));
    EXPECT_EQ(t.root, 2u);
    EXPECT_EQ(t.parent, (std::vector<std::uint32_t>{2, 2, 2}));
  }
  // The run completes, every host with both pieces; the record still has the slow cable.
  const auto r = run_collective(engine, net, topo.hosts(), rat_spec(1'000'000, 2), &links);
  ASSERT_TRUE(r.completed);
  EXPECT_EQ(r.verified_pieces, 6u * 2);
  EXPECT_EQ(links.bandwidth(links_between(topo, node(topo, "t0"), node(topo, "t1"))[0]),
            Bandwidth{1e7});
}

TEST(Rat, WidestTreeKeepsEveryRegionsWidestEdge) {
  // Property of a widest (maximum bottleneck) spanning tree: every region keeps one of its
  // widest edges. 4 racks x 2 hosts, two spines, with one leaf-spine cable slowed to 1%: which
  // aggregator pairs' routes cross it depends on the ECMP hash, and the tree must route around
  // it whenever some pair of aggregators can.
  const Topology topo = build_topology(LeafSpineSpec{4, 2, 2, 1.0, kRatLink, Time::ns(100)});
  Engine engine;
  FluidNetwork net(engine, topo, Sharing::kMaxMin);
  LinkConditions links(topo, net);
  apply_now(links, slow(topo, "leaf0", "spine0", 1e7));
  int crossing_pairs = 0;  // pairs whose routes cross the slow cable: the test is not vacuous
  for (std::uint64_t label : {0ull, 1ull, 2ull, 3ull}) {
    RatPlanner planner(links, topo.hosts(), label);
    for (std::uint32_t c = 0; c < 8; ++c) {
      const auto a = planner.aggregators(c);
      const RegionTree t = planner.tree(c, a);
      EXPECT_NE(t.root, 0u) << "region 0 lost half its uplink capacity";
      auto width = [&](std::uint32_t x, std::uint32_t y) {
        return std::min(planner.route_bandwidth(a[x], a[y]), planner.route_bandwidth(a[y], a[x]));
      };
      for (std::uint32_t v = 0; v < 4; ++v) {
        double best_any = 0, best_tree = 0;
        for (std::uint32_t u = 0; u < 4; ++u) {
          if (u == v) continue;
          best_any = std::max(best_any, width(u, v));
          if (width(u, v) < 1e9) ++crossing_pairs;
          const bool edge = t.parent[v] == u || (t.parent[u] == v && u != t.root);
          if (edge) best_tree = std::max(best_tree, width(u, v));
        }
        EXPECT_DOUBLE_EQ(best_tree, best_any) << "label " << label << " chunk " << c;
      }
    }
  }
  EXPECT_GT(crossing_pairs, 0);
}

TEST(Rat, TreeAvoidsAFailedUplink) {
  // 4 racks x 2 hosts, two spines; leaf0-spine0 is down before the start. Region 0 keeps half its
  // uplink capacity, so it is never the root, and no message route of any tree uses the cable.
  const Topology topo = build_topology(LeafSpineSpec{4, 2, 2, 1.0, kRatLink, Time::ns(100)});
  Engine engine;
  FluidNetwork net(engine, topo, Sharing::kMaxMin);
  LinkConditions links(topo, net);
  apply_now(links, fail(topo, "leaf0", "spine0"));
  const std::vector<LinkId> cable = links_between(topo, node(topo, "leaf0"), node(topo, "spine0"));
  Router router(topo);
  for (LinkId l : cable) router.set_link_up(l, false);
  RatPlanner planner(links, topo.hosts(), 0);
  for (std::uint32_t c = 0; c < 8; ++c) {
    const auto a = planner.aggregators(c);
    const RegionTree t = planner.tree(c, a);
    EXPECT_NE(t.root, 0u);
    for (std::uint32_t v = 0; v < 4; ++v) {
      if (v == t.root) continue;
      for (auto [from, to] : {std::pair{a[v], a[t.parent[v]]}, std::pair{a[t.parent[v]], a[v]}}) {
        const auto path =
            router.route(topo.hosts()[from], topo.hosts()[to], transfer_label(0, from, to));
        ASSERT_TRUE(path.has_value());
        for (LinkId l : path->links)
          EXPECT_TRUE(std::find(cable.begin(), cable.end(), l) == cable.end());
        EXPECT_GT(planner.route_bandwidth(from, to), 0);
      }
    }
  }
  const auto r = run_collective(engine, net, topo.hosts(), rat_spec(800'000, 8), &links);
  ASSERT_TRUE(r.completed);
  EXPECT_EQ(r.verified_pieces, 8u * 8);
  for (LinkId l : cable) EXPECT_EQ(net.link_stats(l).bytes_carried, Bytes{0});
}

TEST(Rat, FailuresDuringTheRunDoNotHang) {
  const Topology topo = build_topology(LeafSpineSpec{3, 2, 2, 2.0, kRatLink, Time::ns(100)});
  const auto spec = rat_spec(3'000'000, 4);
  const auto base = run_rat(topo, Sharing::kMaxMin, spec);
  ASSERT_TRUE(base.completed);
  // A leaf-spine cable fails mid-run: transfers reroute over the other spine, later pieces plan
  // without it; the run completes, later.
  auto r = run_rat(topo, Sharing::kMaxMin, spec, {fail(topo, "leaf1", "spine0", Time::us(200))});
  ASSERT_TRUE(r.completed);
  EXPECT_EQ(r.verified_pieces, 6u * 4);
  EXPECT_GE(r.finished, base.finished);
  // A host's only cable fails: nothing reaches it, the run ends incomplete instead of hanging.
  Engine engine;
  FluidNetwork net(engine, topo, Sharing::kMaxMin);
  Platform platform(engine, topo, net, {fail(topo, "h3", "leaf1", Time::us(200))});
  const auto cut = run_collective(engine, net, topo.hosts(), spec, &platform.links);
  EXPECT_FALSE(cut.completed);
  EXPECT_GT(cut.failed_transfers, 0u);
  EXPECT_EQ(net.totals().transfers_in_flight, 0u);
}

TEST(Rat, EveryHostEndsWithEveryPieceOnceAndRunsAreDeterministic) {
  RandomStream rng(7, "rat-properties");
  for (int trial = 0; trial < 40; ++trial) {
    const int leaves = 1 + static_cast<int>(rng.below(4));
    const int per_leaf = 1 + static_cast<int>(rng.below(4));
    const int spines = leaves > 1 ? 1 + static_cast<int>(rng.below(2)) : 0;
    const double over = 1.0 + static_cast<double>(rng.below(4));
    const Topology topo =
        build_topology(LeafSpineSpec{leaves, per_leaf, spines, over, kRatLink, Time::ns(100)});
    const int n = leaves * per_leaf;
    const auto chunks = static_cast<int>(1 + rng.below(5));
    const auto window = static_cast<int>(rng.below(3));
    const auto bytes = static_cast<std::int64_t>(1 + rng.below(100'000));
    const Sharing sharing = rng.below(2) ? Sharing::kMaxMin : Sharing::kNone;
    const auto spec = rat_spec(bytes, chunks, window);
    const std::string what = "trial " + std::to_string(trial);

    Engine engine;
    FluidNetwork net(engine, topo, sharing);
    LinkConditions links(topo, net);
    const auto r = run_collective(engine, net, topo.hosts(), spec, &links);
    if (n == 1) {
      EXPECT_EQ(r.transfers, 0u) << what;
      continue;
    }
    ASSERT_TRUE(r.completed) << what;
    EXPECT_EQ(r.verified_pieces, static_cast<std::uint64_t>(n) * chunks) << what;
    EXPECT_EQ(r.transfers, 2u * (n - 1) * chunks) << what;
    EXPECT_EQ(r.bytes_sent.count, 2 * (n - 1) * bytes) << what;
    EXPECT_EQ(net.totals().bytes_delivered, r.bytes_sent) << what;
    EXPECT_EQ(net.totals().transfers_in_flight, 0u) << what;

    const auto again = run_rat(topo, sharing, spec);
    EXPECT_EQ(again.finished, r.finished) << what;
    EXPECT_EQ(again.bytes_sent, r.bytes_sent) << what;
  }
}
