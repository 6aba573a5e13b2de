#include "models/pipeline/policies.hpp"

namespace mlsim::pipeline {
namespace {

PipelinePolicies build() {
  PipelinePolicies p;
  p.policies
      .add("pipedream", "PipeDream: one partition computed at the start and kept",
           Policy::kPipeDream)
      .add("autopipe",
           "AutoPipe-style: re-partition when GPU speeds or bandwidths change and the "
           "schedule's timing model (1F1B or GPipe) predicts a gain above min_gain",
           Policy::kAutoPipe);
  using Kind = training::PipelineSchedule::Kind;
  p.schedules
      .add("1f1b",
           "PipeDream's 1F1B: warm-up forwards up to the in-flight limit, then one forward and one "
           "backward, a weight update per minibatch",
           Kind::kOneFOneB)
      .add("gpipe",
           "GPipe: all forwards of a group of micro_batches_per_flush, then all its backwards, "
           "one weight update per group",
           Kind::kGPipe);
  p.planners
      .add("exact",
           "AutoPipe's reference planner: branch and bound over every configuration under the "
           "schedule's timing model (equal to the exhaustive search)",
           Planner::kExact)
      .add("dp",
           "a dynamic program (PipeDream's optimizer's shape) exact for the bottleneck time: the "
           "largest stage's GPU or NIC work plus its all-reduce, shared by its replicas (a lower "
           "bound on the schedule's steady-state time, which couples stages)",
           Planner::kDp)
      .add("rl",
           "the paper's RL planner: a softmax policy over stages trained by REINFORCE inside the "
           "timing model (system.rl: episodes, batch, learning_rate)",
           Planner::kRl);
  p.switchings
      .add("drain_and_copy",
           "the pipeline drains while each host fetches the layers it lacks (one transfer per "
           "pair of hosts); the new configuration starts once both are done",
           Switching::kDrainAndCopy)
      .add("layer_by_layer",
           "AutoPipe's switch as its abstract describes it: each moved layer its own message, in "
           "layer order per pair of hosts; the new configuration starts when the drain ends and "
           "each op waits only for the layers it computes",
           Switching::kLayerByLayer);
  return p;
}

}  // namespace

std::vector<PolicyInfo> PipelinePolicies::describe() const {
  std::vector<PolicyInfo> out;
  policies.describe(out);
  schedules.describe(out);
  planners.describe(out);
  switchings.describe(out);
  return out;
}

const PipelinePolicies& pipeline_policies() {
  static const PipelinePolicies policies = build();
  return policies;
}

}  // namespace mlsim::pipeline
