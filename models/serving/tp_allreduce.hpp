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
// A group spanning hosts (tp larger than a host's GPUs; across_hosts) is costed by the layer's
// hierarchical all-reduce (sim_core/collectives/hierarchical.hpp: NCCL's ring through all the
// GPUs or its tree of intra-host chains, whichever NCCL's cost model picks; inter-node steps pay
// the fitted inter_node_latency) over the group's g GPUs per host and the network route between
// its hosts (collectives::ring_routes: the narrowest, the longest latency), the route being all
// of a host's network bandwidth since NCCL's channels leave a host through different NICs. The
// route is read from the links as they are now: when the scenario's `events` change a link
// (LinkConditions::version moves), the next all-reduce re-reads it (HostRoutes).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim_core/base/time.hpp"
#include "sim_core/base/units.hpp"
#include "sim_core/collectives/costs.hpp"
#include "sim_core/collectives/ring_bottleneck.hpp"
#include "sim_core/network/link_conditions.hpp"

namespace mlsim::serving {

// The routes between the hosts of a replica's tensor-parallel groups (one group per pipeline
// stage), as the links are now: re-read whenever the LinkConditions changed since the last read.
class HostRoutes {
 public:
  // Each group: its hosts in ring order (two or more). `links` must outlive this.
  HostRoutes(const LinkConditions& links, std::vector<std::vector<NodeId>> groups,
             std::string replica);
  // Narrowest bandwidth and longest latency over every group's ring of hosts. Throws
  // std::runtime_error naming the replica when a group has no route left (a TP group whose
  // hosts are cut apart cannot all-reduce; waiting for a repair is not modelled).
  collectives::RingRoutes now() const;
  std::uint64_t reads() const { return reads_; }  // how often the links were read

 private:
  const LinkConditions* links_;
  std::vector<std::vector<NodeId>> groups_;
  std::string replica_;
  mutable std::optional<std::uint64_t> version_;
  mutable collectives::RingRoutes cached_;
  mutable std::uint64_t reads_ = 0;
};

struct TpAllReduce {
  collectives::CostModel costs;  // none: bytes over the link only
  Bandwidth bandwidth;           // per GPU, per direction; > 0 for tp > 1
  Time route_latency;            // one message from a GPU to the next one

  // Set for a group spanning hosts (across_hosts): its GPUs per host and the route between the
  // hosts, fixed or read from the links as they are now (`live`, which wins when set).
  struct AcrossHosts {
    int gpus_per_host = 1;
    Bandwidth route;
    Time route_latency;
    std::shared_ptr<const HostRoutes> live;
  };
  std::optional<AcrossHosts> across;

  // One all-reduce of `payload` bytes over `tp` GPUs; zero at tp 1 (nothing to reduce). Across
  // hosts: the hierarchical all-reduce over tp / gpus_per_host hosts.
  Time time(int tp, Bytes payload) const;
  // Another collective over `n` GPUs of the same group, by the collective layer's default
  // algorithm for it (all-to-all: direct; all-gather: ring), `bytes` as collective.hpp counts
  // them (all-to-all: each GPU's whole send buffer; all-gather: the gathered result); zero at
  // n 1. Across hosts these stay one flat closed form over the slowest link: bandwidth
  // min(intra_node, route / gpus_per_host), latency max(intra_node's, route's) (training's
  // convention, sim_core/workload/graph_executor.cpp).
  Time collective(collectives::Operation op, int n, Bytes bytes) const;
  // The same costs for a group whose `gpus_per_host` GPUs on each of several hosts are joined by
  // network routes of `route` bandwidth (the narrowest between consecutive hosts) and
  // `route_latency` (the longest). Route bandwidth must be > 0 unless `live` is given.
  TpAllReduce across_hosts(Bandwidth route, Time route_latency, int gpus_per_host,
                           std::shared_ptr<const HostRoutes> live = nullptr) const;
};

}  // namespace mlsim::serving
