#pragma once
// What the collectives know about the links right now: each link's current bandwidth and whether
// it is up. The Network interface applies link changes but does not report them back, so the
// code that changes links (the collectives model, a test) changes them through this record as
// well, and topology-aware algorithms (rat) plan with it.
#include <cstdint>
#include <span>
#include <vector>

#include "sim_core/engine/engine.hpp"
#include "sim_core/network/network.hpp"
#include "sim_core/network/topology.hpp"

namespace mlsim::collectives {

// One change of the links between two nodes (both directions of every cable joining them).
// Kept small: a scheduled change is captured by value in an engine callback.
struct LinkChange {
  Time at;
  NodeId a = 0, b = 0;
  Bandwidth bandwidth;  // kBandwidth: the new bandwidth
  enum class Kind : std::uint8_t { kBandwidth, kUp } kind = Kind::kBandwidth;
  bool up = true;  // kUp: repaired (true) or failed (false)
};

class LinkConditions {
 public:
  // All links up at their topology bandwidth. `topology` must outlive this.
  explicit LinkConditions(const Topology& topology);

  const Topology& topology() const { return topology_; }
  Bandwidth bandwidth(LinkId link) const { return bandwidth_[link]; }
  bool up(LinkId link) const { return up_[link] != 0; }
  // Bandwidth a transfer can get on the link: 0 when it is down.
  Bandwidth usable(LinkId link) const { return up(link) ? bandwidth(link) : Bandwidth{0}; }
  // Changes whenever a link changes, so planners know when to look again.
  std::uint64_t version() const { return version_; }

  // Applies the change here and on `network` now.
  void apply(const LinkChange& change, Network& network);

 private:
  const Topology& topology_;
  std::vector<Bandwidth> bandwidth_;
  std::vector<std::uint8_t> up_;
  std::uint64_t version_ = 0;
};

// The links from a to b and from b to a; empty when the nodes are not neighbours.
std::vector<LinkId> links_between(const Topology& topology, NodeId a, NodeId b);

// Narrowest usable bandwidth over the routes from each participant to the next (the last to the
// first), with the ECMP labels the collective's transfers use: the bandwidth a ring gets without
// contention. 0 when a route is missing.
Bandwidth ring_bottleneck(const LinkConditions& conditions, std::span<const NodeId> participants,
                          std::uint64_t flow_label);

// Applies the changes due now at once (so that what starts now sees them) and schedules the
// others on the engine. `conditions` and `network` must outlive the scheduled events.
void schedule_link_changes(Engine& engine, Network& network, LinkConditions& conditions,
                           const std::vector<LinkChange>& changes);

}  // namespace mlsim::collectives
