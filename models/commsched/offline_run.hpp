#pragma once
// A whole TrainingJob run on a private engine, fluid network and platform state, for the tuners:
// the exhaustive grid (every static configuration over the whole scenario) and AutoByte's predictor
// (a few iterations under the measured conditions).
#include <vector>

#include "models/commsched/training_job.hpp"
#include "sim_core/base/units.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology.hpp"
#include "sim_core/run/events.hpp"

namespace mlsim::commsched {

struct OfflineRun {
  Time total;  // Time::max() when the job stalled
  std::vector<double> iteration_s;
  bool finished = false;
};

// The job on a private engine and network over `topology`, with the platform `events` (the
// scenario's, resolved against the same topology) played as the runner plays them, after the
// hosts' speeds start at `initial_speeds` (host, speed) pairs.
OfflineRun run_offline(const JobSpec& spec, const Topology& topology, Sharing sharing,
                       const PlatformEvents& events, SchedulerConfig config,
                       const std::vector<std::pair<NodeId, double>>& initial_speeds = {});

}  // namespace mlsim::commsched
