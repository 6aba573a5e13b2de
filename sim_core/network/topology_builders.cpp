#include "sim_core/network/topology_builders.hpp"

#include <string>
#include <type_traits>

#include "sim_core/base/error.hpp"

namespace mlsim {
namespace {

// Hosts are added first in every generated topology, so host i has NodeId i: collectives and
// tests can address hosts by index without a lookup.
void add_hosts(Topology& t, int n) {
  for (int i = 0; i < n; ++i) t.add_node("h" + std::to_string(i), NodeKind::kHost);
}

void check_link(const LinkSpec& l, const std::string& path) {
  if (!(l.bandwidth.bytes_per_s > 0))
    throw InputError(path + ".bandwidth", "must be a positive bandwidth");
  if (l.latency < Time::zero()) throw InputError(path + ".latency", "must not be negative");
}

void check_count(int v, int min, const std::string& path) {
  if (v < min)
    throw InputError(path,
                     "must be at least " + std::to_string(min) + ", got " + std::to_string(v));
}

Topology build(const StarSpec& s) {
  check_count(s.hosts, 1, "topology.hosts");
  check_link(s.link, "topology.link");
  Topology t;
  add_hosts(t, s.hosts);
  const NodeId sw = t.add_node("sw0", NodeKind::kSwitch);
  for (int i = 0; i < s.hosts; ++i)
    t.add_duplex_link(static_cast<NodeId>(i), sw, s.link.bandwidth, s.link.latency);
  return t;
}

Topology build(const RingSpec& s) {
  check_count(s.hosts, 2, "topology.hosts");
  check_link(s.link, "topology.link");
  Topology t;
  add_hosts(t, s.hosts);
  // Two hosts form a "ring" of one cable: a second parallel cable would double the bandwidth
  // between them and make the ring formula wrong.
  const int cables = s.hosts == 2 ? 1 : s.hosts;
  for (int i = 0; i < cables; ++i)
    t.add_duplex_link(static_cast<NodeId>(i), static_cast<NodeId>((i + 1) % s.hosts),
                      s.link.bandwidth, s.link.latency);
  return t;
}

Topology build(const LeafSpineSpec& s) {
  check_count(s.leaves, 1, "topology.leaves");
  check_count(s.hosts_per_leaf, 1, "topology.hosts_per_leaf");
  check_count(s.spines, s.leaves > 1 ? 1 : 0, "topology.spines");
  if (!(s.oversubscription > 0)) throw InputError("topology.oversubscription", "must be positive");
  check_link(s.host_link, "topology.host_link");
  if (s.uplink_latency < Time::zero())
    throw InputError("topology.uplink_latency", "must not be negative");

  Topology t;
  add_hosts(t, s.leaves * s.hosts_per_leaf);
  std::vector<NodeId> leaves, spines;
  for (int i = 0; i < s.leaves; ++i)
    leaves.push_back(t.add_node("leaf" + std::to_string(i), NodeKind::kSwitch));
  for (int i = 0; i < s.spines; ++i)
    spines.push_back(t.add_node("spine" + std::to_string(i), NodeKind::kSwitch));
  for (int h = 0; h < s.leaves * s.hosts_per_leaf; ++h)
    t.add_duplex_link(static_cast<NodeId>(h), leaves[h / s.hosts_per_leaf], s.host_link.bandwidth,
                      s.host_link.latency);
  if (s.spines > 0) {
    const Bandwidth uplink{s.hosts_per_leaf * s.host_link.bandwidth.bytes_per_s /
                           (s.spines * s.oversubscription)};
    for (NodeId leaf : leaves)
      for (NodeId spine : spines) t.add_duplex_link(leaf, spine, uplink, s.uplink_latency);
  }
  return t;
}

Topology build(const FatTreeSpec& s) {
  check_count(s.k, 2, "topology.k");
  if (s.k % 2 != 0) throw InputError("topology.k", "must be even, got " + std::to_string(s.k));
  if (s.k > 64) throw InputError("topology.k", "at most 64 (65536 hosts) is supported");
  check_link(s.link, "topology.link");
  const int half = s.k / 2;
  Topology t;
  add_hosts(t, s.k * half * half);
  std::vector<NodeId> core;
  for (int i = 0; i < half * half; ++i)
    core.push_back(t.add_node("core" + std::to_string(i), NodeKind::kSwitch));
  const auto [bw, lat] = s.link;
  for (int pod = 0; pod < s.k; ++pod) {
    std::vector<NodeId> edge, agg;
    const std::string p = std::to_string(pod);
    for (int i = 0; i < half; ++i) {
      edge.push_back(t.add_node("edge" + p + "_" + std::to_string(i), NodeKind::kSwitch));
      agg.push_back(t.add_node("agg" + p + "_" + std::to_string(i), NodeKind::kSwitch));
    }
    for (int e = 0; e < half; ++e) {
      for (int h = 0; h < half; ++h)
        t.add_duplex_link(static_cast<NodeId>((pod * half + e) * half + h), edge[e], bw, lat);
      for (int a = 0; a < half; ++a) t.add_duplex_link(edge[e], agg[a], bw, lat);
    }
    // Aggregation switch a of every pod connects to core switches a*half .. a*half+half-1.
    for (int a = 0; a < half; ++a)
      for (int c = 0; c < half; ++c) t.add_duplex_link(agg[a], core[a * half + c], bw, lat);
  }
  return t;
}

Topology build(const ExplicitSpec& s) {
  if (s.nodes.empty()) throw InputError("topology.nodes", "must list at least one node");
  Topology t;
  for (std::size_t i = 0; i < s.nodes.size(); ++i) {
    const auto& n = s.nodes[i];
    const std::string path = "topology.nodes[" + std::to_string(i) + "]";
    if (n.name.empty()) throw InputError(path + ".name", "must not be empty");
    if (t.find(n.name)) throw InputError(path + ".name", "duplicate node name \"" + n.name + "\"");
    t.add_node(n.name, n.kind);
  }
  for (std::size_t i = 0; i < s.links.size(); ++i) {
    const auto& l = s.links[i];
    const std::string path = "topology.links[" + std::to_string(i) + "]";
    const auto a = t.find(l.a);
    if (!a) throw InputError(path + ".a", "unknown node \"" + l.a + "\"");
    const auto b = t.find(l.b);
    if (!b) throw InputError(path + ".b", "unknown node \"" + l.b + "\"");
    if (*a == *b) throw InputError(path, "a link must join two different nodes");
    check_link(l.link, path);
    t.add_duplex_link(*a, *b, l.link.bandwidth, l.link.latency);
  }
  return t;
}

}  // namespace

Topology build_topology(const TopologySpec& spec) {
  return std::visit([](const auto& s) { return build(s); }, spec);
}

}  // namespace mlsim
