// Invariants of the pipeline model under random layer costs and random changes of GPU speed and
// host bandwidth, for both policies: every minibatch finishes, every transfer is delivered
// (bytes sent = bytes delivered), AutoPipe's switches drain and resume, and the run is
// deterministic.
#include <gtest/gtest.h>

#include <random>

#include "models/pipeline/pipeline_training.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology_builders.hpp"

using namespace mlsim;
using namespace mlsim::pipeline;

namespace {

struct Outcome {
  std::map<std::string, double> metrics;
  nlohmann::json partitions;
  NetworkTotals totals;
};

Outcome run(std::uint32_t seed, Policy policy) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.01, 0.2);
  const std::size_t stages = 2 + rng() % 4, layer_count = stages + rng() % 12;
  const double bw = 1e9;
  TrainingParams p;
  for (std::size_t l = 0; l < layer_count; ++l)
    p.layers.push_back({u(rng), 2 * u(rng), u(rng) * 1e8, u(rng) * 1e8});
  p.initial.gpu_speed.assign(stages, 1.0);
  p.initial.link_bandwidth.assign(stages - 1, bw);
  p.initial.link_latency.assign(stages - 1, 2e-6);
  p.minibatches = 20 + rng() % 60;
  p.policy = policy;
  p.min_gain = 0.01;
  for (int c = 0; c < 6; ++c) {
    Change ch;
    ch.at = Time::ms(static_cast<std::int64_t>(rng() % 4000));
    ch.target = rng() % stages;
    if (rng() % 2) {
      ch.kind = Change::Kind::kGpuSpeed;
      ch.value = 0.25 + 1.5 * u(rng) * 5;
    } else {
      ch.kind = Change::Kind::kHostBandwidth;
      ch.value = bw * (0.05 + u(rng) * 5);
    }
    p.changes.push_back(ch);
  }
  const Topology topo =
      build_topology(StarSpec{static_cast<int>(stages), LinkSpec{Bandwidth{bw}, Time::us(1)}});
  p.hosts = topo.hosts();
  p.host_bandwidth.assign(stages, bw);
  Engine engine;
  FluidNetwork net(engine, topo, Sharing::kMaxMin);
  PipelineTraining training(engine, net, topo, p);
  training.start();
  engine.run();
  Results res;
  training.report(res);
  return {res.metrics(), res.details()["partitions"], net.totals()};
}

}  // namespace

TEST(PipelineProperties, EveryMinibatchFinishesAndNothingIsLost) {
  int switched_runs = 0;
  for (std::uint32_t seed = 1; seed <= 40; ++seed) {
    for (Policy policy : {Policy::kPipeDream, Policy::kAutoPipe}) {
      const Outcome o = run(seed, policy);
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
    }
  }
  EXPECT_GT(switched_runs, 5);  // the property covers switching, not only steady runs
}

TEST(PipelineProperties, SameInputsGiveTheSameRun) {
  const Outcome a = run(7, Policy::kAutoPipe), b = run(7, Policy::kAutoPipe);
  EXPECT_EQ(a.metrics, b.metrics);
  EXPECT_EQ(a.partitions, b.partitions);
}
