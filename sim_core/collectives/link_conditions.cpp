#include "sim_core/collectives/link_conditions.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim_core/base/error.hpp"
#include "sim_core/collectives/sender.hpp"
#include "sim_core/network/routing.hpp"

namespace mlsim::collectives {

LinkConditions::LinkConditions(const Topology& topology)
    : topology_(topology), up_(topology.links().size(), 1) {
  bandwidth_.reserve(topology.links().size());
  for (const Link& l : topology.links()) bandwidth_.push_back(l.bandwidth);
}

void LinkConditions::apply(const LinkChange& change, Network& network) {
  const std::vector<LinkId> links = links_between(topology_, change.a, change.b);
  MLSIM_CHECK(!links.empty(), "link change between nodes that are not neighbours");
  for (LinkId l : links) {
    if (change.kind == LinkChange::Kind::kBandwidth) {
      bandwidth_[l] = change.bandwidth;
      network.set_link_bandwidth(l, change.bandwidth);
    } else {
      up_[l] = change.up ? 1 : 0;
      network.set_link_up(l, change.up);
    }
  }
  ++version_;
}

std::vector<LinkId> links_between(const Topology& topology, NodeId a, NodeId b) {
  std::vector<LinkId> out;
  for (LinkId l : topology.out_links(a))
    if (topology.link(l).dst == b) out.push_back(l);
  for (LinkId l : topology.out_links(b))
    if (topology.link(l).dst == a) out.push_back(l);
  return out;
}

Bandwidth ring_bottleneck(const LinkConditions& conditions, std::span<const NodeId> participants,
                          std::uint64_t flow_label) {
  Router router(conditions.topology());
  const auto& links = conditions.topology().links();
  for (LinkId l = 0; l < links.size(); ++l)
    if (!conditions.up(l)) router.set_link_up(l, false);
  const auto n = static_cast<std::uint32_t>(participants.size());
  double narrowest = std::numeric_limits<double>::infinity();
  for (std::uint32_t i = 0; i < n && n > 1; ++i) {
    const std::uint32_t next = i + 1 == n ? 0 : i + 1;
    const auto path =
        router.route(participants[i], participants[next], transfer_label(flow_label, i, next));
    if (!path) return Bandwidth{0};
    for (LinkId l : path->links) narrowest = std::min(narrowest, conditions.usable(l).bytes_per_s);
  }
  return Bandwidth{std::isinf(narrowest) ? 0 : narrowest};
}

void schedule_link_changes(Engine& engine, Network& network, LinkConditions& conditions,
                           const std::vector<LinkChange>& changes) {
  for (const LinkChange& c : changes) {
    if (c.at <= engine.now()) {
      conditions.apply(c, network);
    } else {
      engine.schedule_at(c.at, [&conditions, &network, c] { conditions.apply(c, network); });
    }
  }
}

}  // namespace mlsim::collectives
