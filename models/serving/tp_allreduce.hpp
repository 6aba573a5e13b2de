#pragma once
// The time of one tensor-parallel all-reduce of a replica: a ring all-reduce over its tp GPUs,
// costed by the platform's collective layer (sim_core/collectives/costs.hpp, collective_cost:
// launch, per-step latency and protocol chosen by size, bytes over the GPUs' link) with the
// bandwidth and latency of the link between the GPUs of one host (the GPU catalog's intra_node
// entry, NVSwitch on the shipped A100 and H100 parts). The bytes do not cross the scenario's
// network event by event: the GPUs of one NVSwitch node have a link each that no other replica
// uses, so the closed form is what the event-driven ring would take there
// (tests/collectives/costs_test.cpp, ClosedFormIsWhatTheEventDrivenRingTakesOnAStar).
//
// A group spanning hosts (tp larger than a host's GPUs; across_hosts) is costed the way the
// training executor costs a collective between hosts (sim_core/workload/graph_executor.cpp,
// GraphExecutor::launch): one closed-form call over all its GPUs whose routes are the network's
// between its hosts (collectives::ring_routes: the narrowest, the longest latency), the route's
// bandwidth shared by the group's GPUs of a host. Here a step ends when its slowest message does,
// so the bandwidth is the smaller of that share and the intra_node link's, the latency the larger.
#include "sim_core/base/time.hpp"
#include "sim_core/base/units.hpp"
#include "sim_core/collectives/costs.hpp"

namespace mlsim::serving {

struct TpAllReduce {
  collectives::CostModel costs;  // none: bytes over the link only
  Bandwidth bandwidth;           // per GPU, per direction; > 0 for tp > 1
  Time route_latency;            // one message from a GPU to the next one

  // One all-reduce of `payload` bytes over `tp` GPUs; zero at tp 1 (nothing to reduce).
  Time time(int tp, Bytes payload) const;
  // Another collective over `n` GPUs of the same host, by the collective layer's default
  // algorithm for it (all-to-all: direct; all-gather: ring), `bytes` as collective.hpp counts
  // them (all-to-all: each GPU's whole send buffer; all-gather: the gathered result); zero at n 1.
  Time collective(collectives::Operation op, int n, Bytes bytes) const;
  // The same costs for a group whose `gpus_per_host` GPUs on each of several hosts are joined by
  // network routes of `route` bandwidth (the narrowest between consecutive hosts) and
  // `route_latency` (the longest): bandwidth min(this link, route / gpus_per_host), latency
  // max(this link's, route_latency). Route bandwidth must be > 0.
  TpAllReduce across_hosts(Bandwidth route, Time route_latency, int gpus_per_host) const;
};

}  // namespace mlsim::serving
