#include "models/ina/policies.hpp"

#include "models/training/policies.hpp"

namespace mlsim::ina {
namespace {

InaPolicies build() {
  InaPolicies p;
  p.policies
      .add("switchml",
           "SwitchML: a static pool of slots per job (with shadow copies); a worker waits for "
           "its slot",
           PolicyKind::kSwitchMl)
      .add("atp",
           "ATP: hash(job, seq) into one shared pool; without a free aggregator the packet goes "
           "to the job's parameter server",
           PolicyKind::kAtp)
      .add("dsa", "DSA: as ATP, but a packet of strictly higher priority preempts the aggregator",
           PolicyKind::kDsa);
  p.data_paths
      .add("packet", "the model's own packet-level star links (network.backend refused)",
           DataPathKind::kPacket)
      .add("network",
           "bursts are transfers of network.backend to the switch node hosting the program",
           DataPathKind::kNetwork);
  return p;
}

}  // namespace

std::vector<PolicyInfo> InaPolicies::describe() const {
  std::vector<PolicyInfo> out;
  policies.describe(out);
  data_paths.describe(out);
  // The training core's schedulers, chosen by system.scheduler (ina_model.cpp).
  training::training_policies().schedulers.describe(out);
  training::training_policies().orderings.describe(out);  // system.scheduling
  return out;
}

const InaPolicies& ina_policies() {
  static const InaPolicies policies = build();
  return policies;
}

}  // namespace mlsim::ina
