#pragma once
// The network between a pipeline's hosts as the platform routes it: what AutoPipe's timing model
// and planners see of links beyond each host's own (pipeline_costs.hpp, Conditions::Routes), so
// that on a leaf-spine of servers a transfer between servers is priced at the server's uplink,
// shared among the stages' hosts crossing it, rather than at the host's own link. Used by the
// pipeline model (PipelineTraining) and the cluster model's planned pipeline jobs alike.
#include <span>
#include <vector>

#include "models/pipeline/pipeline_costs.hpp"
#include "sim_core/network/link_conditions.hpp"

namespace mlsim::pipeline {

struct HostRoutes {
  Conditions::Routes routes;  // hosts == 0: every route crosses only the hosts' own links
  std::vector<LinkId> links;  // every link of every route (a change to one may change them)
};

// The routes between every ordered pair of `hosts` (flow label 0, the point-to-point messages'
// label) over the links as they are now: each route's usable narrowest bandwidth and summed
// latency, and its links that are no host's access link as shared links (each link once, at
// its usable bandwidth). No routes (hosts == 0) when no route crosses such a link (a star:
// nothing changes from each host's own link), or when a route is missing (a link down: the run
// fails there; the hosts' links are what the planners see until it does). `hosts` must each
// have one access link each way (host_access_links).
HostRoutes host_routes(const LinkConditions& links, std::span<const NodeId> hosts);

}  // namespace mlsim::pipeline
