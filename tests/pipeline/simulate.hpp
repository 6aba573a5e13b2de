#pragma once
// A pipeline job run on a star of identical hosts with the profile's GPU, through the platform
// (Compute, a flow network, platform events), for the hand-computed tests.
#include <vector>

#include "tests/hardware/gpu_fixtures.hpp"

#include "models/pipeline/pipeline_model.hpp"
#include "models/pipeline/pipeline_training.hpp"
#include "sim_core/hardware/compute.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "sim_core/run/events.hpp"

namespace mlsim::pipeline::test_support {

struct Outcome {
  Results results;
  NetworkTotals totals;
};

// The profile's GPU: every stage host has one unless a test says otherwise, so layer times are the
// profile's own.
inline const GpuSpec& profile_gpu() {
  static const GpuSpec gpu = test::make_gpu("profiled", 0, 10, 1000);
  return gpu;
}

// Stage s on host s of a star whose links have `bandwidth` and `hop_latency` each way, with
// platform `events` (host speeds, link changes) played as the runner plays them; the job's work
// runs on the platform's Compute.
inline Outcome simulate(TrainingParams p, std::size_t stages, double bandwidth, Time hop_latency,
                        std::vector<PlatformEvent> events = {}) {
  const Topology topo = build_topology(
      StarSpec{static_cast<int>(stages), LinkSpec{Bandwidth{bandwidth}, hop_latency}});
  place_stages(p, topo, stages);
  p.profiled_on = &profile_gpu();
  Engine engine;
  FluidNetwork net(engine, topo, Sharing::kMaxMin);
  LinkConditions links(topo, net);
  HostSpeeds speeds(topo.nodes().size());
  NodeHealth health(topo.nodes().size());
  NodeHardware hardware(topo.nodes().size());
  for (NodeId h : topo.hosts())
    hardware.set_host(
        h, HostHardware{.gpu = &profile_gpu(), .gpus = 1, .nic = nullptr, .intra_node = {}});
  CostModel costs;
  Compute compute(engine, hardware, speeds, costs);
  PlatformEvents platform;
  platform.events = std::move(events);
  EventScheduler scheduler(engine, PlatformState{links, speeds, health}, platform, RandomStream(1));
  PipelineTraining training(engine, net, compute, speeds, links, std::move(p));
  scheduler.start();
  training.start();
  engine.run();
  Outcome r;
  training.report(r.results);
  r.totals = net.totals();
  return r;
}

}  // namespace mlsim::pipeline::test_support
