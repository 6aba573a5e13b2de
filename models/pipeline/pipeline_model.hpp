#pragma once
// The "pipeline" model's scenario sections and its Model (docs/pipeline.md).
#include <memory>

#include "models/pipeline/pipeline_training.hpp"
#include "sim_core/run/model.hpp"

namespace mlsim::pipeline {

// Reads "system" and "workload"; errors name the JSON path.
TrainingParams read_training_params(JsonReader& system, JsonReader& workload,
                                    const Topology& topology,
                                    const std::filesystem::path& scenario_dir);

// Stage s on host s of the topology: fills hosts, host_links and link_latency. InputError when a
// host has not exactly one link to the network.
void place_stages(TrainingParams& p, const Topology& topology, std::size_t stages);

std::unique_ptr<Model> make_pipeline_model(ModelSetup& setup);

}  // namespace mlsim::pipeline
