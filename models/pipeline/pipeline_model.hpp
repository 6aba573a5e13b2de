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

std::unique_ptr<Model> make_pipeline_model(ModelSetup& setup);

}  // namespace mlsim::pipeline
