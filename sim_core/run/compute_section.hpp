#pragma once
// The scenario's "compute" section: which cost providers price GPU work, in order
// (docs/hardware.md, docs/scenario.md):
//
//   "compute": {"providers": ["profiles", "roofline"],
//               "profiles": {"vidur": "../../../shared/data/gpu_profiles/vidur",
//                            "gpus": {"a100": "A100-SXM4-80GB", "h100": "H100-SXM5-80GB"}},
//               "roofline": "../hardware/roofline_calibration.json",
//               "scale_from": "A100-SXM4-80GB"}
//
// Without the section the cost model has no provider: fixed and profiled work still run
// (profiled work scales between catalog GPUs), operators do not.
#include <filesystem>
#include <memory>

#include "sim_core/hardware/cost_model.hpp"
#include "sim_core/hardware/hardware.hpp"

namespace mlsim {

class JsonReader;

// Reads the section and loads the providers' files (paths relative to `scenario_dir`).
// InputError naming the JSON path for anything wrong.
std::shared_ptr<const CostModel> parse_compute_section(JsonReader& compute,
                                                       const HardwareCatalog& catalog,
                                                       const std::filesystem::path& scenario_dir);

}  // namespace mlsim
