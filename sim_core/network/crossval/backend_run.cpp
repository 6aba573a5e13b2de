// Runs one cross-validation scenario on one backend and prints one tab-separated line:
//   scenario backend simulated_seconds wall_seconds cpu_seconds peak_rss_kib transfers
//   engine_events
// (wall time counts waiting for a shared CPU; cpu time does not.)
// OPTIONS_JSON overrides the backend's validation options (cross_validation.hpp).
// One (scenario, backend) per process, so that peak memory is that run's and SimGrid's and
// ns-3's process-wide singletons start fresh. tools/backend_table.sh loops over all of them.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>

#include "sim_core/network/crossval/cross_validation.hpp"

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: %s SCENARIO BACKEND [OPTIONS_JSON]\nscenarios:", argv[0]);
    for (const auto& s : mlsim::crossval::scenario_names()) std::fprintf(stderr, " %s", s.c_str());
    std::fprintf(stderr, "\n");
    return 2;
  }
  try {
    const std::string scenario = argv[1], backend = argv[2];
    const auto start = std::chrono::steady_clock::now();
    auto options = mlsim::crossval::validation_options(backend);
    if (argc == 4) options.update(nlohmann::json::parse(argv[3]));
    const auto outcome = mlsim::crossval::run(scenario, backend, options);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    const double cpu = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                       1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
    std::printf("%s\t%s\t%.9f\t%.3f\t%.3f\t%ld\t%zu\t%llu\n", scenario.c_str(), backend.c_str(),
                outcome.makespan.seconds(), wall, cpu, usage.ru_maxrss, outcome.finished.size(),
                static_cast<unsigned long long>(outcome.engine_events));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
