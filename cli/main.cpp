// mlsim: run, validate and list scenarios. Exit status: 0 ok, 2 bad input (nothing written),
// 1 a run stopped at a limit (clock range, budget; nothing written) or an internal error.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <exception>

#include "cli/commands.hpp"
#include "cli/experiments.hpp"
#include "cli/registry.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/base/temporary_files.hpp"
#include "sim_core/base/version.hpp"

namespace {

constexpr int kInputErrorStatus = 2;
constexpr int kInternalErrorStatus = 1;

void add_scenario_options(CLI::App& cmd, mlsim::ScenarioArgs& a) {
  cmd.add_option("scenario", a.scenario, "Scenario file (JSON)")->required();
  cmd.add_option("--set", a.sets,
                 "Override a field: PATH=VALUE (VALUE is JSON, or a plain string), repeatable")
      ->allow_extra_args(false);
  cmd.add_option("--variant", a.variant, "Apply one of the scenario's named variants first");
  cmd.add_option("--max-events", a.max_events,
                 "Event budget: refuse a run estimated above it, stop one that passes it "
                 "(default 1e10)");
  cmd.add_option("--max-memory", a.max_memory,
                 "Memory budget (a size, e.g. 8GiB): refuse a run estimated above it, stop one "
                 "whose resident memory passes it (default 4GiB)");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mlsim: a discrete-event simulator for ML-systems research"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(mlsim::version()));

  mlsim::RunArgs run;
  auto* run_cmd = app.add_subcommand("run", "Run a scenario and write its results");
  add_scenario_options(*run_cmd, run.input);
  run_cmd->add_option("--out", run.out, "Results folder (default: the scenario's output.dir)");
  run_cmd->add_flag("--quiet", run.quiet, "Print nothing on success");

  mlsim::ScenarioArgs validate;
  auto* validate_cmd =
      app.add_subcommand("validate", "Check a scenario (and its variants) without running it");
  add_scenario_options(*validate_cmd, validate);

  std::string catalog_dir = std::string(MLSIM_SOURCE_DIR) + "/workloads/hardware";
  auto* list_cmd = app.add_subcommand("list", "List models, network backends and hardware");
  list_cmd->add_option("--catalog", catalog_dir, "Folder of hardware catalog files");
  std::string llm_catalog_dir = std::string(MLSIM_SOURCE_DIR) + "/workloads/models";
  list_cmd->add_option("--models", llm_catalog_dir, "Folder of LLM model catalog files");

  mlsim::CompareArgs compare;
  auto* compare_cmd = mlsim::add_compare_command(app, compare);
  mlsim::SweepArgs sweep;
  auto* sweep_cmd = mlsim::add_sweep_command(app, sweep);
  mlsim::CheckArgs check;
  auto* check_cmd = mlsim::add_check_command(app, check);
  mlsim::SearchArgs search;
  auto* search_cmd = mlsim::add_search_command(app, search);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int status = app.exit(e);
    return status == 0 ? 0 : kInputErrorStatus;
  }

  // An interrupted run or sweep removes the temporary files it was writing.
  mlsim::install_temporary_file_cleanup();
  try {
    const auto registries = mlsim::make_registries();
    if (*run_cmd) return mlsim::run_command(run, registries);
    if (*validate_cmd) return mlsim::validate_command(validate, registries);
    if (*list_cmd) return mlsim::list_command(catalog_dir, llm_catalog_dir, registries);
    if (*compare_cmd) return mlsim::compare_command(compare, registries);
    if (*sweep_cmd) return mlsim::sweep_command(sweep, registries);
    if (*check_cmd) return mlsim::check_command(check, registries);
    if (*search_cmd) return mlsim::search_command(search, registries);
  } catch (const mlsim::InputError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return kInputErrorStatus;
  } catch (const mlsim::LimitError& e) {
    // Not a bug: the input asks for more than a run may do (the clock's range, a budget).
    fmt::print(stderr, "error: the run stopped, nothing was written: {}\n", e.what());
    return kInternalErrorStatus;
  } catch (const std::exception& e) {
    fmt::print(stderr, "internal error: {}\n", e.what());
    return kInternalErrorStatus;
  }
  return kInternalErrorStatus;
}
