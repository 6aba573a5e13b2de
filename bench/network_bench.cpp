// Many concurrent flows sharing links: mlsim's flow backend against SimGrid 3.32's LV08 model,
// side by side in one binary, with the same traffic and the same allocations.
//
// Traffic: a star of 64 hosts (10 Gb/s, 1 us links); N flows (1k, 10k, 30k) are kept running at
// once (closed loop: each delivery starts a new flow between the next pair of hosts) until N
// flows have completed. Sizes are drawn uniformly in [1, 2] MB from a fixed seed. Reported:
// completed transfers per wall second (items/s) and the simulated time at which the N-th
// completion happened.
//
// Identical allocations: LV08 scales link bandwidth by 0.97 and weights shares by route
// latency plus 20537 B / bandwidth per link. Every route here has two equal links, so all
// weights are equal and LV08's shares are max-min shares of 0.97 x the bandwidth; SimGrid runs
// with latency paid after sending (as the flow backend), and the flow backend runs on links of
// 0.97 x the bandwidth. Both then compute the same allocation at every instant; the check after
// the runs compares their simulated end times.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <vector>

#include "sim_core/fluid_network.hpp"
#include "sim_core/simgrid/simgrid_network.hpp"
#include "sim_core/topology_builders.hpp"

namespace {

using namespace mlsim;

constexpr int kHosts = 64;
constexpr double kLinkBytesPerS = 1.25e9;
constexpr double kLv08BandwidthFactor = 0.97;  // SimGrid 3.32 network/bandwidth-factor for LV08

// Deterministic sizes (splitmix64), identical for both backends.
class Sizes {
 public:
  Bytes next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    std::uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return Bytes{1'000'000 + static_cast<std::int64_t>(z % 1'000'001)};
  }

 private:
  std::uint64_t state_ = 42;
};

// Keeps `concurrent` flows running until `total` have completed.
class ClosedLoop {
 public:
  ClosedLoop(Network& net, const Topology& topo, std::int64_t concurrent, std::int64_t total)
      : net_(net), hosts_(topo.hosts()), total_(total) {
    for (std::int64_t i = 0; i < concurrent; ++i) start();
  }
  std::int64_t completed() const { return completed_; }
  Time last_completion() const { return last_; }

 private:
  void start() {
    // Senders are the first half of the hosts, receivers the second half, pairs rotating so
    // that every link is shared by many flows.
    const std::int64_t k = started_++;
    const NodeId src = hosts_[static_cast<std::size_t>(k % (kHosts / 2))];
    const NodeId dst = hosts_[static_cast<std::size_t>(kHosts / 2 + (k * 7 + k / 32) % (kHosts / 2))];
    net_.start_transfer(src, dst, sizes_.next(), [this](const TransferResult& r) {
      ++completed_;
      last_ = r.finished;
      if (started_ < total_) start();
    });
  }

  Network& net_;
  const std::vector<NodeId>& hosts_;
  std::int64_t total_;
  std::int64_t started_ = 0, completed_ = 0;
  Time last_;
  Sizes sizes_;
};

Topology star(double bandwidth_factor) {
  return build_topology(
      StarSpec{kHosts, LinkSpec{Bandwidth{kLinkBytesPerS * bandwidth_factor}, Time::us(1)}});
}

struct RunResult {
  double sim_seconds = 0;
  double wall_seconds = 0;
};

template <typename MakeNetwork>
void run_closed_loop(benchmark::State& state, const Topology& topo, MakeNetwork make,
                     RunResult& out) {
  const std::int64_t n = state.range(0);
  for (auto _ : state) {
    Engine engine;
    std::unique_ptr<Network> net = make(engine, topo);
    const auto begin = std::chrono::steady_clock::now();
    try {
      ClosedLoop loop(*net, topo, n, n);
      engine.run();
      out.sim_seconds = loop.last_completion().seconds();
      if (loop.completed() != n) state.SkipWithError("not every flow completed");
    } catch (const std::exception& e) {  // report the failure, run the other benchmarks
      out = RunResult{};
      state.SkipWithError(e.what());
      state.SetIterationTime(1e-9);
      return;
    }
    out.wall_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    state.SetIterationTime(out.wall_seconds);
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["sim_seconds"] = out.sim_seconds;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  std::map<std::int64_t, RunResult> flow, simgrid;
  const Topology flow_topo = star(kLv08BandwidthFactor);
  const Topology simgrid_topo = star(1.0);
  for (std::int64_t n : {1'000, 10'000, 30'000}) {
    benchmark::RegisterBenchmark("BM_FlowBackend", [&, n](benchmark::State& s) {
      run_closed_loop(
          s, flow_topo,
          [](Engine& e, const Topology& t) {
            return std::make_unique<FluidNetwork>(e, t, Sharing::kMaxMin);
          },
          flow[n]);
    })->Arg(n)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("BM_SimGridLV08", [&, n](benchmark::State& s) {
      run_closed_loop(
          s, simgrid_topo,
          [](Engine& e, const Topology& t) {
            SimGridOptions o;
            o.model = SimGridOptions::Model::kLV08;
            o.latency = SimGridOptions::Latency::kAfterSending;
            return std::make_unique<SimGridNetwork>(e, t, o);
          },
          simgrid[n]);
    })->Arg(n)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  std::printf("\nconcurrent  flow/s      simgrid/s   speedup  sim-time flow vs simgrid\n");
  for (const auto& [n, f] : flow) {
    auto it = simgrid.find(n);
    if (it == simgrid.end() || f.wall_seconds <= 0 || it->second.wall_seconds <= 0) continue;
    const RunResult& g = it->second;
    const double fr = static_cast<double>(n) / f.wall_seconds;
    const double gr = static_cast<double>(n) / g.wall_seconds;
    std::printf("%-10lld  %-10.0f  %-10.0f  %6.1fx  %.9f s vs %.9f s (rel. diff %.1e)\n",
                static_cast<long long>(n), fr, gr, fr / gr, f.sim_seconds, g.sim_seconds,
                std::abs(f.sim_seconds - g.sim_seconds) / g.sim_seconds);
  }
  return 0;
}
