#pragma once
// `mlsim compare`, `mlsim sweep`, `mlsim search` and `mlsim check`: experiments made of several
// runs. Each run is a child `mlsim run` of this same program (so runs use both cores, an
// interrupted experiment leaves only whole results behind, and a sweep's job list holds the very
// commands `-j N` runs); inputs are validated in-process first, so a bad input exits with status 2
// before anything runs.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "sim_core/experiments/run_request.hpp"
#include "sim_core/run/registries.hpp"

namespace mlsim {

struct CompareArgs {
  std::string scenario;
  std::vector<std::string> sets;
  std::optional<std::string> out;  // default: <output.dir>/compare
  std::optional<std::string>
      baseline;  // default: the scenario's "baseline", else its first variant
  int jobs = 1;
};

struct SweepArgs {
  std::string file;
  std::optional<std::string> out;  // default: results/sweeps/<file stem>
  int jobs = 1;
  std::optional<std::string> emit_jobs;  // write a job list instead of running
  std::optional<std::string> mlsim;      // the program named in the job list
  bool collect = false;
};

struct CheckArgs {
  std::string claims = "results/claims.json";
  std::vector<std::string> only;
  int jobs = 1;
  std::optional<std::string> keep;  // keep the runs' results here instead of a temporary folder
  bool record = false;              // write each figure into the claims' "recorded"
};

struct SearchArgs {
  std::string file;
  std::optional<std::string> out;  // default: results/searches/<file stem>
  int jobs = 1;
};

CLI::App* add_compare_command(CLI::App& app, CompareArgs& args);
CLI::App* add_sweep_command(CLI::App& app, SweepArgs& args);
CLI::App* add_check_command(CLI::App& app, CheckArgs& args);
CLI::App* add_search_command(CLI::App& app, SearchArgs& args);

int compare_command(const CompareArgs& args, const Registries& registries);
int sweep_command(const SweepArgs& args, const Registries& registries);
int check_command(const CheckArgs& args, const Registries& registries);
int search_command(const SearchArgs& args, const Registries& registries);

// Shared by the three (cli/experiment_runs.cpp).
namespace experiments {
// This program's own path, to start child runs of it.
std::filesystem::path self_program();
// Loads and builds (without simulating) the scenario a request names: every input error
// surfaces here, as an InputError, before any child runs.
void validate_request(const RunRequest& r, const Registries& registries);
// A folder removed on destruction unless kept.
class ScratchFolder {
 public:
  explicit ScratchFolder(std::optional<std::filesystem::path> keep);
  ~ScratchFolder();
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  bool remove_ = true;
};
}  // namespace experiments

}  // namespace mlsim
