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
  return p;
}

}  // namespace

std::vector<PolicyInfo> EmbcachePolicies::describe() const {
  std::vector<PolicyInfo> out;
  systems.describe(out);
  allocations.describe(out);
  syncs.describe(out);
  return out;
}

const EmbcachePolicies& embcache_policies() {
  static const EmbcachePolicies policies = build();
  return policies;
}

}  // namespace mlsim::embcache
