#include "sim_core/collectives/ring_bottleneck.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim_core/collectives/sender.hpp"
#include "sim_core/network/routing.hpp"

namespace mlsim::collectives {

Bandwidth ring_bottleneck(const LinkConditions& conditions, std::span<const NodeId> participants,
                          std::uint64_t flow_label) {
  return ring_routes(conditions, participants, flow_label).narrowest;
}

RingRoutes ring_routes(const LinkConditions& conditions, std::span<const NodeId> participants,
                       std::uint64_t flow_label) {
  Router& router = conditions.router();
  const auto n = static_cast<std::uint32_t>(participants.size());
  double narrowest = std::numeric_limits<double>::infinity();
  Time longest = Time::zero();
  for (std::uint32_t i = 0; i < n && n > 1; ++i) {
    const std::uint32_t next = i + 1 == n ? 0 : i + 1;
    const auto path =
        router.route(participants[i], participants[next], transfer_label(flow_label, i, next));
    if (!path) return {Bandwidth{0}, Time::zero()};
    Time latency = Time::zero();
    for (LinkId l : path->links) {
      narrowest = std::min(narrowest, conditions.usable(l).bytes_per_s);
      latency += conditions.latency(l);
    }
    longest = std::max(longest, latency);
  }
  return {Bandwidth{std::isinf(narrowest) ? 0 : narrowest}, longest};
}

}  // namespace mlsim::collectives
