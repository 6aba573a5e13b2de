#include "sim_core/network/topology_spec.hpp"

#include <fmt/format.h>

#include <set>

#include "sim_core/base/error.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim {
namespace {

LinkSpec parse_link(JsonReader& r) {
  LinkSpec l;
  l.bandwidth = r.bandwidth("bandwidth");
  l.latency = r.duration("latency");
  return l;
}

LinkSpec parse_link_object(JsonReader& parent, std::string_view key) {
  auto r = parent.object(key);
  auto l = parse_link(r);
  r.finish();
  return l;
}

int count(JsonReader& r, std::string_view key, int min) {
  return static_cast<int>(r.integer(key, min, kMaxHosts));
}

StarSpec parse_star(JsonReader& r) {
  StarSpec s;
  s.hosts = count(r, "hosts", 1);
  s.link = parse_link_object(r, "link");
  return s;
}

RingSpec parse_ring(JsonReader& r) {
  RingSpec s;
  s.hosts = count(r, "hosts", 2);
  s.link = parse_link_object(r, "link");
  return s;
}

LeafSpineSpec parse_leaf_spine(JsonReader& r) {
  LeafSpineSpec s;
  s.leaves = count(r, "leaves", 1);
  s.hosts_per_leaf = count(r, "hosts_per_leaf", 1);
  if (static_cast<std::int64_t>(s.leaves) * s.hosts_per_leaf > kMaxHosts)
    throw InputError(r.path_of("hosts_per_leaf"),
                     fmt::format("leaves * hosts_per_leaf must be at most {}, got {}", kMaxHosts,
                                 static_cast<std::int64_t>(s.leaves) * s.hosts_per_leaf));
  // One leaf needs no spine; several leaves need at least one to reach each other.
  s.spines = static_cast<int>(r.integer("spines", s.leaves > 1 ? 1 : 0, 4096));
  s.oversubscription = r.number_or("oversubscription", 1.0, 1e-3, 1e3);
  if (!(s.oversubscription > 0))
    throw InputError(r.path_of("oversubscription"), "expected a number greater than zero");
  s.host_link = parse_link_object(r, "host_link");
  s.uplink_latency = r.duration("uplink_latency");
  return s;
}

FatTreeSpec parse_fat_tree(JsonReader& r) {
  FatTreeSpec s;
  s.k = static_cast<int>(r.integer("k", 2, kMaxFatTreeK));
  if (s.k % 2 != 0)
    throw InputError(r.path_of("k"), fmt::format("expected an even k (k/2 ports up, k/2 down), "
                                                 "got {}",
                                                 s.k));
  s.link = parse_link_object(r, "link");
  return s;
}

ExplicitSpec parse_explicit(JsonReader& r) {
  ExplicitSpec s;
  std::set<std::string> names;
  int hosts = 0;
  auto nodes = r.objects("nodes");
  if (nodes.empty()) throw InputError(r.path_of("nodes"), "expected at least one node");
  if (nodes.size() > static_cast<std::size_t>(2 * kMaxHosts))
    throw InputError(r.path_of("nodes"), "too many nodes");
  for (auto& n : nodes) {
    ExplicitSpec::NodeEntry e;
    e.name = n.string("name");
    if (e.name.empty()) throw InputError(n.path_of("name"), "expected a non-empty name");
    if (!names.insert(e.name).second)
      throw InputError(n.path_of("name"), fmt::format("duplicate node name \"{}\"", e.name));
    e.kind = n.choice_or("kind", {"host", "switch"}, "host") == "host" ? NodeKind::kHost
                                                                       : NodeKind::kSwitch;
    if (e.kind == NodeKind::kHost) ++hosts;
    n.finish();
    s.nodes.push_back(std::move(e));
  }
  if (hosts == 0) throw InputError(r.path_of("nodes"), "expected at least one node of kind host");
  for (auto& l : r.objects("links")) {
    ExplicitSpec::LinkEntry e;
    e.a = l.string("a");
    e.b = l.string("b");
    if (!names.count(e.a))
      throw InputError(l.path_of("a"), fmt::format("unknown node \"{}\"", e.a));
    if (!names.count(e.b))
      throw InputError(l.path_of("b"), fmt::format("unknown node \"{}\"", e.b));
    if (e.a == e.b) throw InputError(l.path(), "a link must join two different nodes");
    e.link = parse_link(l);
    l.finish();
    s.links.push_back(std::move(e));
  }
  return s;
}

}  // namespace

TopologySpec parse_topology_spec(JsonReader& r) {
  const auto kind = r.choice("kind", {"star", "ring", "leaf_spine", "fat_tree", "explicit"});
  TopologySpec spec;
  if (kind == "star")
    spec = parse_star(r);
  else if (kind == "ring")
    spec = parse_ring(r);
  else if (kind == "leaf_spine")
    spec = parse_leaf_spine(r);
  else if (kind == "fat_tree")
    spec = parse_fat_tree(r);
  else
    spec = parse_explicit(r);
  r.ignore("hardware");  // parse_topology_hardware (topology_hardware.hpp) reads it
  r.finish();
  return spec;
}

int host_count(const TopologySpec& spec) {
  struct Visitor {
    int operator()(const StarSpec& s) const { return s.hosts; }
    int operator()(const RingSpec& s) const { return s.hosts; }
    int operator()(const LeafSpineSpec& s) const { return s.leaves * s.hosts_per_leaf; }
    int operator()(const FatTreeSpec& s) const { return s.k * s.k * s.k / 4; }
    int operator()(const ExplicitSpec& s) const {
      int n = 0;
      for (const auto& e : s.nodes) n += e.kind == NodeKind::kHost;
      return n;
    }
  };
  return std::visit(Visitor{}, spec);
}

}  // namespace mlsim
