#include "sim_core/collectives/rat_plan.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include "sim_core/base/error.hpp"
#include "sim_core/collectives/sender.hpp"

namespace mlsim::collectives {
namespace {

// Two capacities computed from the same doubles compare equal; the margin only absorbs rounding
// in the sums.
bool at_least(double a, double b) {
  return a >= b * (1 - 1e-9);
}
bool wider(double a, double b) {
  return !at_least(b, a);
}

bool is_switch(const Topology& t, NodeId n) {
  return t.node(n).kind == NodeKind::kSwitch;
}

}  // namespace

std::vector<Region> find_regions(const Topology& topology, std::span<const NodeId> participants) {
  std::vector<Region> regions;
  std::map<NodeId, std::size_t> by_gateway;
  for (std::uint32_t i = 0; i < participants.size(); ++i) {
    const NodeId host = participants[i];
    NodeId gateway = host;  // no switch neighbour: the host is a region of its own
    for (LinkId l : topology.out_links(host)) {
      const NodeId next = topology.link(l).dst;
      if (is_switch(topology, next)) {
        gateway = next;
        break;
      }
    }
    auto [it, inserted] = by_gateway.try_emplace(gateway, regions.size());
    if (inserted) regions.push_back(Region{gateway, {}});
    regions[it->second].members.push_back(i);
  }
  return regions;
}

std::optional<NodeId> shared_switch(const Topology& topology,
                                    std::span<const NodeId> participants) {
  const std::vector<Region> regions = find_regions(topology, participants);
  if (regions.size() != 1 || !is_switch(topology, regions.front().gateway)) return std::nullopt;
  return regions.front().gateway;
}

double oversubscription(const Topology& topology, const Region& region) {
  double down = 0, up = 0;
  for (LinkId l : topology.out_links(region.gateway)) {
    const Link& link = topology.link(l);
    (is_switch(topology, link.dst) ? up : down) += link.bandwidth.bytes_per_s;
  }
  return up > 0 ? down / up : 0;
}

RatPlanner::RatPlanner(const LinkConditions& conditions, std::vector<NodeId> participants,
                       std::uint64_t flow_label)
    : conditions_(conditions),
      participants_(std::move(participants)),
      flow_label_(flow_label),
      regions_(find_regions(conditions.topology(), participants_)),
      region_of_(participants_.size(), 0),
      router_(conditions.topology()) {
  for (std::uint32_t r = 0; r < regions_.size(); ++r)
    for (std::uint32_t m : regions_[r].members) region_of_[m] = r;
  sync_router();
}

void RatPlanner::sync_router() {
  const auto& links = conditions_.topology().links();
  for (LinkId l = 0; l < links.size(); ++l)
    if (router_.link_up(l) != conditions_.up(l)) router_.set_link_up(l, conditions_.up(l));
  synced_version_ = conditions_.version();
}

double RatPlanner::capacity(NodeId node, bool switches_only) const {
  const Topology& t = conditions_.topology();
  double out = 0, in = 0;
  for (LinkId l : t.out_links(node)) {
    const NodeId next = t.link(l).dst;
    if (switches_only && !is_switch(t, next)) continue;
    out += conditions_.usable(l).bytes_per_s;
    for (LinkId back : t.out_links(next))
      if (t.link(back).dst == node) in += conditions_.usable(back).bytes_per_s;
  }
  return std::min(out, in);
}

double RatPlanner::route_bandwidth(std::uint32_t from, std::uint32_t to) {
  if (synced_version_ != conditions_.version()) sync_router();
  const auto path =
      router_.route(participants_[from], participants_[to], transfer_label(flow_label_, from, to));
  if (!path) return 0;
  double narrowest = std::numeric_limits<double>::infinity();
  for (LinkId l : path->links) narrowest = std::min(narrowest, conditions_.usable(l).bytes_per_s);
  return narrowest;
}

std::vector<std::uint32_t> RatPlanner::roots() const {
  const Topology& t = conditions_.topology();
  std::vector<double> boundary;
  double widest = 0;
  for (const Region& region : regions_) {
    boundary.push_back(capacity(region.gateway, is_switch(t, region.gateway)));
    widest = std::max(widest, boundary.back());
  }
  std::vector<std::uint32_t> out;
  for (std::uint32_t r = 0; r < regions_.size(); ++r)
    if (at_least(boundary[r], widest)) out.push_back(r);
  return out;
}

std::vector<std::uint32_t> RatPlanner::aggregators(std::uint32_t chunk) {
  const std::size_t round = chunk / roots().size();
  std::vector<std::uint32_t> out;
  out.reserve(regions_.size());
  std::vector<std::uint32_t> eligible;
  std::vector<double> access;
  for (const Region& region : regions_) {
    double best = 0;
    access.clear();
    for (std::uint32_t m : region.members) {
      access.push_back(capacity(participants_[m], false));
      best = std::max(best, access.back());
    }
    eligible.clear();
    for (std::size_t i = 0; i < access.size(); ++i)
      if (at_least(access[i], best)) eligible.push_back(region.members[i]);
    out.push_back(eligible[round % eligible.size()]);
  }
  return out;
}

RegionTree RatPlanner::tree(std::uint32_t chunk, std::span<const std::uint32_t> aggregators) {
  const auto n = static_cast<std::uint32_t>(regions_.size());
  MLSIM_CHECK(aggregators.size() == n, "one aggregator per region");
  const std::vector<std::uint32_t> candidates = roots();

  RegionTree tree;
  tree.root = candidates[chunk % candidates.size()];
  tree.parent.assign(n, tree.root);
  tree.children.assign(n, {});

  // Prim's algorithm for the widest tree; best[v] is v's widest edge into the tree so far and
  // attach[v] the tree node at its end. Lexicographic key: width, then shallower attachment.
  std::vector<std::uint32_t> depth(n, 0);
  std::vector<double> best(n, -1);
  std::vector<std::uint32_t> attach(n, tree.root);
  std::vector<std::uint8_t> in_tree(n, 0);
  auto relax = [&](std::uint32_t u) {
    for (std::uint32_t v = 0; v < n; ++v) {
      if (in_tree[v]) continue;
      const double width = std::min(route_bandwidth(aggregators[v], aggregators[u]),
                                    route_bandwidth(aggregators[u], aggregators[v]));
      // Wider wins; at equal width the shallower attachment does.
      if (best[v] < 0 || wider(width, best[v]) ||
          (!wider(best[v], width) && depth[u] < depth[attach[v]])) {
        best[v] = width;
        attach[v] = u;
      }
    }
  };
  in_tree[tree.root] = 1;
  relax(tree.root);
  for (std::uint32_t added = 1; added < n; ++added) {
    std::uint32_t next = n;
    for (std::uint32_t v = 0; v < n; ++v) {
      if (in_tree[v]) continue;
      if (next == n || wider(best[v], best[next]) ||
          (!wider(best[next], best[v]) && depth[attach[v]] < depth[attach[next]]))
        next = v;
    }
    in_tree[next] = 1;
    tree.parent[next] = attach[next];
    depth[next] = depth[attach[next]] + 1;
    tree.children[attach[next]].push_back(next);
    relax(next);
  }
  return tree;
}

}  // namespace mlsim::collectives
