// All-to-all on a two-tier fat tree (leaf-spine, non-blocking): every host sends 1 MiB to every
// other host, all transfers started at t = 0 in one call (Network::start_transfers). With 1,024
// hosts that is 1,047,552 concurrent flows in one max-min component: the scale of an
// expert-parallel MoE layer's all-to-all. Reported: wall and CPU seconds of the run, the
// simulated completion time, and the process's peak resident memory (run one case per process
// for a clean peak: --benchmark_filter).
//
// Topology: 32 hosts per leaf, as many spines as hosts per leaf, 100 Gb/s host links, leaf-spine
// links sized for oversubscription 1 (LeafSpineSpec), 1 us per link. Routes between leaves pick a
// spine by ECMP hashing of the flow label (a distinct label per transfer), so spine links carry
// unequal numbers of flows and the flows end at many distinct instants, as in a real fabric.
//
// SimGrid LV08 (same binary) runs the same case at 64 and 256 hosts; at 1,024 hosts only when
// the environment has MLSIM_BENCH_SIMGRID_1024=1 (see docs/performance.md for what it did within
// ten minutes).
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/simgrid/simgrid_network.hpp"
#include "sim_core/network/topology_builders.hpp"

namespace {

using namespace mlsim;

constexpr int kHostsPerLeaf = 32;
constexpr std::int64_t kBytesPerPair = 1 << 20;

Topology fat_tree(int hosts) {
  const int leaves = hosts / kHostsPerLeaf;
  return build_topology(LeafSpineSpec{leaves, kHostsPerLeaf, leaves > 1 ? kHostsPerLeaf : 0, 1.0,
                                      LinkSpec{Bandwidth{12.5e9}, Time::us(1)}, Time::us(1)});
}

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

template <typename MakeNetwork>
void all_to_all(benchmark::State& state, int hosts, MakeNetwork make) {
  const Topology topo = fat_tree(hosts);
  for (auto _ : state) {
    const auto wall0 = std::chrono::steady_clock::now();
    const double cpu0 = cpu_seconds();
    Engine engine;
    std::unique_ptr<Network> net = make(engine, topo);
    std::int64_t delivered = 0;
    Time last;
    const std::size_t n = static_cast<std::size_t>(hosts) * static_cast<std::size_t>(hosts - 1);
    auto phase = std::make_unique<TransferRequest[]>(n);
    std::size_t next = 0;
    for (int s = 0; s < hosts; ++s)
      for (int d = 0; d < hosts; ++d) {
        if (s == d) continue;
        phase[next++] =
            (TransferRequest{topo.hosts()[static_cast<std::size_t>(s)],
                             topo.hosts()[static_cast<std::size_t>(d)], Bytes{kBytesPerPair},
                             [&](const TransferResult& r) {
                               ++delivered;
                               last = r.finished;
                             },
                             static_cast<std::uint64_t>(s) * static_cast<std::uint64_t>(hosts) +
                                 static_cast<std::uint64_t>(d)});
      }
    net->start_transfers(std::span<TransferRequest>(phase.get(), n));
    phase.reset();
    engine.run();
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    state.SetIterationTime(wall);
    state.counters["flows"] = static_cast<double>(delivered);
    state.counters["cpu_s"] = cpu_seconds() - cpu0;
    state.counters["sim_s"] = last.seconds();
    state.counters["peak_rss_MiB"] = peak_rss_mib();
    if (delivered != static_cast<std::int64_t>(hosts) * (hosts - 1))
      state.SkipWithError("not every transfer was delivered");
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  // Benchmarks whose name has "Small" are the smoke run (tools/test.sh).
  for (int hosts : {64, 256, 1024}) {
    const std::string suffix = "/hosts:" + std::to_string(hosts) + (hosts <= 64 ? "/Small" : "");
    benchmark::RegisterBenchmark(("BM_AllToAll/flow" + suffix).c_str(),
                                 [hosts](benchmark::State& s) {
                                   all_to_all(s, hosts, [](Engine& e, const Topology& t) {
                                     return std::make_unique<FluidNetwork>(e, t, Sharing::kMaxMin,
                                                                           /*route_classes=*/true);
                                   });
                                 })
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kSecond);
  }
  const char* big = std::getenv("MLSIM_BENCH_SIMGRID_1024");
  for (int hosts : {64, 256, 1024}) {
    if (hosts == 1024 && (big == nullptr || std::string(big) != "1")) continue;
    const std::string name = "BM_AllToAll/SimGridLV08/hosts:" + std::to_string(hosts);
    auto* b = benchmark::RegisterBenchmark(name.c_str(), [hosts](benchmark::State& s) {
      all_to_all(s, hosts, [](Engine& e, const Topology& t) {
        SimGridOptions o;
        o.model = SimGridOptions::Model::kLV08;
        o.latency = SimGridOptions::Latency::kAfterSending;
        o.spare_routes = 0;
        return std::make_unique<SimGridNetwork>(e, t, o);
      });
    });
    b->Iterations(1)->UseManualTime()->Unit(benchmark::kSecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
