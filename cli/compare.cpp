// `mlsim compare SCENARIO`: every variant of a scenario, side by side with ratios to the baseline.
#include <fmt/format.h>

#include <iostream>

#include "cli/experiments.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/experiments/atomic_file.hpp"
#include "sim_core/experiments/child_runs.hpp"
#include "sim_core/experiments/compare.hpp"
#include "sim_core/run/scenario.hpp"
#include "sim_core/scenario/json_path.hpp"

namespace mlsim {

CLI::App* add_compare_command(CLI::App& app, CompareArgs& a) {
  auto* cmd = app.add_subcommand(
      "compare", "Run every variant of a scenario and compare their metrics with the baseline's");
  cmd->add_option("scenario", a.scenario, "Scenario file with \"variants\"")->required();
  cmd->add_option("--set", a.sets, "Override a field of every variant: PATH=VALUE, repeatable")
      ->allow_extra_args(false);
  cmd->add_option("--out", a.out,
                  "Folder for compare.json, compare.csv and each variant's results under "
                  "variants/ (default: the scenario's output.dir + /compare)");
  cmd->add_option("--baseline", a.baseline,
                  "Variant the ratios are taken against (default: the scenario's \"baseline\", "
                  "else its first variant)");
  cmd->add_option("-j,--jobs", a.jobs, "Variants run at once")->check(CLI::Range(1, 1024));
  return cmd;
}

int compare_command(const CompareArgs& a, const Registries& registries) {
  ScenarioRequest base_request;
  base_request.file = a.scenario;
  for (const auto& s : a.sets) base_request.overrides.push_back(parse_set_option(s));
  const auto base = load_scenario(base_request, registries);
  if (base.variant_names.empty())
    throw InputError(a.scenario, "variants: the scenario has no variants to compare");

  Comparison c;
  c.scenario = a.scenario;
  c.variants = base.variant_names;
  c.overrides = a.sets;
  c.baseline = a.baseline ? *a.baseline : base.baseline.value_or(base.variant_names.front());
  if (std::find(c.variants.begin(), c.variants.end(), c.baseline) == c.variants.end())
    throw InputError("--baseline", fmt::format("\"{}\" is not one of the scenario's variants ({})",
                                               c.baseline, fmt::join(c.variants, ", ")));

  const std::filesystem::path out =
      a.out ? std::filesystem::path(*a.out) : base.output.dir / "compare";
  std::vector<ChildRun> runs;
  for (const auto& v : c.variants) {
    RunRequest r;
    r.scenario = a.scenario;
    r.variant = v;
    for (const auto& s : base_request.overrides) r.overrides.emplace_back(s.path, s.value);
    experiments::validate_request(r, registries);
    runs.push_back({r, out / "variants" / v});
  }

  const auto failures =
      run_children(experiments::self_program(), runs, a.jobs, [&](std::size_t i, bool ok) {
        fmt::print(stderr, "compare: variant {} {}\n", c.variants[i], ok ? "done" : "FAILED");
      });
  if (!failures.empty()) {
    for (const auto& f : failures)
      fmt::print(stderr, "compare: variant {} failed (exit status {}), log {}:\n{}",
                 c.variants[f.index], f.status, f.log.string(), log_tail(f.log));
    return 1;
  }
  for (std::size_t i = 0; i < runs.size(); ++i)
    c.outcomes[c.variants[i]] = read_run_outcome(runs[i].out_dir);

  write_file_atomically(out / "compare.json", comparison_json(c).dump(2) + "\n");
  write_file_atomically(out / "compare.csv", comparison_csv(c));
  fmt::print("{} ({}): variants against baseline {}\n", base.name, a.scenario, c.baseline);
  std::cout << comparison_table(c);
  fmt::print("results: {} and compare.csv; each variant's results under {}\n",
             (out / "compare.json").string(), (out / "variants").string());
  return 0;
}

}  // namespace mlsim
