#include "models/commsched/offline_run.hpp"

namespace mlsim::commsched {

OfflineRun run_offline(const JobSpec& spec, const Topology& topology, Sharing sharing,
                       const PlatformEvents& events, SchedulerConfig config,
                       const std::vector<std::pair<NodeId, double>>& initial_speeds) {
  Engine engine;
  FluidNetwork network(engine, topology, sharing);
  LinkConditions links(topology, network);
  HostSpeeds speeds(topology.nodes().size());
  NodeHealth nodes(topology.nodes().size());
  // Layer times are already on the job's GPU (FixedWork): no host hardware or cost provider.
  const NodeHardware hardware(topology.nodes().size());
  const CostModel costs;
  Compute compute(engine, hardware, speeds, costs);
  for (const auto& [host, speed] : initial_speeds) speeds.set_speed(host, speed);
  // Random failures are not replayed (none of the tuners' scenarios has them): their own stream.
  EventScheduler scheduler(engine, PlatformState{links, speeds, nodes}, events,
                           RandomStream(0, "commsched.offline_failures"));
  JobSpec quiet = spec;
  quiet.record_trace = false;
  TrainingJob job(engine, network, compute, std::move(quiet), config);
  scheduler.start();
  job.start();
  engine.run();
  // A run can stall for good (credit held through the pull with workers of different speeds):
  // its time is then unbounded, and the tuners rank it last.
  if (!job.finished()) return {Time::max(), {}, false};
  return {job.finish_time(), job.iteration_seconds(), true};
}

}  // namespace mlsim::commsched
