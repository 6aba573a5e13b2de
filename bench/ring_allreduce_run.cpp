// One ring all-reduce on a ring topology (50 GB/s, 500 ns links), printing what it cost:
//   mlsim_ring_allreduce_run NODES [BYTES] [analytic|flow]
// Prints simulated time, the closed form 2(n-1)/n S/B + 2(n-1) a, wall and CPU time, and peak
// resident memory (getrusage). tools/ring_allreduce_perf.sh runs it for several sizes.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "sim_core/base/error.hpp"
#include "sim_core/collectives/collective.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology_builders.hpp"

using namespace mlsim;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s NODES [BYTES] [analytic|flow]\n", argv[0]);
    return 2;
  }
  try {
    const int n = std::atoi(argv[1]);
    const Bytes bytes = argc > 2 ? parse_bytes(argv[2], "BYTES") : Bytes{std::int64_t{64} << 20};
    const std::string backend = argc > 3 ? argv[3] : "flow";
    if (backend != "analytic" && backend != "flow") throw InputError("backend", "analytic or flow");
    const auto wall_start = std::chrono::steady_clock::now();
    const Topology topo = build_topology(RingSpec{n, LinkSpec{Bandwidth{50e9}, Time::ns(500)}});
    Engine engine;
    FluidNetwork net(engine, topo, backend == "flow" ? Sharing::kMaxMin : Sharing::kNone);
    collectives::CollectiveSpec spec;
    spec.bytes = bytes;
    const auto r = collectives::run_collective(engine, net, topo.hosts(), spec);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    const double cpu = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                       static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
    const double formula =
        2.0 * (n - 1) / n * static_cast<double>(bytes.count) / 50e9 + 2.0 * (n - 1) * 500e-9;
    std::printf(
        "nodes=%d bytes=%lld backend=%s completed=%d simulated=%.9fs formula=%.9fs "
        "transfers=%llu wall=%.3fs cpu=%.3fs peak_rss=%.1fMB\n",
        n, static_cast<long long>(bytes.count), backend.c_str(), r.completed ? 1 : 0, r.seconds(),
        formula, static_cast<unsigned long long>(r.transfers), wall, cpu,
        static_cast<double>(ru.ru_maxrss) / 1024.0);
    return r.completed ? 0 : 1;
  } catch (const InputError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
