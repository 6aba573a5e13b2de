// Speed of the serving model on the reference workload: the whole Azure 2023 conversation
// trace (19,366 requests, one hour) on Llama-2-70B with tensor parallelism 8 (one 8-GPU node),
// loaded and run exactly as `mlsim run workloads/scenarios/serving_azure_conv_70b.json` does.
// Reports simulated seconds per wall second (target >= 1000) and the process's peak resident
// memory (target < 500 MB). Peers: LLMServingSim reports slower than real time.
// BM_ServingRouterOverload: the router's cost per arrival under overload (issue 15: "router cost
// O(log n) per arrival, a benchmark at 10x overload shows it"), below.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>

#include "cli/registry.hpp"
#include "models/serving/load_index.hpp"
#include "models/serving/request_source.hpp"
#include "sim_core/run/runner.hpp"
#include "sim_core/run/scenario.hpp"

namespace {

// Both benchmarks replay the Azure conversation trace from ../shared/data; without it they skip
// (nothing returned).
std::optional<std::filesystem::path> azure_trace(benchmark::State& state) {
  std::filesystem::path trace = std::filesystem::path(MLSIM_SOURCE_DIR) /
                                "../shared/data/llm_traces/azure_2023/"
                                "AzureLLMInferenceTrace_conv.csv";
  if (std::filesystem::exists(trace)) return trace;
  state.SkipWithError("Azure conversation trace not found under ../shared/data");
  return std::nullopt;
}

double process_cpu_seconds();

// One whole shipped scenario variant, loaded and run as `mlsim run FILE --variant V` does:
// simulated seconds per wall second and per CPU second of the run (preparation included, loading
// excluded; the machine is shared, so the CPU figure is the steadier one), and the process's
// peak resident memory.
void run_scenario(benchmark::State& state, const std::filesystem::path& file, const char* variant,
                  std::vector<mlsim::Override> overrides = {}) {
  const auto registries = mlsim::make_registries();
  double simulated = 0, wall = 0, cpu = 0, events = 0, completed = 0;
  for (auto _ : state) {
    const auto scenario = mlsim::load_scenario({file, std::string(variant), overrides}, registries);
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = process_cpu_seconds();
    mlsim::PreparedRun run(scenario, registries);
    auto out = run.run();
    cpu = process_cpu_seconds() - c0;
    wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    simulated = out.info.simulated_time.seconds();
    events = static_cast<double>(out.info.events_processed);
    completed = out.results.metrics().at("serving_requests_completed");
    if (out.results.metrics().contains("serving_prefix_hit_rate"))
      state.counters["prefix_hit_rate"] = out.results.metrics().at("serving_prefix_hit_rate");
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  state.counters["simulated_s"] = simulated;
  state.counters["wall_s"] = wall;
  state.counters["cpu_s"] = cpu;
  state.counters["speedup_vs_real_time"] = simulated / wall;
  state.counters["speedup_per_cpu_s"] = simulated / cpu;
  state.counters["events"] = events;
  state.counters["requests_completed"] = completed;
  state.counters["peak_rss_MB"] = static_cast<double>(usage.ru_maxrss) / 1024.0;
}

void BM_ServingAzureConv70B(benchmark::State& state, const char* variant) {
  if (!azure_trace(state)) return;
  run_scenario(
      state,
      std::filesystem::path(MLSIM_SOURCE_DIR) / "workloads/scenarios/serving_azure_conv_70b.json",
      variant);
}

// Issue 15: "the Azure conversation trace stays at least 5,000x real time and under 100 MB with
// prefix caching on". The Azure trace carries no prompt content (timestamp and two lengths), so
// nothing can identify shared blocks and the model refuses prefix caching on it. What this measures
// instead is the cost of the mechanism on the same arrivals and lengths: the trace rewritten once,
// before timing, in Mooncake's format (arrivals rounded to the millisecond, which that format
// keeps) with a content id of its own for every 512-token block of every prompt, then run with
// prefix caching on. No block ever matches (hit rate 0), so every block is looked up, inserted,
// held and, when the pool is short, evicted: the cache's most expensive case, not a hit-rate
// study.
void BM_ServingAzureConv70BPrefixCacheOn(benchmark::State& state, const char* variant) {
  const std::optional<std::filesystem::path> trace = azure_trace(state);
  if (!trace) return;
  const std::filesystem::path rewritten =
      std::filesystem::temp_directory_path() /
      ("mlsim_bench_azure_conv_unique_blocks_" + std::to_string(::getpid()) + ".jsonl");
  {
    mlsim::serving::AzureTraceSource source(*trace);
    std::ofstream out(rewritten);
    std::uint64_t next_hash = 0;
    constexpr std::int32_t kBlock = mlsim::serving::MooncakeTraceSource::kBlockTokens;
    while (const auto r = source.next()) {
      out << "{\"timestamp\": " << std::llround(r->arrival.seconds() * 1e3)
          << ", \"input_length\": " << r->prompt_tokens
          << ", \"output_length\": " << r->output_tokens << ", \"hash_ids\": [";
      const std::int32_t blocks = (r->prompt_tokens + kBlock - 1) / kBlock;
      for (std::int32_t b = 0; b < blocks; ++b) out << (b ? ", " : "") << next_hash++;
      out << "]}\n";
    }
  }
  run_scenario(
      state,
      std::filesystem::path(MLSIM_SOURCE_DIR) / "workloads/scenarios/serving_azure_conv_70b.json",
      variant,
      {{"workload.format", "mooncake", "--set workload.format"},
       {"workload.trace", rewritten.string(), "--set workload.trace"},
       {"system.prefix_caching", true, "--set system.prefix_caching"}});
  std::filesystem::remove(rewritten);
}

// Issue 15: "the Mooncake synthetic trace with prefix caching at least 1,000x real time". The
// shipped study (workloads/serving/mooncake_prefix_cache.json: 3,993 requests over 1,022 s, eight
// Llama-3.1-8B replicas, chunked prefill), one variant per run.
void BM_ServingMooncakePrefix(benchmark::State& state, const char* variant) {
  const std::filesystem::path trace = std::filesystem::path(MLSIM_SOURCE_DIR) /
                                      "../shared/data/llm_traces/mooncake/synthetic_trace.jsonl";
  if (!std::filesystem::exists(trace)) {
    state.SkipWithError("Mooncake trace not found under ../shared/data");
    return;
  }
  run_scenario(
      state,
      std::filesystem::path(MLSIM_SOURCE_DIR) / "workloads/serving/mooncake_prefix_cache.json",
      variant);
}

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// The whole Azure conversation trace, its arrivals compressed, on n Llama-2-7B TP 1 replicas
// (the benchmark's argument: 8, 64 or 512; n/8 A100 nodes of mfs_llama2.json's separate variant,
// the family and tier mix set to the 7B alone), routed by `router`. Eight replicas serve about
// 39 requests/s (makespan ~490 s whenever they are saturated), the trace offers 5.4/s:
// `rate_scale_per_8` 72 packs its 3,510 s of arrivals into 48.8 s, about 10x what eight replicas
// serve (queues of thousands of requests per replica), 4 about 0.55x. The rate is scaled with
// the fleet (x n/8) so that every fleet is as overloaded. Reports the CPU time of the simulation
// alone (preparation, which reads the trace once, excluded) per arrival. The router's own cost is
// the difference from round robin (O(1) per arrival) at the same fleet size: with least
// outstanding tokens kept in an indexed heap (load_index.hpp) it is O(log n) per arrival; with
// the scan it replaced it was O(n) (docs/serving.md, Speed).
void BM_ServingRouterOverload(benchmark::State& state, const char* router,
                              double rate_scale_per_8) {
  const std::filesystem::path file =
      std::filesystem::path(MLSIM_SOURCE_DIR) / "workloads/scenarios/mfs_llama2.json";
  const std::optional<std::filesystem::path> trace = azure_trace(state);
  if (!trace) return;
  const auto replicas = state.range(0);
  const auto registries = mlsim::make_registries();
  mlsim::ScenarioRequest request{file, std::string("separate"), {}};
  const std::vector<std::pair<std::string, nlohmann::json>> sets = {
      {"topology.hosts", (replicas + 7) / 8},
      {"system.separate", nlohmann::json::array({nlohmann::json{
                              {"model", "llama-2-7b"}, {"tp", 1}, {"replicas", replicas}}})},
      {"system.family", nlohmann::json::array({"llama-2-7b"})},
      {"system.router", router},
      {"workload.tier_mix", nlohmann::json::array({1.0})},
      {"workload.source", "trace"},
      {"workload.trace", trace->string()},
      {"workload.rate_scale", rate_scale_per_8 * static_cast<double>(replicas) / 8.0}};
  for (const auto& [path, value] : sets)
    request.overrides.push_back(mlsim::Override{path, value, "--set " + path});
  double cpu = 0, arrived = 0, makespan = 0, ttft = 0, events = 0;
  for (auto _ : state) {
    const auto scenario = mlsim::load_scenario(request, registries);
    mlsim::PreparedRun run(scenario, registries);
    const double t0 = process_cpu_seconds();
    auto out = run.run();
    cpu += process_cpu_seconds() - t0;
    arrived = out.results.metrics().at("serving_requests_arrived");
    makespan = out.results.metrics().at("serving_makespan_s");
    ttft = out.results.metrics().at("serving_ttft_mean_s");
    events = static_cast<double>(out.info.events_processed);
  }
  cpu /= static_cast<double>(state.iterations());  // mean over the iterations
  state.counters["run_cpu_s"] = cpu;
  state.counters["cpu_us_per_arrival"] = 1e6 * cpu / arrived;
  state.counters["makespan_s"] = makespan;
  state.counters["ttft_mean_s"] = ttft;
  state.counters["events"] = events;
}

BENCHMARK_CAPTURE(BM_ServingRouterOverload, least_outstanding_tokens_10x,
                  "least_outstanding_tokens", 72.0)
    ->ArgName("replicas")
    ->Arg(8)
    ->Arg(64)
    ->Arg(512)
    ->Unit(benchmark::kSecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_ServingRouterOverload, round_robin_10x, "round_robin", 72.0)
    ->ArgName("replicas")
    ->Arg(8)
    ->Arg(64)
    ->Arg(512)
    ->Unit(benchmark::kSecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_ServingRouterOverload, least_outstanding_tokens_underloaded,
                  "least_outstanding_tokens", 4.0)
    ->ArgName("replicas")
    ->Arg(8)
    ->Unit(benchmark::kSecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_ServingRouterOverload, round_robin_underloaded, "round_robin", 4.0)
    ->ArgName("replicas")
    ->Arg(8)
    ->Unit(benchmark::kSecond)
    ->Iterations(3);

// The router's own cost per arrival, apart from the simulation (BM_ServingRouterOverload times
// the whole run, where more replicas also mean more, smaller iterations): n stand-in replicas
// whose outstanding tokens change as in an overloaded fleet between two arrivals (16 iteration
// ends, each taking a random number of tokens off a random replica: 16 is the events per arrival
// of BM_ServingRouterOverload at 512 replicas), then the least loaded replica is picked and the
// new request's tokens added to it. "indexed": the load index (load_index.hpp), O(log n) per
// change; "scan": the walk over the replicas it replaced, O(n) per arrival (both pick the same);
// "round_robin": the next replica in turn, the cost of the loop itself (random numbers, load
// changes), to subtract.
enum class PickBy { kIndex, kScan, kRoundRobin };
struct StandInReplica {
  std::int64_t load = 0;
  mlsim::serving::LoadListener* listener = nullptr;
  std::uint32_t slot = 0;
  std::int64_t outstanding_tokens() const { return load; }
  void set_load_listener(mlsim::serving::LoadListener* l, std::uint32_t s) {
    listener = l;
    slot = s;
  }
  void add(std::int64_t delta) {
    load += delta;
    if (listener != nullptr) listener->load_changed(slot);
  }
};

void BM_RouterPick(benchmark::State& state, PickBy by) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<StandInReplica> replicas(n);
  std::vector<StandInReplica*> list;
  for (auto& r : replicas) list.push_back(&r);
  mlsim::serving::LoadIndex<StandInReplica> index;
  if (by == PickBy::kIndex) index.assign(list);
  std::mt19937_64 rng(1);
  std::size_t next = 0;
  for (auto _ : state) {
    for (int c = 0; c < 16; ++c) replicas[rng() % n].add(-static_cast<std::int64_t>(rng() % 64));
    StandInReplica* best = list.front();
    if (by == PickBy::kIndex) {
      best = &index.least_loaded();
    } else if (by == PickBy::kScan) {
      for (StandInReplica* r : list)
        if (r->outstanding_tokens() < best->outstanding_tokens()) best = r;
    } else {
      best = list[next++ % n];
    }
    best->add(1000 + static_cast<std::int64_t>(rng() % 1000));
    benchmark::DoNotOptimize(best);
  }
}

BENCHMARK_CAPTURE(BM_RouterPick, indexed, PickBy::kIndex)->Arg(8)->Arg(64)->Arg(512)->Arg(4096);
BENCHMARK_CAPTURE(BM_RouterPick, scan, PickBy::kScan)->Arg(8)->Arg(64)->Arg(512)->Arg(4096);
BENCHMARK_CAPTURE(BM_RouterPick, round_robin, PickBy::kRoundRobin)
    ->Arg(8)
    ->Arg(64)
    ->Arg(512)
    ->Arg(4096);

BENCHMARK_CAPTURE(BM_ServingAzureConv70B, continuous, "continuous")
    ->Unit(benchmark::kSecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_ServingAzureConv70B, chunked_prefill, "chunked_prefill")
    ->Unit(benchmark::kSecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_ServingAzureConv70BPrefixCacheOn, unique_blocks, "continuous")
    ->Unit(benchmark::kSecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_ServingMooncakePrefix, prefix_on, "prefix_on")
    ->Unit(benchmark::kSecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_ServingMooncakePrefix, prefix_off, "prefix_off")
    ->Unit(benchmark::kSecond)
    ->Iterations(1);

}  // namespace
