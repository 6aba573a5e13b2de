#pragma once
// The scenario face of the INA model: reads the "system" and "workload" sections into
// ClusterParams (strictly, with every default written back) and runs an InaCluster on the
// runner's engine. docs/ina.md documents the keys.
#include <filesystem>
#include <memory>

#include "models/ina/cluster_params.hpp"
#include "sim_core/hardware.hpp"
#include "sim_core/json_reader.hpp"
#include "sim_core/model.hpp"
#include "sim_core/topology.hpp"

namespace mlsim::ina {

// `topology` must be a star (one ToR switch, equal host links) with a host for every worker and
// parameter server: host links give the link speed and latency. `scenario_dir` resolves relative
// profile paths; `seed` draws Poisson arrivals.
// Profile time -> time on `gpu`: the ratio of the two GPUs' FP32 peaks (catalog datasheet
// figures). FP32 because the PipeDream profiles are FP32 training; it is an upper bound on the
// speed-up of memory-bound layers, which scale with HBM bandwidth instead.
double gpu_compute_scale(const GpuSpec& profiled_on, const GpuSpec& gpu,
                         const std::string& profiled_on_where, const std::string& gpu_where);

ClusterParams parse_cluster_params(JsonReader& system, JsonReader& workload,
                                   const HardwareCatalog& hardware, const Topology& topology,
                                   const std::filesystem::path& scenario_dir, std::uint64_t seed);

std::unique_ptr<Model> make_ina_model(ModelSetup& setup);

}  // namespace mlsim::ina
