#include "sim_core/collectives/hierarchical.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "sim_core/base/error.hpp"

namespace mlsim::collectives {

namespace {

int ceil_log2(int h) {
  int levels = 0;
  while ((1 << levels) < h) ++levels;
  return levels;
}

// The narrowest link one piece crosses: a GPU's link inside a host (when a host has several
// GPUs) and the route between hosts (when there are several hosts).
double narrowest(const HostGroup& group) {
  double b = std::numeric_limits<double>::infinity();
  if (group.gpus_per_host > 1) b = std::min(b, group.intra.bytes_per_s);
  if (group.hosts > 1) b = std::min(b, group.inter.bytes_per_s);
  return b;
}

void check(const HostGroup& g) {
  MLSIM_CHECK(g.hosts >= 1 && g.gpus_per_host >= 1, "a host group needs hosts and GPUs");
  MLSIM_CHECK(g.gpus_per_host == 1 || g.intra.bytes_per_s > 0,
              "GPUs of one host all-reduce, but their link has no bandwidth");
  MLSIM_CHECK(g.hosts == 1 || g.inter.bytes_per_s > 0,
              "hosts all-reduce, but the route between them has no bandwidth");
}

}  // namespace

HierarchicalSteps hierarchical_steps(Algorithm a, const HostGroup& group) {
  const int n = group.hosts * group.gpus_per_host;
  if (n <= 1) return {};
  if (a == Algorithm::kTree) {
    const int inter = 2 * ceil_log2(group.hosts);
    return {2 * (group.gpus_per_host - 1) + inter, inter};
  }
  MLSIM_CHECK(a == Algorithm::kRing, "a hierarchical all-reduce is a ring or a tree");
  return {2 * (n - 1), 2 * (group.hosts - 1)};
}

double hierarchical_bytes(Algorithm a, const HostGroup& group, Bytes bytes) {
  const int n = group.hosts * group.gpus_per_host;
  if (n <= 1) return 0;
  const auto s = static_cast<double>(bytes.count);
  return a == Algorithm::kTree ? 2 * s : 2.0 * (n - 1) / n * s;
}

Time hierarchical_all_reduce_time(const CostModel& model, const HostGroup& group, Algorithm a,
                                  std::optional<Protocol> p, Bytes bytes) {
  check(group);
  const HierarchicalSteps steps = hierarchical_steps(a, group);
  if (steps.total == 0) return Time::zero();
  ProtocolCost none;  // no protocols: no hop latency, efficiency 1
  const ProtocolCost& c = p ? model.of(*p) : none;
  const double seconds = steps.total * c.hop_latency.seconds() +
                         hierarchical_bytes(a, group, bytes) / (c.efficiency * narrowest(group));
  const int intra_steps = steps.total - steps.inter;
  return model.launch + group.intra_latency * intra_steps +
         (group.inter_latency + model.inter_node_latency) * steps.inter +
         Time::from_seconds(seconds);
}

HierarchicalCost hierarchical_all_reduce_cost(const CostModel& model, const HostGroup& group,
                                              Bytes bytes) {
  check(group);
  const int n = group.hosts * group.gpus_per_host;
  if (n <= 1) return {Time::zero(), Algorithm::kRing, std::nullopt};
  if (group.hosts == 1) {
    const CollectiveCost flat =
        collective_cost(model, Operation::kAllReduce, Algorithm::kRing, n, /*arity=*/2, bytes,
                        group.intra, group.intra_latency);
    return {flat.time, Algorithm::kRing, flat.protocol};
  }
  std::optional<HierarchicalCost> best;
  for (Algorithm a : {Algorithm::kRing, Algorithm::kTree}) {
    auto consider = [&](std::optional<Protocol> p) {
      const Time t = hierarchical_all_reduce_time(model, group, a, p, bytes);
      // Strictly less keeps the ring on a tie with the tree; within an algorithm, a later
      // protocol wins a tie (as choose_protocol).
      if (!best || t < best->time || (best->algorithm == a && t == best->time))
        best = HierarchicalCost{t, a, p};
    };
    if (!model.has_protocols()) {
      consider(std::nullopt);
      continue;
    }
    for (Protocol p : kProtocols)
      if (model.of(p).enabled) consider(p);
  }
  return *best;
}

}  // namespace mlsim::collectives
