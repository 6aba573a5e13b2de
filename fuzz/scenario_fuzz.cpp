// libFuzzer target: arbitrary bytes into the scenario loader, the prepare step and a short run
// must only ever produce InputError (or LimitError from the run's budget: fuzz_input.hpp).
// Build: CXX=clang++ cmake -DMLSIM_BUILD_FUZZ=ON ..; make mlsim_scenario_fuzz
// Run:   ./fuzz/mlsim_scenario_fuzz -dict=../fuzz/scenario.dict -max_total_time=60 CORPUS_DIR
#include <cstddef>
#include <cstdint>

#include "cli/registry.hpp"
#include "fuzz/fuzz_input.hpp"
#include "sim_core/base/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Built once: registries are immutable after construction, so inputs cannot affect each other.
  static const mlsim::Registries registries = mlsim::make_registries();
  try {
    mlsim::fuzz::run_fuzz_input(std::string_view(reinterpret_cast<const char*>(data), size),
                                registries, MLSIM_SOURCE_DIR);
  } catch (const mlsim::InputError&) {
    // Expected for almost every input. Any other exception escapes and is reported as a crash.
  }
  return 0;
}
