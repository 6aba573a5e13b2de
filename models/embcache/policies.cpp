#include "models/embcache/policies.hpp"

namespace mlsim::embcache {
namespace {

EmbcachePolicies build() {
  EmbcachePolicies p;
  p.systems
      .add("het", "HET-style cache: sequential batch split, eager sync of every updated row",
           {"sequential", "eager"})
      .add("het_bounded",
           "HET as Hetu implements it: sequential batch split, version-bounded staleness",
           {"sequential", "bounded"})
      .add("herald", "Herald: location-aware input allocation, on-demand sync",
           {"location_aware", "on_demand"});
  p.allocations
      .add("sequential", "worker w takes the w-th slice of the batch (HET's loader)",
           Allocation::kSequential)
      .add("location_aware",
           "Herald's LAIA: each sample to the worker holding most of its rows up to date",
           Allocation::kLocationAware);
  p.syncs
      .add("eager", "after each iteration every worker re-pulls each cached row another updated",
           Sync::kEager)
      .add("on_demand", "such rows are only marked outdated and pulled when next used",
           Sync::kOnDemand)
      .add("bounded",
           "Hetu's cache: a cached row is re-pulled when the PS is more than pull_bound versions "
           "ahead, a gradient row pushed after more than push_bound local updates",
           Sync::kBounded);
  // [assumed] Neither Herald's paper nor HET's gives a per-message figure we could read, and
  // ../shared/data has no host-stack measurement; these are the round figures of the project's
  // ByteScheduler transport profiles (models/commsched/transport_costs.hpp, docs/commsched.md),
  // kept equal so that the two models compare: ps-lite over ZeroMQ and kernel TCP pays system
  // calls and a copy per message (zmq_van.h), over RDMA it posts a rendezvous work request and
  // polls a completion (Herald's ibverbs_van.h SendMsg). No profile sets a per-byte cost
  // (system.host.per_byte_ns, kernel TCP's copies): no source gives one, so it is swept instead
  // (workloads/sweeps/embcache_host_cost.json, docs/embcache.md).
  p.transports
      .add("none", "no per-message cost unless system.host gives one",
           TransportProfile{Time::zero(), Time::zero()})
      .add("tcp", "ps-lite over ZeroMQ/TCP: 30 us CPU and 50 us latency per message [assumed]",
           TransportProfile{Time::us(30), Time::us(50)})
      .add("rdma", "ps-lite over ibverbs: 3 us CPU and 10 us latency per message [assumed]",
           TransportProfile{Time::us(3), Time::us(10)});
  return p;
}

}  // namespace

std::vector<PolicyInfo> EmbcachePolicies::describe() const {
  std::vector<PolicyInfo> out;
  systems.describe(out);
  allocations.describe(out);
  syncs.describe(out);
  transports.describe(out);
  return out;
}

const EmbcachePolicies& embcache_policies() {
  static const EmbcachePolicies policies = build();
  return policies;
}

}  // namespace mlsim::embcache
