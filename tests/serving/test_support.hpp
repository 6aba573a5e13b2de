#pragma once
// Shared fixtures for the serving tests: the shipped catalogs, resolved against the source tree.
#include <filesystem>
#include <fstream>
#include <string>

#include "models/serving/model_catalog.hpp"
#include "sim_core/hardware/hardware.hpp"
#include "sim_core/scenario/json_reader.hpp"

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

// A GPU with round numbers for hand-computed timings: 100 TFLOP/s fp16, 1 TB/s HBM, 80 GiB.
inline GpuSpec toy_gpu() {
  GpuSpec g;
  g.name = "toy";
  g.peak[Dtype::kFp16] = FlopRate{100e12};
  g.hbm_bandwidth = Bandwidth{1e12};
  g.hbm_capacity = Bytes{80LL << 30};
  return g;
}

// A small transformer (hidden 512, 8 heads, ffn 1024, vocabulary 1000) of `layers` layers.
inline TransformerShape toy_transformer(int layers, std::string name) {
  TransformerShape m;
  m.name = std::move(name);
  m.layers = layers;
  m.hidden = 512;
  m.heads = 8;
  m.kv_heads = 8;
  m.ffn = 1024;
  m.vocab = 1000;
  return m;
}

}  // namespace mlsim::serving::fixtures
