// Strict JSON reading (sim_core/scenario/strict_json.hpp) of scenario-shaped documents from 1 to
// 64 MiB, the scenario size cap: an array of small objects (a job list; nlohmann's
// parse-with-callback was quadratic on it: 7 s at 4 MB, over a minute at 63 MB) and an object of
// many variants. Bytes/s and wall time per size show whether parsing stays linear; issue 17 asks
// for a 64 MiB scenario in under 2 s. The plain nlohmann::json::parse of the same text (no
// duplicate-key or nesting checks) is the reference, and the parse with a callback used before
// shows the quadratic growth at 1 and 2 MiB.
#include <benchmark/benchmark.h>

#include <fmt/format.h>

#include <cstdint>
#include <string>

#include "sim_core/scenario/strict_json.hpp"

namespace {

// {"workload": {"jobs": [{"id": 0, "model": "resnet50", ...}, ...]}} of about `bytes` bytes.
std::string job_list(std::size_t bytes) {
  std::string s = R"({"name": "bench", "workload": {"jobs": [)";
  for (std::int64_t i = 0; s.size() < bytes; ++i)
    s += fmt::format(
        R"({}{{"id": {}, "model": "resnet50", "workers": 4, "iterations": 20, "submit": "{}s", "scale": 1.25}})",
        i == 0 ? "" : ",", i, i);
  return s + "]}}";
}

// {"variants": {"v0": {"system.bytes": "1MiB"}, ...}} of about `bytes` bytes.
std::string many_variants(std::size_t bytes) {
  std::string s = R"({"name": "bench", "variants": {)";
  for (std::int64_t i = 0; s.size() < bytes; ++i)
    s += fmt::format(R"({}"v{}": {{"system.bytes": "{}KiB"}})", i == 0 ? "" : ",", i, i % 1024);
  return s + "}}";
}

void run(benchmark::State& state, const std::string& text, bool strict) {
  for (auto _ : state) {
    auto doc = strict ? mlsim::parse_strict_json(text, "bench.json") : nlohmann::json::parse(text);
    benchmark::DoNotOptimize(doc);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  state.counters["MiB"] = static_cast<double>(text.size()) / (1 << 20);
}

// The parser before issue 17: nlohmann's parse with a callback (here an empty one).
void BM_NlohmannCallbackJobList(benchmark::State& state) {
  const auto text = job_list(static_cast<std::size_t>(state.range(0)) << 20);
  for (auto _ : state) {
    auto doc = nlohmann::json::parse(
        text, [](int, nlohmann::json::parse_event_t, nlohmann::json&) { return true; });
    benchmark::DoNotOptimize(doc);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
}

void BM_StrictJobList(benchmark::State& state) {
  run(state, job_list(static_cast<std::size_t>(state.range(0)) << 20), true);
}
void BM_StrictVariants(benchmark::State& state) {
  run(state, many_variants(static_cast<std::size_t>(state.range(0)) << 20), true);
}
void BM_NlohmannJobList(benchmark::State& state) {
  run(state, job_list(static_cast<std::size_t>(state.range(0)) << 20), false);
}

}  // namespace

BENCHMARK(BM_StrictJobList)->RangeMultiplier(2)->Range(1, 64)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_StrictVariants)->RangeMultiplier(4)->Range(1, 64)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_NlohmannCallbackJobList)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_NlohmannJobList)->Arg(1)->Arg(64)->Unit(benchmark::kMillisecond);
