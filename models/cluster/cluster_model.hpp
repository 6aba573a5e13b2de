#pragma once
// The "cluster" model's scenario sections and its Model (docs/cluster.md).
#include <functional>
#include <memory>

#include "models/cluster/cluster_sim.hpp"
#include "sim_core/hardware/hardware.hpp"
#include "sim_core/run/model.hpp"

namespace mlsim::cluster {

struct ModelParams {
  ClusterParams cluster;
  // Built at start (a Poisson source holds a random stream; a trace source an open file).
  std::function<std::unique_ptr<JobSource>(std::uint64_t seed)> make_source;
};

// Reads "system" and "workload"; errors name the JSON path. GPU types come from `hardware`.
ModelParams read_cluster_params(JsonReader& system, JsonReader& workload,
                                const HardwareCatalog& hardware,
                                const std::filesystem::path& scenario_dir);

std::unique_ptr<Model> make_cluster_model(ModelSetup& setup);

}  // namespace mlsim::cluster
