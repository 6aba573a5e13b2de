#pragma once
// What the scenario fuzz target does with one input, shared with the corpus replay test
// (tests/scenario/fuzz_corpus_test.cpp), which runs it without libFuzzer.
//
// Input format: optional leading lines "--set PATH=VALUE" and "--variant NAME", then the scenario
// text. The scenario pretends to live in workloads/scenarios/ so that includes of the shipped
// catalogs resolve. Contract: loading and preparing either succeed or throw InputError; a short
// run of what was accepted (bounded by kFuzzRunBudget) either ends or throws LimitError (the
// budget, the clock's range); anything else (another exception, a crash, a sanitizer report, a
// hang) is a bug.
#include <filesystem>
#include <string>
#include <string_view>

#include "sim_core/base/error.hpp"
#include "sim_core/run/registries.hpp"
#include "sim_core/run/runner.hpp"
#include "sim_core/run/scenario.hpp"

namespace mlsim::fuzz {

// Short runs: 2^18 events (the budget is checked every 2^16) and 2 GiB at most.
inline RunBudget fuzz_run_budget() {
  RunBudget b;
  b.max_events = std::uint64_t{1} << 18;
  b.max_memory_bytes = std::int64_t{2} << 30;
  return b;
}

inline LoadedScenario load_fuzz_input(std::string_view input, const Registries& registries,
                                      const std::filesystem::path& source_dir) {
  ScenarioRequest request;
  request.file = source_dir / "workloads/scenarios/fuzz_input.json";
  for (;;) {
    const auto eol = input.find('\n');
    const auto line = input.substr(0, eol);
    if (line.rfind("--set ", 0) == 0) {
      request.overrides.push_back(parse_set_option(line.substr(6)));
    } else if (line.rfind("--variant ", 0) == 0) {
      request.variant = std::string(line.substr(10));
    } else {
      break;
    }
    input = eol == std::string_view::npos ? std::string_view() : input.substr(eol + 1);
  }
  return load_scenario_text(input, request, registries);
}

// Loads, prepares and runs one input within fuzz_run_budget(). Returns whether the run ended
// on its own (false: it stopped at a limit).
inline bool run_fuzz_input(std::string_view input, const Registries& registries,
                           const std::filesystem::path& source_dir) {
  const LoadedScenario scenario = load_fuzz_input(input, registries, source_dir);
  PreparedRun prepared(scenario, registries, fuzz_run_budget());
  try {
    prepared.run();
  } catch (const LimitError&) {
    return false;
  }
  return true;
}

}  // namespace mlsim::fuzz
