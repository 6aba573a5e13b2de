#pragma once
// The llm_training model's registered choices (sim_core/run/policy_registry.hpp): how
// communication is timed and how data-parallel gradients are synchronised.
#include <vector>

#include "models/llm_training/megatron_source.hpp"
#include "sim_core/run/policy_registry.hpp"
#include "sim_core/workload/graph_executor.hpp"

namespace mlsim::llm_training {

// What runs the iteration: the execution graph (megatron_source.hpp), the training core
// (megatron_core_job.hpp), or (kAuto, the default) the training core whenever it can run the
// layout (core_refusal, llm_training_model.hpp), else the graph.
enum class Core { kGraph, kTraining, kAuto };

struct LlmTrainingPolicies {
  PolicyRegistry<Core> core{"core"};
  PolicyRegistry<workload::CommunicationMode> communication{"communication"};
  PolicyRegistry<DpSync> dp_sync{"dp_sync"};
  std::vector<PolicyInfo> describe() const;
};

// Built on first use, never changed afterwards.
const LlmTrainingPolicies& llm_training_policies();

}  // namespace mlsim::llm_training
