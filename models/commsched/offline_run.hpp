#pragma once
// A whole TrainingJob run on a private engine and fluid network, for the tuners: the exhaustive
// grid (every static configuration over the whole scenario) and AutoByte's predictor (a few
// iterations under the measured conditions).
#include <vector>

#include "models/commsched/training_job.hpp"
#include "sim_core/base/units.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology.hpp"

namespace mlsim::commsched {

// Every link of the topology changes to `bandwidth` at `at`.
struct BandwidthStep {
  Time at;
  Bandwidth bandwidth;
};

// Schedules the steps on `network` (which must outlive the engine's events).
void schedule_bandwidth_steps(Engine& engine, Network& network, const Topology& topology,
                              const std::vector<BandwidthStep>& steps);

struct OfflineRun {
  Time total;  // Time::max() when the job stalled
  std::vector<double> iteration_s;
  bool finished = false;
};

OfflineRun run_offline(const JobSpec& spec, const Topology& topology, Sharing sharing,
                       const std::vector<BandwidthStep>& steps, SchedulerConfig config);

}  // namespace mlsim::commsched
