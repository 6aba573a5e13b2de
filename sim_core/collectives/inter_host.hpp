#pragma once
// A collective or message among GPUs on several hosts in closed form, with no traffic at all
// (ASTRA-sim's analytical network mode): collective_cost by the operation's first algorithm, arity
// 2, over the narrowest of the routes between consecutive hosts and their longest latency
// (ring_routes, ECMP label 0), the narrowest route's bandwidth split evenly among the
// `link_sharers` GPUs of a host [assumed: every GPU of a host communicates across the host link at
// once, which is what Megatron's data- and pipeline-parallel steps do when all tensor-parallel
// ranks run in lock-step; a DGX gives each GPU its own NIC].
//
// One implementation for the execution graph's closed form (sim_core/workload, CommunicationMode
// kClosedForm) and the training core's (models/training's closed-form gradient syncs and the
// Megatron job's pipeline messages, models/llm_training/megatron_core_job.hpp), so that the two
// cores price a data-parallel collective or a pipeline message alike, as intra_host.hpp does for
// a tensor-parallel all-reduce.
//
// Routes are looked up once per distinct list of hosts and remembered: the closed form prices the
// links as they were at a host list's first call (a later link event does not move it).
#include <map>
#include <span>
#include <vector>

#include "sim_core/base/time.hpp"
#include "sim_core/base/units.hpp"
#include "sim_core/collectives/costs.hpp"
#include "sim_core/network/link_conditions.hpp"

namespace mlsim::collectives {

class InterHostClosedForm {
 public:
  // `links` must outlive this.
  InterHostClosedForm(const LinkConditions& links, CostModel costs)
      : links_(links), costs_(costs) {}

  // The time of `op` among `participants` GPUs, each moving `bytes`, on `hosts` (the members'
  // hosts in order, repeats allowed: the ring's hosts are the distinct ones in first-seen order),
  // with `link_sharers` GPUs sharing each host's link. An internal check fails when a route
  // between the hosts is missing (0 bandwidth).
  Time time(Operation op, int participants, Bytes bytes, std::span<const NodeId> hosts,
            int link_sharers);

 private:
  struct Route {
    Bandwidth bandwidth;
    Time latency;
  };
  const Route& route(std::span<const NodeId> hosts);

  const LinkConditions& links_;
  CostModel costs_;
  std::map<std::vector<NodeId>, Route> routes_;
  std::vector<NodeId> distinct_;  // scratch
};

}  // namespace mlsim::collectives
