#pragma once
// The serving model's scenario sections, parsed strictly into typed parameters ("system" and
// "workload"; docs/serving.md documents every key), and the Model the runner drives.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "models/serving/request_source.hpp"
#include "models/serving/serving_system.hpp"
#include "sim_core/hardware/cost_model.hpp"
#include "sim_core/hardware/node_hardware.hpp"
#include "sim_core/run/model.hpp"

namespace mlsim::serving {

struct WorkloadParams {
  enum class Kind { kTrace, kGenerator } kind = Kind::kTrace;
  enum class Format { kAzure, kMooncake, kBurstGpt } format = Format::kAzure;  // kTrace
  std::filesystem::path trace;                                                 // kTrace
  double rate_scale = 1;
  std::int64_t limit = -1;
  GeneratorParams generator;  // kGenerator
};

struct ServingScenario {
  ServingConfig config;
  WorkloadParams workload;
  int gpus = 0;  // GPUs the deployments use
  // The host of each GPU used, in order: deployment by deployment, replica by replica, tp each
  // (a replica's tp GPUs are on one host).
  std::vector<NodeId> gpu_slots;
};

// Reads "system" and "workload" of the scenario root. Relative paths resolve against
// `scenario_dir`. The GPU is the one topology.hardware puts on the hosts the deployments use
// (one type per deployment; deployments may differ), priced by `costs` (the scenario's
// "compute" section). InputError with the JSON path on anything wrong (unknown model, a model
// that does not fit its GPUs, a tier mix that does not sum to 1, more GPUs than the topology has,
// hosts without a GPU, operators no cost provider prices...).
ServingScenario parse_serving_scenario(JsonReader& root, const HardwareCatalog& hardware,
                                       const std::vector<NodeId>& hosts,
                                       const NodeHardware& node_hardware, const CostModel& costs,
                                       const std::filesystem::path& scenario_dir);

// Builds the request source the workload describes (streams named from the seed).
std::unique_ptr<RequestSource> make_request_source(const WorkloadParams& w, std::uint64_t seed);

// Layers of the largest model that make a tier equivalent to family member `member`:
//  "equal_parameters": as many layers as give the member's decoder-layer parameter count
//                      (rounded, at least 1): a tier costs what the member costs per token;
//  "equal_layers":     the member's own depth.
std::int32_t tier_depth(const TransformerShape& member, const TransformerShape& largest,
                        const std::string& rule);

class ServingModel final : public Model {
 public:
  // Builds the serving system (replicas, KV pools) against the run's engine and network.
  ServingModel(ServingScenario scenario, ModelEnv& env);
  void start(ModelEnv& env) override;
  void finish(ModelEnv& env, Results& out) override;
  double progress(const ModelEnv&) const override;

 private:
  ServingScenario scenario_;
  std::unique_ptr<ServingSystem> system_;
};

}  // namespace mlsim::serving
