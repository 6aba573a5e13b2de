// Speed of the serving model on the reference workload: the whole Azure 2023 conversation
// trace (19,366 requests, one hour) on Llama-2-70B with tensor parallelism 8 (one 8-GPU node),
// loaded and run exactly as `mlsim run workloads/scenarios/serving_azure_conv_70b.json` does.
// Reports simulated seconds per wall second (target >= 1000) and the process's peak resident
// memory (target < 500 MB). Peers: LLMServingSim reports slower than real time.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <chrono>
#include <filesystem>

#include "cli/registry.hpp"
#include "sim_core/run/runner.hpp"
#include "sim_core/run/scenario.hpp"

namespace {

void BM_ServingAzureConv70B(benchmark::State& state, const char* variant) {
  const std::filesystem::path file =
      std::filesystem::path(MLSIM_SOURCE_DIR) / "workloads/scenarios/serving_azure_conv_70b.json";
  const std::filesystem::path trace = std::filesystem::path(MLSIM_SOURCE_DIR) /
                                      "../shared/data/llm_traces/azure_2023/"
                                      "AzureLLMInferenceTrace_conv.csv";
  if (!std::filesystem::exists(trace)) {
    state.SkipWithError("Azure conversation trace not found under ../shared/data");
    return;
  }
  const auto registries = mlsim::make_registries();
  double simulated = 0, wall = 0, events = 0, completed = 0;
  for (auto _ : state) {
    const auto scenario = mlsim::load_scenario({file, std::string(variant), {}}, registries);
    const auto t0 = std::chrono::steady_clock::now();
    mlsim::PreparedRun run(scenario, registries);
    auto out = run.run();
    wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    simulated = out.info.simulated_time.seconds();
    events = static_cast<double>(out.info.events_processed);
    completed = out.results.metrics().at("serving_requests_completed");
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  state.counters["simulated_s"] = simulated;
  state.counters["wall_s"] = wall;
  state.counters["speedup_vs_real_time"] = simulated / wall;
  state.counters["events"] = events;
  state.counters["requests_completed"] = completed;
  state.counters["peak_rss_MB"] = static_cast<double>(usage.ru_maxrss) / 1024.0;
}

BENCHMARK_CAPTURE(BM_ServingAzureConv70B, continuous, "continuous")
    ->Unit(benchmark::kSecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_ServingAzureConv70B, chunked_prefill, "chunked_prefill")
    ->Unit(benchmark::kSecond)
    ->Iterations(1);

}  // namespace
