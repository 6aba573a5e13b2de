#pragma once
// Hop-count shortest paths with per-flow ECMP, aware of failed links. The SimGrid and ns-3
// backends take their routes from here so that they follow the same paths as the flow backend.
// TODO(sg): replace with sim_core/routing.hpp once it lands (same contract).
#include <cstdint>
#include <vector>

#include "sim_core/topology.hpp"

namespace mlsim {

class EcmpRouter {
 public:
  explicit EcmpRouter(const Topology& topology);

  // Links from src to dst; among equal-cost next hops the choice hashes (flow_label, node), so one
  // flow keeps one path. Empty when src == dst or when no path of up links is left.
  std::vector<LinkId> route(NodeId src, NodeId dst, std::uint64_t flow_label) const;
  bool reachable(NodeId src, NodeId dst) const;

  void set_link_up(LinkId link, bool up);
  bool link_up(LinkId link) const { return up_[link]; }

  // Largest number of distinct shortest paths between two hosts (all links up).
  std::uint64_t max_equal_cost_paths() const;

 private:
  // Hop distance of every node to `dst` over up links (-1: unreachable), computed on demand.
  const std::vector<int>& distances_to(NodeId dst) const;

  const Topology* topology_;
  std::vector<bool> up_;
  std::vector<std::vector<LinkId>> in_links_;
  mutable std::vector<std::vector<int>> distance_cache_;  // per destination; empty = not computed
};

}  // namespace mlsim
