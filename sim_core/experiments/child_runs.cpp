#include "sim_core/experiments/child_runs.hpp"

#include <algorithm>
#include <deque>
#include <fstream>
#include <sstream>

#include "sim_core/base/error.hpp"
#include "sim_core/experiments/process_pool.hpp"

namespace mlsim {

std::vector<std::string> run_command(const std::filesystem::path& mlsim, const RunRequest& r,
                                     const std::filesystem::path& out_dir) {
  // --quiet: the child's terminal output goes to a log nobody reads unless the run fails.
  std::vector<std::string> argv{mlsim.string(),   "run",    r.scenario.string(), "--out",
                                out_dir.string(), "--quiet"};
  if (r.variant) {
    argv.push_back("--variant");
    argv.push_back(*r.variant);
  }
  for (const auto& s : r.set_arguments()) {
    argv.push_back("--set");
    argv.push_back(s);
  }
  return argv;
}

bool run_finished(const std::filesystem::path& out_dir) {
  return std::filesystem::is_regular_file(out_dir / "summary.json");
}

RunOutcome read_run_outcome(const std::filesystem::path& out_dir) {
  const auto file = out_dir / "summary.json";
  std::ifstream in(file);
  if (!in) throw InputError(file.string(), "missing: the run did not finish");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json summary;
  try {
    summary = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(file.string(), std::string("not valid JSON: ") + e.what());
  }
  return outcome_from_summary(summary, file.string());
}

std::vector<ChildRunFailure> run_children(const std::filesystem::path& mlsim,
                                          const std::vector<ChildRun>& runs, int jobs,
                                          const std::function<void(std::size_t, bool)>& on_done) {
  std::vector<ChildCommand> commands;
  for (const auto& r : runs) {
    auto log = r.out_dir;
    log += ".log";
    commands.push_back({run_command(mlsim, r.request, r.out_dir), log});
  }
  std::vector<ChildRunFailure> failures;
  run_commands(commands, jobs, [&](std::size_t i, int status) {
    if (status != 0) failures.push_back({i, status, commands[i].log});
    if (on_done) on_done(i, status == 0);
  });
  std::sort(failures.begin(), failures.end(),
            [](const auto& a, const auto& b) { return a.index < b.index; });
  return failures;
}

std::string log_tail(const std::filesystem::path& log, std::size_t lines) {
  std::ifstream in(log);
  std::deque<std::string> last;
  for (std::string line; std::getline(in, line);) {
    last.push_back(line);
    if (last.size() > lines) last.pop_front();
  }
  std::string out;
  for (const auto& l : last) out += "    " + l + "\n";
  return out;
}

}  // namespace mlsim
