#include "sim_core/ecmp_router.hpp"

#include <algorithm>
#include <deque>

#include "sim_core/error.hpp"

namespace mlsim {
namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser: spreads labels over next hops
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

EcmpRouter::EcmpRouter(const Topology& topology)
    : topology_(&topology),
      up_(topology.links().size(), true),
      in_links_(topology.nodes().size()),
      distance_cache_(topology.nodes().size()) {
  for (LinkId l = 0; l < topology.links().size(); ++l) in_links_[topology.link(l).dst].push_back(l);
}

const std::vector<int>& EcmpRouter::distances_to(NodeId dst) const {
  auto& dist = distance_cache_.at(dst);
  if (!dist.empty()) return dist;
  dist.assign(topology_->nodes().size(), -1);
  std::deque<NodeId> queue{dst};
  dist[dst] = 0;
  while (!queue.empty()) {
    const NodeId n = queue.front();
    queue.pop_front();
    for (LinkId l : in_links_[n]) {
      const NodeId prev = topology_->link(l).src;
      if (!up_[l] || dist[prev] >= 0) continue;
      dist[prev] = dist[n] + 1;
      queue.push_back(prev);
    }
  }
  return dist;
}

bool EcmpRouter::reachable(NodeId src, NodeId dst) const {
  return src == dst || distances_to(dst)[src] > 0;
}

std::vector<LinkId> EcmpRouter::route(NodeId src, NodeId dst, std::uint64_t flow_label) const {
  std::vector<LinkId> path;
  if (src == dst) return path;
  const auto& dist = distances_to(dst);
  if (dist[src] < 0) return path;
  NodeId at = src;
  std::vector<LinkId> candidates;
  while (at != dst) {
    candidates.clear();
    for (LinkId l : topology_->out_links(at)) {
      const NodeId next = topology_->link(l).dst;
      if (up_[l] && dist[next] == dist[at] - 1) candidates.push_back(l);
    }
    MLSIM_CHECK(!candidates.empty(), "broken distance table");
    const LinkId pick = candidates[mix(flow_label ^ (std::uint64_t{at} << 32)) % candidates.size()];
    path.push_back(pick);
    at = topology_->link(pick).dst;
  }
  return path;
}

void EcmpRouter::set_link_up(LinkId link, bool up) {
  if (up_.at(link) == up) return;
  up_[link] = up;
  for (auto& d : distance_cache_) d.clear();
}

std::uint64_t EcmpRouter::max_equal_cost_paths() const {
  std::uint64_t best = 1;
  const auto& hosts = topology_->hosts();
  for (NodeId dst : hosts) {
    const auto& dist = distances_to(dst);
    // Number of shortest paths from every node to dst, by increasing distance.
    std::vector<NodeId> order;
    for (NodeId n = 0; n < dist.size(); ++n)
      if (dist[n] >= 0) order.push_back(n);
    std::sort(order.begin(), order.end(), [&](NodeId a, NodeId b) { return dist[a] < dist[b]; });
    std::vector<std::uint64_t> count(dist.size(), 0);
    count[dst] = 1;
    for (NodeId n : order) {
      if (n == dst) continue;
      for (LinkId l : topology_->out_links(n)) {
        const NodeId next = topology_->link(l).dst;
        if (up_[l] && dist[next] == dist[n] - 1) count[n] += count[next];
      }
    }
    for (NodeId src : hosts) best = std::max(best, count[src]);
  }
  return best;
}

}  // namespace mlsim
