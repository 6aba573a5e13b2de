#pragma once
// The pipeline model's registered policies (sim_core/run/policy_registry.hpp): when the
// partition of layers into stages is computed, and the schedule the stages run. Adding one: one
// add() line in policies.cpp (a new planner also needs its code in pipeline_training).
#include <vector>

#include "models/pipeline/pipeline_training.hpp"
#include "sim_core/run/policy_registry.hpp"

namespace mlsim::pipeline {

struct PipelinePolicies {
  PolicyRegistry<Policy> policies{"policy"};
  // The op order of every stage (models/training/pipeline_schedule.hpp).
  PolicyRegistry<training::PipelineSchedule::Kind> schedules{"schedule"};
  // AutoPipe's planner (autopipe policy only).
  PolicyRegistry<Planner> planners{"planner"};
  // How AutoPipe's switch moves the parameters (autopipe policy only).
  PolicyRegistry<Switching> switchings{"switching"};
  std::vector<PolicyInfo> describe() const;
};

// Built on first use, never changed afterwards.
const PipelinePolicies& pipeline_policies();

}  // namespace mlsim::pipeline
