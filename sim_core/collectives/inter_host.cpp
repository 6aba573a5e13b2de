#include "sim_core/collectives/inter_host.hpp"

#include <algorithm>

#include "sim_core/base/error.hpp"
#include "sim_core/collectives/collective.hpp"
#include "sim_core/collectives/ring_bottleneck.hpp"

namespace mlsim::collectives {

const InterHostClosedForm::Route& InterHostClosedForm::route(std::span<const NodeId> hosts) {
  distinct_.clear();
  for (NodeId h : hosts)
    if (std::find(distinct_.begin(), distinct_.end(), h) == distinct_.end()) distinct_.push_back(h);
  auto it = routes_.find(distinct_);
  if (it == routes_.end()) {
    const RingRoutes rr = ring_routes(links_, distinct_, 0);
    it = routes_.emplace(distinct_, Route{rr.narrowest, rr.longest_latency}).first;
  }
  return it->second;
}

Time InterHostClosedForm::time(Operation op, int participants, Bytes bytes,
                               std::span<const NodeId> hosts, int link_sharers) {
  const Route& r = route(hosts);
  MLSIM_CHECK(r.bandwidth.bytes_per_s > 0, "no route between the hosts of a collective");
  const Bandwidth share{r.bandwidth.bytes_per_s / std::max(1, link_sharers)};
  return collective_cost(costs_, op, algorithms_for(op).front(), participants, 2, bytes, share,
                         r.latency)
      .time;
}

}  // namespace mlsim::collectives
