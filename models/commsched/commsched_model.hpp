#pragma once
// The "commsched" model's scenario sections and its Model (docs/commsched.md).
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "models/commsched/bayesian_tuner.hpp"
#include "models/commsched/offline_run.hpp"
#include "models/commsched/training_job.hpp"
#include "models/commsched/tuners.hpp"
#include "sim_core/hardware/hardware.hpp"
#include "sim_core/run/model.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim::commsched {

enum class Tuner { kStatic, kGridBest, kBayesian, kAutoByte };

struct CommschedParams {
  JobSpec job;
  std::string model_name;
  SchedulerConfig config;  // static, and the start of autobyte
  Tuner tuner = Tuner::kStatic;
  Grid grid;                // grid_best and autobyte
  AutoByteParams autobyte;  // its grid is `grid`
  BayesianTunerParams bo;
  Probe probe;
};

// Reads "system" and "workload"; errors name the JSON path. The topology must give every host
// one link to the network: workers are its first hosts, parameter servers the next ones. Each
// worker's layer times are the profile's (measured on `workload.profiled_on`) moved to the GPU
// `node_hardware` (topology.hardware) puts on its host.
CommschedParams read_commsched_params(JsonReader& system, JsonReader& workload,
                                      const Topology& topology, const HardwareCatalog& hardware,
                                      const NodeHardware& node_hardware,
                                      const std::filesystem::path& scenario_dir);

std::unique_ptr<Model> make_commsched_model(ModelSetup& setup);

}  // namespace mlsim::commsched
