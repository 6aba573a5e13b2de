#include "models/commsched/offline_run.hpp"

#include "sim_core/network/network_events.hpp"

namespace mlsim::commsched {

void schedule_bandwidth_steps(Engine& engine, Network& network, const Topology& topology,
                              const std::vector<BandwidthStep>& steps) {
  for (const BandwidthStep& s : steps)
    for (LinkId l = 0; l < topology.links().size(); ++l)
      schedule_link_bandwidth(engine, network, s.at, l, s.bandwidth);
}

OfflineRun run_offline(const JobSpec& spec, const Topology& topology, Sharing sharing,
                       const std::vector<BandwidthStep>& steps, SchedulerConfig config) {
  Engine engine;
  FluidNetwork network(engine, topology, sharing);
  JobSpec quiet = spec;
  quiet.record_trace = false;
  TrainingJob job(engine, network, std::move(quiet), config);
  schedule_bandwidth_steps(engine, network, topology, steps);
  job.start();
  engine.run();
  // A run can stall for good (credit held through the pull with workers of different speeds):
  // its time is then unbounded, and the tuners rank it last.
  if (!job.finished()) return {Time::max(), {}, false};
  return {job.finish_time(), job.iteration_seconds(), true};
}

}  // namespace mlsim::commsched
