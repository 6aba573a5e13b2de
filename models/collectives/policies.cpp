#include "models/collectives/policies.hpp"

namespace mlsim::collectives {
namespace {

CollectivesPolicies build() {
  CollectivesPolicies p;
  p.operations
      .add("all_reduce", "every rank ends with the sum of all ranks' tensors",
           Operation::kAllReduce)
      .add("reduce_scatter", "every rank ends with the sum of its own 1/n of the tensor",
           Operation::kReduceScatter)
      .add("all_gather", "every rank ends with every rank's 1/n", Operation::kAllGather)
      .add("broadcast", "the first rank's tensor to every rank", Operation::kBroadcast)
      .add("send_recv", "one rank's tensor to the other (two participants)", Operation::kSendRecv)
      .add("all_to_all", "every rank sends a distinct 1/n to every other rank",
           Operation::kAllToAll);
  p.algorithms
      .add("ring", "reduce-scatter then all-gather around a ring, 2(n-1) steps of S/n",
           AlgorithmSetting{Algorithm::kRing})
      .add("ps", "workers push to parameter servers, which sum and send back",
           AlgorithmSetting{Algorithm::kParameterServer})
      .add("tree", "reduce up a k-ary tree, broadcast down", AlgorithmSetting{Algorithm::kTree})
      .add("rat",
           "RAT: per-rack aggregators, a widest tree of racks over the current link capacities",
           AlgorithmSetting{Algorithm::kRat})
      .add("direct", "each pair of ranks exchanges directly (send/recv, all-to-all)",
           AlgorithmSetting{Algorithm::kDirect})
      .add("nvls",
           "NVLink SHARP: each piece summed in the switch all participants hang off, the sum "
           "sent back to each",
           AlgorithmSetting{Algorithm::kNvls})
      .add("auto",
           "all_reduce: ring or tree (arity), whichever NCCL's kind of closed-form estimate "
           "prices lower for the size on these links",
           AlgorithmSetting{Algorithm::kRing, true});
  p.placements
      .add("dedicated", "ps: servers are the last participants, the others workers",
           Placement::kDedicated)
      .add("colocated", "ps: the first workers also serve a shard", Placement::kColocated)
      .add("spread", "ps: colocated on participants k n / servers (e.g. one per rack)",
           Placement::kSpread);
  return p;
}

}  // namespace

std::vector<PolicyInfo> CollectivesPolicies::describe() const {
  std::vector<PolicyInfo> out;
  operations.describe(out);
  algorithms.describe(out);
  placements.describe(out);
  return out;
}

const CollectivesPolicies& collectives_policies() {
  static const CollectivesPolicies policies = build();
  return policies;
}

}  // namespace mlsim::collectives
