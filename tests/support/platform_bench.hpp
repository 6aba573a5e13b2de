#pragma once
// The platform pieces a hand-built test run needs: an engine, a topology, the flow backend
// (max-min) on it, host speeds, no catalog hardware (layer times are given on the job's GPU), a
// cost model and Compute. Shared by the training-core and cluster test suites. Header-only.
#include <utility>

#include "sim_core/engine/engine.hpp"
#include "sim_core/hardware/compute.hpp"
#include "sim_core/hardware/cost_model.hpp"
#include "sim_core/hardware/host_speeds.hpp"
#include "sim_core/hardware/node_hardware.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology.hpp"

namespace mlsim::test {

struct PlatformBench {
  explicit PlatformBench(Topology t)
      : topology(std::move(t)),
        network(engine, topology, Sharing::kMaxMin),
        speeds(topology.nodes().size()),
        hardware(topology.nodes().size()),
        compute(engine, hardware, speeds, costs) {}
  PlatformBench(const PlatformBench&) = delete;
  PlatformBench& operator=(const PlatformBench&) = delete;

  Engine engine;
  Topology topology;
  FluidNetwork network;
  HostSpeeds speeds;
  NodeHardware hardware;  // none: layer times are given on the job's GPU
  CostModel costs;
  Compute compute;
};

}  // namespace mlsim::test
