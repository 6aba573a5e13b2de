#pragma once
// The scenario face of the INA model: reads the "system" and "workload" sections into
// ClusterParams (strictly, with every default written back) and runs an InaCluster on the
// runner's engine. docs/ina.md documents the keys.
#include <filesystem>
#include <memory>

#include "models/ina/cluster_params.hpp"
#include "sim_core/hardware/hardware.hpp"
#include "sim_core/hardware/node_hardware.hpp"
#include "sim_core/network/network_factory.hpp"
#include "sim_core/network/topology.hpp"
#include "sim_core/run/model.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim::ina {

// `topology` needs a host for every worker and parameter server. On the packet data path it must
// be a star (one ToR switch, equal host links, which give the link speed and latency) and the
// scenario must not name a network backend; on the network path the backend must be able to
// host a switch program (`network`). Every worker's host needs a GPU in `node_hardware`
// (topology.hardware): its layer times are the profile's moved there from `profiled_on`.
// `scenario_dir` resolves relative profile paths; `seed` draws Poisson arrivals.
ClusterParams parse_cluster_params(JsonReader& system, JsonReader& workload,
                                   const HardwareCatalog& hardware, const Topology& topology,
                                   const NodeHardware& node_hardware, const NetworkSpec& network,
                                   const std::filesystem::path& scenario_dir, std::uint64_t seed);

std::unique_ptr<Model> make_ina_model(ModelSetup& setup);

}  // namespace mlsim::ina
