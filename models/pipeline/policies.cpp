#include "models/pipeline/policies.hpp"

namespace mlsim::pipeline {
namespace {

PipelinePolicies build() {
  PipelinePolicies p;
  p.policies
      .add("pipedream", "PipeDream: one partition computed at the start and kept",
           Policy::kPipeDream)
      .add("autopipe",
           "AutoPipe-style: re-partition when GPU speeds or bandwidths change and the 1F1B "
           "model predicts a gain above min_gain",
           Policy::kAutoPipe);
  return p;
}

}  // namespace

std::vector<PolicyInfo> PipelinePolicies::describe() const {
  std::vector<PolicyInfo> out;
  policies.describe(out);
  return out;
}

const PipelinePolicies& pipeline_policies() {
  static const PipelinePolicies policies = build();
  return policies;
}

}  // namespace mlsim::pipeline
