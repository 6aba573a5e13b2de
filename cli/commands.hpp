#pragma once
// The subcommands of `mlsim`. Each returns the process exit status or throws: InputError for
// bad input (main maps it to status 2), anything else for internal errors (status 1).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "sim_core/run/registries.hpp"

namespace mlsim {

struct ScenarioArgs {
  std::string scenario;
  std::vector<std::string> sets;  // "path=value"
  std::optional<std::string> variant;
  std::optional<std::uint64_t> max_events;  // --max-events: the run's event budget
  std::optional<std::string> max_memory;    // --max-memory: its memory budget, a size ("8GiB")
};

struct RunArgs {
  ScenarioArgs input;
  std::optional<std::string> out;  // overrides output.dir
  bool quiet = false;
};

int run_command(const RunArgs& args, const Registries& registries);
// Loads and builds the scenario without simulating; without --variant, also every variant.
int validate_command(const ScenarioArgs& args, const Registries& registries);
// Models with their registered policies, backends with their descriptions, hardware in the
// catalogs of `catalog_dir`, LLM shapes in the catalogs of `llm_catalog_dir`.
int list_command(const std::filesystem::path& catalog_dir,
                 const std::filesystem::path& llm_catalog_dir, const Registries& registries);

}  // namespace mlsim
