#pragma once
// Shared fixtures for the serving tests: the shipped catalogs, resolved against the source tree.
#include <filesystem>
#include <fstream>

#include "models/serving/model_catalog.hpp"
#include "sim_core/hardware.hpp"
#include "sim_core/json_reader.hpp"

namespace mlsim::serving::fixtures {

inline std::filesystem::path source_dir() {
  return MLSIM_SOURCE_DIR;
}
inline std::filesystem::path shared_data_dir() {
  return MLSIM_SHARED_DATA_DIR;
}

inline ModelCatalog llama2() {
  return ModelCatalog::load(source_dir() / "workloads/models/llama2.json");
}

inline HardwareCatalog gpus() {
  std::ifstream in(source_dir() / "workloads/hardware/gpus.json");
  auto j = nlohmann::json::parse(in);
  JsonReader root(j, "gpus.json");
  auto hw = root.object("hardware");
  HardwareCatalog c;
  c.add_from_json(hw);
  return c;
}

}  // namespace mlsim::serving::fixtures
