#pragma once
// The "pipeline" model's scenario sections and its Model (docs/pipeline.md).
#include <memory>

#include "models/pipeline/pipeline_training.hpp"
#include "sim_core/hardware/hardware.hpp"
#include "sim_core/hardware/node_hardware.hpp"
#include "sim_core/run/model.hpp"

namespace mlsim::pipeline {

// Reads "system" and "workload" (`profiled_on` from `hardware`, which must outlive the params);
// errors name the JSON path.
TrainingParams read_training_params(JsonReader& system, JsonReader& workload,
                                    const Topology& topology, const HardwareCatalog& hardware,
                                    const std::filesystem::path& scenario_dir);

// InputError unless every host of the job has a GPU (topology.hardware) with an FP32 rate, as the
// profile's GPU (named at `profiled_on_where`) must have: the profile is FP32 training.
void check_stage_gpus(const TrainingParams& p, const NodeHardware& hardware,
                      const std::string& profiled_on_where);

// With system.memory.constraint on: each host's GPU memory (system.memory.capacity, or the
// host's GPU's hbm_capacity from the catalog) into p.memory, and an InputError (at
// system.memory.capacity when given, else at system.memory.constraint, naming the GPUs) when no
// configuration of the job has every stage fit: under PipeDream's check for the pipedream
// policy, under mlsim's accounting for autopipe (stage_memory.hpp). Nothing without the
// constraint.
void apply_memory_limit(TrainingParams& p, const NodeHardware& hardware, const JsonReader& system);

// The job on the topology's first `hosts` hosts, in order (stages take consecutive runs of them):
// fills hosts, host_links and the latencies. InputError when a host has not exactly one link to
// the network.
void place_stages(TrainingParams& p, const Topology& topology, std::size_t hosts);

std::unique_ptr<Model> make_pipeline_model(ModelSetup& setup);

}  // namespace mlsim::pipeline
