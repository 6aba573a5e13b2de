// Wall time of whole collectives on the fluid backends. The headline case is the issue's: ring
// all-reduce of 64 MiB on 4096 nodes (50 GB/s, 500 ns links), flow backend, where ASTRA-sim's
// analytical backend needs 76 s and 5.4 GB on this machine class (design notes). The node counts
// show how the cost grows: linearly in the 2(n-1) n transfers.
#include <benchmark/benchmark.h>

#include "sim_core/collectives/collective.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology_builders.hpp"

using namespace mlsim;
using namespace mlsim::collectives;

namespace {

const LinkSpec kLink{Bandwidth{50e9}, Time::ns(500)};

void run_case(benchmark::State& state, const Topology& topo, Sharing sharing,
              const CollectiveSpec& spec) {
  CollectiveResult r;
  for (auto _ : state) {
    Engine engine;
    FluidNetwork net(engine, topo, sharing);
    r = run_collective(engine, net, topo.hosts(), spec);
    benchmark::DoNotOptimize(r);
  }
  if (!r.completed) state.SkipWithError("collective did not complete");
  state.counters["transfers"] = static_cast<double>(r.transfers);
  state.counters["transfers_per_s"] =
      benchmark::Counter(static_cast<double>(r.transfers) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
  state.counters["simulated_s"] = r.seconds();
}

void BM_RingAllReduce64MiB(benchmark::State& state) {
  const auto n = static_cast<int>(state.range(0));
  const auto sharing = state.range(1) ? Sharing::kMaxMin : Sharing::kNone;
  const Topology topo = build_topology(RingSpec{n, kLink});
  CollectiveSpec spec;
  spec.algorithm = Algorithm::kRing;
  spec.bytes = Bytes{std::int64_t{64} << 20};
  run_case(state, topo, sharing, spec);
}

// Multi-hop routes with ECMP and shared links: the contended path of the flow backend.
void BM_FatTree1024(benchmark::State& state) {
  const Topology topo = build_topology(FatTreeSpec{16, kLink});
  CollectiveSpec spec;
  spec.algorithm = static_cast<Algorithm>(state.range(0));
  spec.bytes = Bytes{std::int64_t{64} << 20};
  spec.servers = 16;
  spec.placement = Placement::kColocated;
  spec.chunks = 4;
  run_case(state, topo, Sharing::kMaxMin, spec);
}

}  // namespace

// range(1): 0 = analytic, 1 = flow.
BENCHMARK(BM_RingAllReduce64MiB)
    ->ArgNames({"nodes", "flow"})
    ->ArgsProduct({{256, 1024}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK(BM_RingAllReduce64MiB)
    ->ArgNames({"nodes", "flow"})
    ->ArgsProduct({{4096}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK(BM_FatTree1024)
    ->ArgName("algorithm")  // 0 ring, 1 ps (16 colocated servers), 2 tree
    ->DenseRange(0, 2)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
