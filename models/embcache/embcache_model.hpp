#pragma once
// The "embcache" model's scenario sections and its Model (docs/embcache.md).
#include <memory>

#include "models/embcache/embedding_training.hpp"
#include "sim_core/run/model.hpp"

namespace mlsim::embcache {

struct ModelParams {
  TrainingParams training;
  double cache_ratio = 0.1;
  // The sample source is built at start (it holds a random stream).
  std::function<std::unique_ptr<SampleSource>(std::uint64_t seed)> make_source;
};

// Reads "system" and "workload"; errors name the JSON path.
ModelParams read_embcache_params(JsonReader& system, JsonReader& workload, const Topology& topology,
                                 const std::filesystem::path& scenario_dir);

std::unique_ptr<Model> make_embcache_model(ModelSetup& setup);

}  // namespace mlsim::embcache
