#pragma once
// The bandwidth a ring gets from the links as they are now (the platform's LinkConditions).
#include <cstdint>
#include <span>

#include "sim_core/network/link_conditions.hpp"

namespace mlsim::collectives {

// Narrowest usable bandwidth over the routes from each participant to the next (the last to the
// first), with the ECMP labels the collective's transfers use: the bandwidth a ring gets without
// contention. 0 when a route is missing.
Bandwidth ring_bottleneck(const LinkConditions& conditions, std::span<const NodeId> participants,
                          std::uint64_t flow_label);

// The same routes' narrowest bandwidth and longest latency (sum of its links' latencies): what
// the closed-form cost of a call among these participants needs (choose_algorithm, costs.hpp).
struct RingRoutes {
  Bandwidth narrowest;  // 0 when a route is missing
  Time longest_latency;
};
RingRoutes ring_routes(const LinkConditions& conditions, std::span<const NodeId> participants,
                       std::uint64_t flow_label);

}  // namespace mlsim::collectives
