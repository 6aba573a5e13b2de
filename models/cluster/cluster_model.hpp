#pragma once
// The "cluster" model's scenario sections and its Model (docs/cluster.md).
#include <functional>
#include <memory>

#include "models/cluster/cluster_sim.hpp"
#include "models/cluster/communication_mode.hpp"
#include "sim_core/hardware/hardware.hpp"
#include "sim_core/hardware/node_hardware.hpp"
#include "sim_core/network/topology.hpp"
#include "sim_core/run/model.hpp"

namespace mlsim::cluster {

struct ModelParams {
  ClusterParams cluster;
  // Built at start (a Poisson source holds a random stream; a trace source an open file).
  std::function<std::unique_ptr<JobSource>(std::uint64_t seed)> make_source;
  // The detailed mode (system.detail "communication"): the training models the placed jobs run
  // on the training core over the run's network; null in the job-level mode.
  std::shared_ptr<const CommunicationParams> communication;
};

// Reads "system" and "workload"; errors name the JSON path. The node pool is the topology's
// hosts (pool node i is host i) with the GPUs `node_hardware` (topology.hardware) gives them;
// the reference GPU comes from `hardware`.
ModelParams read_cluster_params(JsonReader& system, JsonReader& workload,
                                const HardwareCatalog& hardware, const Topology& topology,
                                const NodeHardware& node_hardware,
                                const std::filesystem::path& scenario_dir);

std::unique_ptr<Model> make_cluster_model(ModelSetup& setup);

}  // namespace mlsim::cluster
