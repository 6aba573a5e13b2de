// `mlsim search SEARCH.json`: the largest load each configuration sustains under the constraints
// (bisection, one child `mlsim run` per point, every configuration's next point in parallel),
// and the cheapest configuration for a target load (sim_core/experiments/search.hpp).
#include <fmt/format.h>

#include <cmath>
#include <iostream>

#include "cli/experiments.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/experiments/atomic_file.hpp"
#include "sim_core/experiments/child_runs.hpp"
#include "sim_core/experiments/folder_lock.hpp"
#include "sim_core/experiments/search.hpp"

namespace mlsim {

CLI::App* add_search_command(CLI::App& app, SearchArgs& a) {
  auto* cmd = app.add_subcommand(
      "search",
      "Find each configuration's capacity (the largest load meeting the constraints, by "
      "bisection) and the cheapest configuration for a target load");
  cmd->add_option("search", a.file, "Search file (docs/sweeps.md, \"mlsim search\")")->required();
  cmd->add_option("--out", a.out,
                  "Folder for search.csv, search.json and every run under runs/ (default: "
                  "results/searches/<search file name>); finished runs are reused");
  cmd->add_option("-j,--jobs", a.jobs, "Runs at once")->check(CLI::Range(1, 1024));
  return cmd;
}

int search_command(const SearchArgs& a, const Registries& registries) {
  const SearchSpec spec = read_search_file(a.file);
  const std::filesystem::path out =
      a.out ? std::filesystem::path(*a.out)
            : std::filesystem::path("results/searches") / std::filesystem::path(a.file).stem();
  // Both ends of the range for every configuration are checked before anything runs.
  for (const SweepPoint& p : expand_sweep(spec.configurations))
    for (double load : {spec.low, spec.high}) {
      RunRequest r = p.request;
      r.overrides.emplace_back(spec.load_path, load);
      try {
        experiments::validate_request(r, registries);
      } catch (const InputError& e) {
        throw InputError(e.file(), e.path(),
                         fmt::format("{} (in configuration {} at {} = {})", e.message(), p.index,
                                     spec.load_path, load));
      }
    }

  const FolderLock lock(out, "--out");
  int round = 0;
  const BatchRunner run_batch = [&](const std::vector<RunRequest>& batch) {
    ++round;
    std::vector<ChildRun> runs;
    std::vector<std::size_t> to_run;
    std::vector<std::filesystem::path> dirs;
    for (const RunRequest& r : batch) {
      // A run's folder is named by its configuration and load, so a rerun reuses it.
      dirs.push_back(out / "runs" / run_id(r));
      if (!run_finished(dirs.back())) {
        to_run.push_back(dirs.size() - 1);
        runs.push_back({r, dirs.back()});
      }
    }
    const auto failures =
        run_children(experiments::self_program(), runs, a.jobs, [](std::size_t, bool) {});
    if (!failures.empty()) {
      const auto& f = failures.front();
      throw std::runtime_error(fmt::format("search: a run failed (exit status {}), log {}:\n{}",
                                           f.status, f.log.string(), log_tail(f.log)));
    }
    fmt::print(stderr, "search: round {}: {} runs ({} reused)\n", round, batch.size(),
               batch.size() - runs.size());
    std::vector<RunOutcome> outcomes;
    for (const auto& d : dirs) outcomes.push_back(read_run_outcome(d));
    return outcomes;
  };
  const SearchResult result = run_search(spec, run_batch);

  write_file_atomically(out / "search.csv", search_csv(spec, result));
  write_file_atomically(out / "search.json", search_json(spec, result).dump(2) + "\n");
  fmt::print("capacity = the largest {} meeting every constraint ({} to {}, within {}%)\n",
             spec.load_path, spec.low, spec.high, spec.tolerance * 100);
  std::cout << search_table(spec, result);
  fmt::print("results: {} and search.json; runs under {}\n", (out / "search.csv").string(),
             (out / "runs").string());
  return 0;
}

}  // namespace mlsim
