#pragma once
// A scenario, loaded and validated: one JSON file (plus its includes, a variant and --set
// overrides) turned into typed specs for the runner. Every error in the scenario's own sections is
// raised here, as an InputError naming the file and JSON path, before anything is simulated; the
// model's sections ("system", "workload") are checked when the runner builds the model
// (runner.hpp: prepare_run), still before the first event. docs/scenario.md describes the format.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim_core/hardware/cost_model.hpp"
#include "sim_core/hardware/hardware.hpp"
#include "sim_core/network/network_factory.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "sim_core/network/topology_hardware.hpp"
#include "sim_core/run/events.hpp"
#include "sim_core/run/registries.hpp"
#include "sim_core/scenario/json_path.hpp"
#include "sim_core/scenario/scenario_document.hpp"

namespace mlsim {

// At most this many variants in one scenario [assumed: 100x the largest shipped study; `mlsim
// validate` loads each variant, so the limit also bounds its work].
inline constexpr std::size_t kMaxVariants = 4096;

struct RunSpec {
  std::optional<Time> time_limit;  // none: run until no event is left
};

struct OutputSpec {
  std::filesystem::path dir;  // relative paths resolve against the working directory
  bool csv = true;            // write one CSV per time series
  bool trace = false;         // write trace.json, the models' spans (span_trace.hpp)
};

using NetworkMaker = std::function<std::unique_ptr<Network>(Engine&, const Topology&)>;

struct LoadedScenario {
  std::filesystem::path file;  // the main scenario file
  std::string name;
  std::string description;
  std::uint64_t seed = 0;
  std::optional<std::string> variant;  // the variant applied, if any

  HardwareCatalog hardware;
  TopologySpec topology;
  TopologyHardwareSpec topology_hardware;  // topology.hardware
  std::shared_ptr<const CostModel> costs;  // the "compute" section's providers
  NetworkSpec network;
  NetworkMaker make_network;  // from the backend registry, options already validated
  std::string model;          // system.model
  RunSpec run;
  EventsSpec events;  // the `events` section, names not yet looked up
  OutputSpec output;
  std::vector<std::string> variant_names;
  std::optional<std::string> baseline;

  // The merged document with every default the loader took written in. The runner adds the
  // model's defaults and echoes it into summary.json.
  nlohmann::json resolved;
  Provenance provenance;

  std::filesystem::path dir() const { return file.parent_path(); }
};

struct ScenarioRequest {
  std::filesystem::path file;
  std::optional<std::string> variant;
  std::vector<Override> overrides;  // applied after the variant, in order
};

// Reads and validates. Throws InputError (with file() set) for anything wrong.
LoadedScenario load_scenario(const ScenarioRequest& request, const Registries& registries);
// The same from text claiming to live at request.file (the fuzz target and tests use it).
LoadedScenario load_scenario_text(std::string_view text, const ScenarioRequest& request,
                                  const Registries& registries);
// Validation of an already merged document (variant and overrides applied).
LoadedScenario load_scenario_document(ScenarioDocument doc, const std::filesystem::path& file,
                                      std::optional<std::string> variant,
                                      const Registries& registries);

}  // namespace mlsim
