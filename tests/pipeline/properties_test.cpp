// Invariants of the pipeline model under random layer costs and random changes of GPU speed and
// host bandwidth, for both policies: every minibatch finishes, every transfer is delivered
// (bytes sent = bytes delivered), AutoPipe's switches drain and resume, and the run is
// deterministic.
#include <gtest/gtest.h>

#include <random>

#include "tests/hardware/gpu_fixtures.hpp"

#include "models/pipeline/pipeline_model.hpp"
#include "models/pipeline/pipeline_training.hpp"
#include "sim_core/hardware/compute.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "sim_core/run/events.hpp"

using namespace mlsim;
using namespace mlsim::pipeline;

namespace {

struct PropertiesOutcome {
  std::map<std::string, double> metrics;
  nlohmann::json partitions;
  NetworkTotals totals;
};

PropertiesOutcome properties_run(std::uint32_t seed, Policy policy,
                                 Switching switching = Switching::kDrainAndCopy) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.01, 0.2);
  const std::size_t stages = 2 + rng() % 4, layer_count = stages + rng() % 12;
  const double bw = 1e9;
  TrainingParams p;
  for (std::size_t l = 0; l < layer_count; ++l)
    p.layers.push_back({u(rng), 2 * u(rng), u(rng) * 1e8, u(rng) * 1e8});
  p.minibatches = 20 + rng() % 60;
  p.policy = policy;
  p.switching = switching;
  p.min_gain = 0.01;
  const Topology topo =
      build_topology(StarSpec{static_cast<int>(stages), LinkSpec{Bandwidth{bw}, Time::us(1)}});
  // Random platform events: a stage host's speed, or both of its links' bandwidth.
  PlatformEvents events;
  for (int c = 0; c < 6; ++c) {
    PlatformEvent e;
    e.at = Time::ms(static_cast<std::int64_t>(rng() % 4000));
    const NodeId host = topo.hosts()[rng() % stages];
    if (rng() % 2) {
      e.change = EventChange::kSpeed;
      e.nodes = {host};
      e.speed = 0.25 + 1.5 * u(rng) * 5;
    } else {
      e.change = EventChange::kBandwidth;
      for (LinkId l = 0; l < topo.links().size(); ++l)
        if (topo.link(l).src == host || topo.link(l).dst == host) e.links.push_back(l);
      e.bandwidth = Bandwidth{bw * (0.05 + u(rng) * 5)};
    }
    events.events.push_back(e);
  }
  place_stages(p, topo, stages);
  Engine engine;
  FluidNetwork net(engine, topo, Sharing::kMaxMin);
  LinkConditions links(topo, net);
  HostSpeeds speeds(topo.nodes().size());
  NodeHealth health(topo.nodes().size());
  EventScheduler scheduler(engine, PlatformState{links, speeds, health}, events, RandomStream(1));
  // Every stage host has the profile's GPU: layer times are the profile's.
  static const GpuSpec gpu = test::make_gpu("profiled", 0, 10, 1000);
  p.profiled_on = &gpu;
  NodeHardware hardware(topo.nodes().size());
  for (NodeId h : topo.hosts())
    hardware.set_host(h, HostHardware{.gpu = &gpu, .gpus = 1, .nic = nullptr, .intra_node = {}});
  CostModel costs;
  Compute compute(engine, hardware, speeds, costs);
  PipelineTraining training(engine, net, compute, speeds, links, p);
  scheduler.start();
  training.start();
  engine.run();
  Results res;
  training.report(res);
  return {res.metrics(), res.details()["partitions"], net.totals()};
}

}  // namespace

TEST(PipelineProperties, EveryMinibatchFinishesAndNothingIsLost) {
  int switched_runs = 0, replicated_runs = 0;
  for (std::uint32_t seed = 1; seed <= 40; ++seed) {
    // AutoPipe switches by drain and copy on odd seeds, layer by layer on even ones.
    for (Policy policy : {Policy::kPipeDream, Policy::kAutoPipe}) {
      const PropertiesOutcome o = properties_run(
          seed, policy, seed % 2 == 0 ? Switching::kLayerByLayer : Switching::kDrainAndCopy);
      ASSERT_EQ(o.metrics.at("completed"), 1) << "seed " << seed;
      EXPECT_EQ(o.totals.transfers_started, o.totals.transfers_delivered) << seed;
      EXPECT_EQ(o.totals.bytes_started, o.totals.bytes_delivered) << seed;
      EXPECT_EQ(o.totals.transfers_failed, 0u);
      EXPECT_EQ(o.metrics.at("failed_transfers"), 0);
      EXPECT_EQ(o.partitions.size(), 1 + static_cast<std::size_t>(o.metrics.at("repartitions")));
      if (policy == Policy::kPipeDream) {
        EXPECT_EQ(o.metrics.at("repartitions"), 0);
      }
      if (o.metrics.at("repartitions") > 0) ++switched_runs;
      bool replicated = false;
      for (const auto& part : o.partitions)
        for (std::size_t r : part["replicas"].get<std::vector<std::size_t>>()) replicated |= r > 1;
      if (replicated) {
        ++replicated_runs;
        EXPECT_GT(o.metrics.at("allreduces"), 0) << seed;
      }
    }
  }
  EXPECT_GT(switched_runs, 5);    // the property covers switching, not only steady runs
  EXPECT_GT(replicated_runs, 5);  // ... and replicated stages (PipeDream's hybrid)
}

TEST(PipelineProperties, SameInputsGiveTheSameRun) {
  const PropertiesOutcome a = properties_run(7, Policy::kAutoPipe),
                          b = properties_run(7, Policy::kAutoPipe);
  EXPECT_EQ(a.metrics, b.metrics);
  EXPECT_EQ(a.partitions, b.partitions);
}
