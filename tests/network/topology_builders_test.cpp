#include "sim_core/network/topology_builders.hpp"

#include <gtest/gtest.h>

#include "sim_core/base/error.hpp"
#include "sim_core/network/host_access_links.hpp"

using namespace mlsim;

namespace {
const LinkSpec kBuilderLink{Bandwidth{1e9}, Time::ns(100)};

int count_switches(const Topology& t) {
  int n = 0;
  for (const auto& node : t.nodes()) n += node.kind == NodeKind::kSwitch;
  return n;
}
}  // namespace

TEST(TopologyBuilders, StarHasOneSwitchAndHostsFirst) {
  const Topology t = build_topology(StarSpec{5, kBuilderLink});
  EXPECT_EQ(t.hosts().size(), 5u);
  EXPECT_EQ(count_switches(t), 1);
  EXPECT_EQ(t.links().size(), 10u);  // 5 duplex cables
  for (NodeId h = 0; h < 5; ++h) EXPECT_EQ(t.hosts()[h], h);
  EXPECT_EQ(t.node(5).name, "sw0");
  EXPECT_EQ(t.link(0).src, 0u);
  EXPECT_EQ(t.link(1).dst, 0u);
}

TEST(TopologyBuilders, RingLinksNeighbours) {
  const Topology t = build_topology(RingSpec{4, kBuilderLink});
  EXPECT_EQ(count_switches(t), 0);
  ASSERT_EQ(t.links().size(), 8u);
  EXPECT_EQ(t.link(6).src, 3u);  // the last cable closes the ring
  EXPECT_EQ(t.link(6).dst, 0u);
  // Two hosts: one cable, not two parallel ones.
  EXPECT_EQ(build_topology(RingSpec{2, kBuilderLink}).links().size(), 2u);
}

TEST(TopologyBuilders, LeafSpineUplinkFollowsOversubscription) {
  LeafSpineSpec s;
  s.leaves = 4;
  s.hosts_per_leaf = 8;
  s.spines = 2;
  s.oversubscription = 4;
  s.host_link = kBuilderLink;
  s.uplink_latency = Time::ns(200);
  const Topology t = build_topology(s);
  EXPECT_EQ(t.hosts().size(), 32u);
  EXPECT_EQ(count_switches(t), 6);
  EXPECT_EQ(t.links().size(), 2u * (32 + 4 * 2));
  // 8 hosts * 1 GB/s / (2 spines * 4) = 1 GB/s per uplink.
  const Link& up = t.links().back();
  EXPECT_DOUBLE_EQ(up.bandwidth.bytes_per_s, 1e9);
  EXPECT_EQ(up.latency, Time::ns(200));
  s.oversubscription = 1;
  EXPECT_DOUBLE_EQ(build_topology(s).links().back().bandwidth.bytes_per_s, 4e9);
}

TEST(TopologyBuilders, FatTreeCounts) {
  for (int k : {2, 4, 8, 16}) {
    const Topology t = build_topology(FatTreeSpec{k, kBuilderLink});
    EXPECT_EQ(t.hosts().size(), static_cast<std::size_t>(k * k * k / 4)) << k;
    EXPECT_EQ(count_switches(t), k * k + k * k / 4) << k;  // k pods of k, (k/2)^2 cores
    // Cables: hosts, edge-agg (k pods * (k/2)^2), agg-core (same).
    EXPECT_EQ(t.links().size(), static_cast<std::size_t>(2 * (k * k * k / 4 + 2 * k * k * k / 4)))
        << k;
  }
  // Every switch has k ports.
  const Topology t = build_topology(FatTreeSpec{4, kBuilderLink});
  for (NodeId n = 0; n < t.nodes().size(); ++n)
    EXPECT_EQ(t.out_links(n).size(), t.node(n).kind == NodeKind::kSwitch ? 4u : 1u) << n;
}

TEST(TopologyBuilders, ExplicitListsByName) {
  ExplicitSpec s;
  s.nodes = {{"a", NodeKind::kHost}, {"s", NodeKind::kSwitch}, {"b", NodeKind::kHost}};
  s.links = {{"a", "s", kBuilderLink}, {"s", "b", kBuilderLink}};
  const Topology t = build_topology(s);
  EXPECT_EQ(t.hosts().size(), 2u);
  EXPECT_EQ(t.links().size(), 4u);
  EXPECT_EQ(t.link(2).src, *t.find("s"));
}

TEST(TopologyBuilders, ImpossibleSpecsNameThePath) {
  auto message = [](const TopologySpec& s) {
    try {
      build_topology(s);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(StarSpec{0, kBuilderLink}), "topology.hosts: must be at least 1, got 0");
  EXPECT_EQ(message(RingSpec{1, kBuilderLink}), "topology.hosts: must be at least 2, got 1");
  EXPECT_EQ(message(FatTreeSpec{5, kBuilderLink}), "topology.k: must be even, got 5");
  EXPECT_EQ(message(StarSpec{2, LinkSpec{Bandwidth{0}, Time::zero()}}),
            "topology.link.bandwidth: must be a positive bandwidth");
  LeafSpineSpec ls;
  ls.leaves = 2;
  ls.hosts_per_leaf = 2;
  ls.host_link = kBuilderLink;
  EXPECT_EQ(message(ls), "topology.spines: must be at least 1, got 0");
  ExplicitSpec e;
  e.nodes = {{"a", NodeKind::kHost}};
  e.links = {{"a", "zz", kBuilderLink}};
  EXPECT_EQ(message(e), "topology.links[0].b: unknown node \"zz\"");
  e.nodes.push_back({"a", NodeKind::kSwitch});
  EXPECT_EQ(message(e), "topology.nodes[1].name: duplicate node name \"a\"");
}

TEST(HostAccessLinks, AStarHostsCableBothWays) {
  // Star of 3: cable h -> sw0 is link 2h, sw0 -> h link 2h + 1 (duplex links are consecutive).
  const Topology t = build_topology(StarSpec{3, kBuilderLink});
  const AccessLinks a = host_access_links(t, 2, "stage 2");
  EXPECT_EQ(a.up, 4u);
  EXPECT_EQ(a.down, 5u);
  EXPECT_EQ(t.link(a.up).src, 2u);
  EXPECT_EQ(t.link(a.down).dst, 2u);
}

TEST(HostAccessLinks, ARingHostHasTwoAndTheErrorNamesTheRole) {
  const Topology t = build_topology(RingSpec{4, kBuilderLink});
  try {
    host_access_links(t, 1, "pipeline stage 1");
    FAIL() << "a ring host has two links";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("pipeline stage 1 runs on host"), std::string::npos) << what;
    EXPECT_NE(what.find("exactly one link"), std::string::npos) << what;
  }
}
