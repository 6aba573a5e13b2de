#pragma once
// The "llm_training" model (docs/llm_training.md): one or more Megatron-LM training iterations
// of a GPT/Llama-shaped transformer with TP x PP x DP, as an execution graph
// (models/llm_training/megatron_source.hpp) run by the platform's executor
// (sim_core/workload/graph_executor.hpp).
#include <memory>

#include "models/llm_training/megatron_source.hpp"
#include "models/llm_training/transformer_kernels.hpp"
#include "sim_core/run/model.hpp"
#include "sim_core/workload/graph_executor.hpp"

namespace mlsim::llm_training {

struct TrainingParams {
  TransformerShape shape;
  ParallelLayout layout;
  int micro_batch = 1;
  int global_batch = 1;
  workload::ExecutorOptions executor;
};

// Reads "system" and "workload"; every error names its JSON path.
TrainingParams read_training_params(JsonReader& system, JsonReader& workload);

std::unique_ptr<Model> make_llm_training_model(ModelSetup& setup);

}  // namespace mlsim::llm_training
