#include "models/llm_training/policies.hpp"

namespace mlsim::llm_training {
namespace {

LlmTrainingPolicies build() {
  LlmTrainingPolicies p;
  p.core
      .add("graph",
           "the iteration as an execution graph (one graph rank per TP group, a node per kernel, "
           "collective and message) run by the platform's graph executor",
           Core::kGraph)
      .add("training",
           "the iteration as a job on the training core (a worker per TP group, Megatron's 1F1B "
           "as a PipelineSchedule, ops priced as the graph prices them, DP gradients by the "
           "core's ring or reduce_scatter_all_gather strategy, activations as point-to-point "
           "messages), in either communication mode; refuses (naming the reason) a layout it "
           "cannot run",
           Core::kTraining)
      .add("auto",
           "the default: the training core whenever it can run the layout, else the execution "
           "graph; details.core says which ran and details.core_fallback why the core could not",
           Core::kAuto);
  p.communication
      .add("closed_form",
           "collectives and messages between hosts take collective_cost's closed form (launch, "
           "per-step latency, protocol, bytes over the narrowest route shared by the host's "
           "GPUs), no traffic: ASTRA-sim's analytical mode",
           workload::CommunicationMode::kClosedForm)
      .add("network",
           "collectives and messages between hosts move their bytes through the scenario's "
           "network backend (contention, link changes); inside a host, the closed form over "
           "its intra_node link",
           workload::CommunicationMode::kNetwork);
  p.dp_sync
      .add("all_reduce", "one all-reduce of every rank's gradients over its data-parallel group",
           DpSync::kAllReduce)
      .add("reduce_scatter_all_gather",
           "reduce-scatter of the gradients, then all-gather of the updated parameters (a "
           "distributed optimizer)",
           DpSync::kReduceScatterAllGather);
  return p;
}

}  // namespace

std::vector<PolicyInfo> LlmTrainingPolicies::describe() const {
  std::vector<PolicyInfo> out;
  core.describe(out);
  communication.describe(out);
  dp_sync.describe(out);
  return out;
}

const LlmTrainingPolicies& llm_training_policies() {
  static const LlmTrainingPolicies policies = build();
  return policies;
}

}  // namespace mlsim::llm_training
