#pragma once
// The "llm_training" model (docs/llm_training.md): one or more Megatron-LM training iterations
// of a GPT/Llama-shaped transformer with TP x PP x DP, as an execution graph
// (models/llm_training/megatron_source.hpp) run by the platform's executor
// (sim_core/workload/graph_executor.hpp).
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "models/llm_training/megatron_source.hpp"
#include "models/llm_training/policies.hpp"
#include "models/llm_training/transformer_kernels.hpp"
#include "sim_core/run/model.hpp"
#include "sim_core/run/results.hpp"
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

// Why the training core cannot run `layout` in communication `mode` with its GPUs placed in rank
// order (tensor innermost, GPU g = t + tp r of worker r) on hosts holding host_gpus[i] GPUs each,
// in order, as the graph places its ranks (llm_training: the topology's hosts; a cluster job: its
// pp x dp placed hosts of tp GPUs each); empty when it can. A layout that does not fit the hosts
// at all (too few GPUs, a collapsed TP group across hosts) is no refusal of the core: both cores
// reject it at the layout's own path. The decision behind a cluster model's `megatron.core`
// (choose_core): "training" throws the reason, "auto" falls back to the graph. The cluster's
// Megatron jobs keep these rules (one TP group per host, each inside one host, TP collapsed in
// the closed form); llm_training's `system.core` asks training_core_refusal (the .cpp), which
// since 2026-12-07 runs every layout the graph runs on the core. One decision for both is
// left: the cluster's job set-up has not been checked on the layouts the core gained.
std::optional<std::string> core_refusal(const ParallelLayout& layout,
                                        workload::CommunicationMode mode,
                                        std::span<const std::int64_t> host_gpus);

// Which core runs: `asked` unless it is kAuto, which takes the training core when `refusal` is
// empty and the graph otherwise (`fallback` then holds the reason). Asked for the training core
// that refuses, an InputError at `where` with the reason.
struct CoreChoice {
  Core core = Core::kGraph;
  Core asked = Core::kAuto;
  std::optional<std::string> fallback;
};
CoreChoice choose_core(Core asked, const std::optional<std::string>& refusal,
                       const std::string& where);
// The choice as results' details: `core` (what ran: "graph" or "training"), `core_requested`
// (the scenario's value) and, when "auto" fell back to the graph, `core_fallback` (why).
void report_core_choice(const CoreChoice& choice, Results& out);

std::unique_ptr<Model> make_llm_training_model(ModelSetup& setup);

}  // namespace mlsim::llm_training
