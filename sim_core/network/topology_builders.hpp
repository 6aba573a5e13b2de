#pragma once
// Builders for the topologies a scenario can name. Each returns a Topology whose hosts are
// numbered 0..n-1 in hosts() order; switches are named "sw<i>", "leaf<i>", "spine<i>", ...
// Parsing the "topology" JSON section into a TopologySpec lives in the scenario loader;
// build_topology() turns the spec into the graph.
#include <string>
#include <variant>
#include <vector>

#include "sim_core/network/topology.hpp"

namespace mlsim {

struct LinkSpec {
  Bandwidth bandwidth;
  Time latency;
};

// n hosts on one switch; every host link has `link`.
struct StarSpec {
  int hosts = 0;
  LinkSpec link;
};
// n hosts in a ring, host i linked to host (i+1) % n by a duplex link (no switches).
struct RingSpec {
  int hosts = 0;
  LinkSpec link;
};
// `leaves` leaf switches with `hosts_per_leaf` hosts each and `spines` spine switches; every leaf
// connects to every spine. Uplink bandwidth per leaf-spine link is
// hosts_per_leaf * host_link.bandwidth / (spines * oversubscription), so oversubscription 4 means
// a leaf's total uplink capacity is a quarter of its hosts' total.
struct LeafSpineSpec {
  int leaves = 0;
  int hosts_per_leaf = 0;
  int spines = 0;
  double oversubscription = 1.0;
  LinkSpec host_link;
  Time uplink_latency;
};
// Classic k-ary fat-tree (k even): k pods, (k/2)^2 core switches, k^3/4 hosts, all links equal.
struct FatTreeSpec {
  int k = 0;
  LinkSpec link;
};
// Explicit lists: nodes by name and kind, duplex links between named nodes.
struct ExplicitSpec {
  struct NodeEntry {
    std::string name;
    NodeKind kind = NodeKind::kHost;
  };
  struct LinkEntry {
    std::string a, b;
    LinkSpec link;
  };
  std::vector<NodeEntry> nodes;
  std::vector<LinkEntry> links;
};

using TopologySpec = std::variant<StarSpec, RingSpec, LeafSpineSpec, FatTreeSpec, ExplicitSpec>;

// Throws InputError (path "topology...") for impossible specs (zero hosts, odd k, unknown node).
Topology build_topology(const TopologySpec& spec);

}  // namespace mlsim
