#pragma once
// What the scenario fuzz target does with one input, shared with the corpus replay test
// (tests/scenario/fuzz_corpus_test.cpp), which runs it without libFuzzer.
//
// Input format: optional leading lines "--set PATH=VALUE" and "--variant NAME", then the scenario
// text. The scenario pretends to live in workloads/scenarios/ so that includes of the shipped
// catalogs resolve. Contract: the loader either returns or throws InputError; anything else
// (another exception, a crash, a sanitizer report, a hang) is a bug.
#include <filesystem>
#include <string>
#include <string_view>

#include "sim_core/run/registries.hpp"
#include "sim_core/run/scenario.hpp"

namespace mlsim::fuzz {

inline void load_fuzz_input(std::string_view input, const Registries& registries,
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
  load_scenario_text(input, request, registries);
}

}  // namespace mlsim::fuzz
