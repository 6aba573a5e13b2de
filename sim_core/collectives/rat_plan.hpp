#pragma once
// RAT's planning (Resilient Allreduce Tree, APNet'20): the regions of a topology and, per chunk,
// which host aggregates each region and which tree joins the regions. The message exchange that
// follows the plan is in rat.cpp. Choices marked [inferred] are ours (the paper's abstract gives
// only the idea: per-region aggregators, a tree built from the physical topology and its
// oversubscription, avoiding failed links); docs/rat.md lists them.
//
// Regions [inferred]: the participants hanging off the same switch (a rack behind its ToR
// uplinks), found from the topology's links, not from node names. A host without a switch
// neighbour (a ring topology) is its own region.
//
// Per chunk c, with r regions eligible as root and m eligible aggregators in a region:
//  - root: in turn, the (c mod r)-th of the regions whose links to the rest of the fabric have
//    the largest current capacity [inferred]; a region behind a failed or slowed uplink is never
//    the root, which carries the most cross-region traffic;
//  - aggregator of each region: in turn, the (floor(c / r) mod m)-th of the members whose access
//    link is the region's best (failed or slowed NICs are passed over) [inferred]. Advancing once
//    per round of r pieces makes the root's aggregator a different host every time (over r x m
//    pieces each host is the root's aggregator once when regions are equal), so the root's work
//    (receive r - 1 partial sums, send r - 1 results and m - 1 scatters) is spread over all hosts;
//  - tree: grown from the root (Prim), each step adding the region reachable by the widest edge,
//    where an edge's width is the smaller of the bottleneck bandwidths of the two routes its
//    messages take (up, then down), over mlsim's own routes with the transfers' ECMP labels and
//    the links' current bandwidths [inferred]. Ties go to the shallowest attachment point, so a
//    healthy fabric gives a star around the root and a degraded link is left out when any other
//    route is as wide.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "sim_core/network/link_conditions.hpp"
#include "sim_core/network/routing.hpp"

namespace mlsim::collectives {

struct Region {
  NodeId gateway = 0;                  // the switch the members hang off (or the lone host)
  std::vector<std::uint32_t> members;  // participant indices, ascending
};

// Regions of the participants, ordered by their first member.
std::vector<Region> find_regions(const Topology& topology, std::span<const NodeId> participants);

// The switch every participant hangs off (one region whose gateway is a switch), where an
// in-switch reduction (nvls) can run; nullopt otherwise.
std::optional<NodeId> shared_switch(const Topology& topology, std::span<const NodeId> participants);

// Nominal capacity of a region's hosts over the capacity of its gateway's links to other switches
// (4 for a rack behind 4:1 oversubscribed uplinks); 0 when the gateway has no such links.
double oversubscription(const Topology& topology, const Region& region);

struct RegionTree {
  std::uint32_t root = 0;
  std::vector<std::uint32_t> parent;                 // per region; parent[root] == root
  std::vector<std::vector<std::uint32_t>> children;  // per region, in the order they joined
};

class RatPlanner {
 public:
  // `conditions` (and its topology) must outlive the planner; `flow_label` is the collective's.
  RatPlanner(const LinkConditions& conditions, std::vector<NodeId> participants,
             std::uint64_t flow_label);

  const std::vector<Region>& regions() const { return regions_; }
  std::uint32_t region_of(std::uint32_t participant) const { return region_of_[participant]; }

  // Per region, the participant that aggregates chunk c, from the current link conditions.
  std::vector<std::uint32_t> aggregators(std::uint32_t chunk);
  // The tree joining the regions for chunk c whose aggregators are `aggregators`.
  RegionTree tree(std::uint32_t chunk, std::span<const std::uint32_t> aggregators);

  // Narrowest current bandwidth on the route a message from participant `from` to `to` takes
  // now (0 when there is no route).
  double route_bandwidth(std::uint32_t from, std::uint32_t to);

 private:
  // Regions eligible as root, ascending.
  std::vector<std::uint32_t> roots() const;
  void sync_router();
  // Smaller of the usable bandwidths out of and into a node, over links to `switches_only`
  // neighbours (the gateway's uplinks) or to all neighbours (a host's access links).
  double capacity(NodeId node, bool switches_only) const;

  const LinkConditions& conditions_;
  std::vector<NodeId> participants_;
  std::uint64_t flow_label_;
  std::vector<Region> regions_;
  std::vector<std::uint32_t> region_of_;
  Router router_;
  std::uint64_t synced_version_ = 0;
};

}  // namespace mlsim::collectives
