#pragma once
// Runs a scenario given as JSON through the whole loader and runner (strict reading, the
// `events` section, prepare, run), with the core backends and the models a test registers.
// Header-only (tests/support builds no binary).
#include <filesystem>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "sim_core/base/error.hpp"
#include "sim_core/run/runner.hpp"
#include "sim_core/run/scenario.hpp"

namespace mlsim::test {

// The scenario claims to live in workloads/scenarios/, so its relative paths (profiles, traces)
// resolve as the shipped scenarios' do.
inline std::filesystem::path scenario_home() {
  return std::filesystem::path(MLSIM_SOURCE_DIR) / "workloads/scenarios/test.json";
}

inline Registries registries_with(const std::function<void(ModelRegistry&)>& register_model) {
  Registries r;
  register_core_backends(r.backends);
  register_model(r.models);
  return r;
}

inline RunOutput run_json(const nlohmann::json& doc, const Registries& registries,
                          const std::filesystem::path& file = scenario_home()) {
  const LoadedScenario s =
      load_scenario_text(doc.dump(), ScenarioRequest{file, {}, {}}, registries);
  return run_scenario(s, registries);
}

// The InputError message that loading and preparing the scenario raises, or "no error".
inline std::string prepare_error(const nlohmann::json& doc, const Registries& registries,
                                 const std::filesystem::path& file = scenario_home()) {
  try {
    const LoadedScenario s =
        load_scenario_text(doc.dump(), ScenarioRequest{file, {}, {}}, registries);
    PreparedRun prepared(s, registries);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace mlsim::test
