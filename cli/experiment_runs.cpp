#include <unistd.h>

#include <chrono>

#include "cli/experiments.hpp"
#include "sim_core/run/runner.hpp"
#include "sim_core/run/scenario.hpp"
#include "sim_core/scenario/json_path.hpp"

namespace mlsim::experiments {

std::filesystem::path self_program() {
  return std::filesystem::canonical("/proc/self/exe");
}

void validate_request(const RunRequest& r, const Registries& registries) {
  ScenarioRequest req;
  req.file = r.scenario;
  req.variant = r.variant;
  for (const auto& s : r.set_arguments()) req.overrides.push_back(parse_set_option(s));
  const auto loaded = load_scenario(req, registries);
  PreparedRun prepared(loaded, registries);
}

ScratchFolder::ScratchFolder(std::optional<std::filesystem::path> keep) {
  if (keep) {
    path_ = *keep;
    remove_ = false;
  } else {
    const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    path_ = std::filesystem::temp_directory_path() /
            ("mlsim-" + std::to_string(::getpid()) + "-" + std::to_string(stamp));
  }
  std::filesystem::create_directories(path_);
}

ScratchFolder::~ScratchFolder() {
  if (!remove_) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace mlsim::experiments
