#pragma once
// Runs as child `mlsim run` processes: the command line for a RunRequest, whether a run's output
// folder holds a finished result, and reading that result back. A run is finished when its
// summary.json exists: the results writer renames it into place last, atomically.
#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "sim_core/experiments/run_request.hpp"

namespace mlsim {

// `mlsim run SCENARIO --out OUT --quiet [--variant V] [--set path=value]...`
std::vector<std::string> run_command(const std::filesystem::path& mlsim, const RunRequest& r,
                                     const std::filesystem::path& out_dir);

bool run_finished(const std::filesystem::path& out_dir);
// Reads OUT/summary.json. Throws InputError naming the file when it is missing or malformed.
RunOutcome read_run_outcome(const std::filesystem::path& out_dir);

struct ChildRun {
  RunRequest request;
  std::filesystem::path out_dir;
};

struct ChildRunFailure {
  std::size_t index;
  int status;
  std::filesystem::path log;
};

// Runs each request as `mlsim run` with at most `jobs` processes; its output goes to out_dir
// and its terminal output to out_dir + ".log". `on_done(index, ok)` reports progress. Returns
// the failures (non-zero exit status), in list order.
std::vector<ChildRunFailure> run_children(const std::filesystem::path& mlsim,
                                          const std::vector<ChildRun>& runs, int jobs,
                                          const std::function<void(std::size_t, bool)>& on_done);

// The last lines of a log, to show why a child run failed.
std::string log_tail(const std::filesystem::path& log, std::size_t lines = 5);

}  // namespace mlsim
