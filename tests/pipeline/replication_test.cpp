// PipeDream's stage replication (its hybrid of pipeline and data parallelism) and AutoPipe's exact
// planner, against cases computed by hand: the optimizer's dynamic program with replicas, the
// 1F1B timing model with round-robin replicas and the all-reduce after each round, the simulated
// run against that model, the parameters a switch moves, and the planner against the exhaustive
// search.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "tests/pipeline/simulate.hpp"

#include "models/pipeline/autopipe_planner.hpp"
#include "models/pipeline/one_f_one_b.hpp"
#include "models/pipeline/pipedream_partitioner.hpp"
#include "models/pipeline/pipeline_model.hpp"
#include "models/pipeline/pipeline_training.hpp"
#include "sim_core/hardware/compute.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "sim_core/run/events.hpp"

using namespace mlsim;
using namespace mlsim::pipeline;
using mlsim::pipeline::test_support::Outcome;
using mlsim::pipeline::test_support::simulate;

namespace {

// Layers with forward f, backward b (seconds) and parameter bytes; activations `act` bytes.
std::vector<LayerCost> repl_layers(std::vector<std::tuple<double, double, double>> fbp,
                                   double act = 0) {
  std::vector<LayerCost> out;
  for (auto [f, b, p] : fbp) out.push_back({f, b, act, p});
  return out;
}

Conditions repl_conditions(const std::vector<LayerCost>& l, std::vector<double> speeds,
                           double bandwidth, double latency_each_way = 0) {
  Conditions c;
  for (double s : speeds) c.hosts.push_back(profiled_host(l, s));
  c.bandwidth.assign(speeds.size(), bandwidth);
  c.latency_out.assign(speeds.size(), latency_each_way);
  c.latency_in.assign(speeds.size(), latency_each_way);
  return c;
}

}  // namespace

TEST(PipeDreamReplication, ReplicatesTheIndivisibleHeavyStage) {
  // Layers (f + b, parameters): 4 s / 0 B, 1 s / 0 B, 1 s / 3 GB; 3 hosts, B = 1 GB/s. PipeDream's
  // stage time with r replicas is (T + 4 (r - 1) P / (B r)) / r:
  //   [0,1) x2 | [1,3) x1: max(4 / 2, 2) = 2
  //   [0,2) x2 | [2,3) x1: max(5 / 2, 1) = 2.5
  //   [0,1) x1 | [1,3) x2: max(4, (2 + 4 x 3 / 2) / 2 = 4) = 4
  //   [0,1) | [1,2) | [2,3) straight: 4
  //   one stage x3: (6 + 4 x 2 x 3 / 3) / 3 = 14 / 3
  // Best: the first stage on two hosts, the rest on the third.
  const auto l = repl_layers({{2, 2, 0}, {0.5, 0.5, 0}, {0.5, 0.5, 3e9}});
  const Conditions c = repl_conditions(l, {1, 1, 1}, 1e9);
  const Partition p = pipedream_partition(l, c);
  EXPECT_EQ(p.first, (std::vector<std::size_t>{0, 1, 3}));
  EXPECT_EQ(p.replicas, (std::vector<std::size_t>{2, 1}));
  EXPECT_DOUBLE_EQ(pipedream_objective(l, p, c), 2);
  EXPECT_NEAR(pipedream_objective(l, Partition{{0, 3}, {3}}, c), 14.0 / 3, 1e-12);
  // --straight_pipeline: the only straight split of three layers on three hosts, 4 s.
  const Partition straight =
      pipedream_partition(l, c, {.straight = true, .activation_compression_ratio = {}});
  EXPECT_EQ(straight.first, (std::vector<std::size_t>{0, 1, 2, 3}));
  EXPECT_DOUBLE_EQ(pipedream_objective(l, straight, c), 4);
}

// Stage 0 on hosts 0 and 1 (f = b = 1 s), stage 1 on host 2 (f = b = 1 s), no transfer time.
// Limits: stage 0 (3 - 1 - 0) / 2 + 1 = 2 per replica, stage 1 (3 - 1 - 2) / 1 + 1 = 1. Minibatches
// 0, 2 go to replica 0 and 1, 3 to replica 1; stage 1 runs all four.
//   r0 F0 [0,1] F2 [1,2]; r1 F1 [0,1] F3 [1,2]
//   s1 F0 [1,2] B0 [2,3] F1 [3,4] B1 [4,5] F2 [5,6] B2 [6,7] F3 [7,8] B3 [8,9]
//   r0 B0 [3,4]; r1 B1 [5,6]; round 0 all-reduce [6, 6 + A]
//   r0 B2 [max(7, 6 + A), +1]; r1 B3 [9,10]; round 1 all-reduce [10, 10 + A]: the end.
// A = 2 (n - 1) (P / (n B) + latency) for n = 2: P = 0.5 GB at 1 GB/s, no latency: A = 0.5 s.
TEST(OneFOneBReplication, TimingModelMatchesHandSchedule) {
  StageCosts costs{.first_host = {0, 2, 3},
                   .forward_s = {1, 1, 1},
                   .backward_s = {1, 1, 1},
                   .boundary_bytes = {0},
                   .parameter_bytes = {0.5e9, 0}};
  const Conditions c = repl_conditions({}, {1, 1, 1}, 1e9);
  EXPECT_DOUBLE_EQ(ring_allreduce_seconds(0.5e9, 0, 2, c), 0.5);
  EXPECT_DOUBLE_EQ(estimate_1f1b(costs, c, 4), 10.5);
  costs.parameter_bytes = {0, 0};  // nothing to reduce: the rounds end at 6 and 10
  EXPECT_DOUBLE_EQ(estimate_1f1b(costs, c, 4), 10);
  // PipeDream's warm-up counts: 4 hosts as 3 + 1 give the first stage's replicas 2 each.
  EXPECT_EQ(in_flight_limit(0, 3, 4), 2u);
  EXPECT_EQ(in_flight_limit(3, 1, 4), 1u);
  EXPECT_EQ(replica_minibatches(1, 3, 7), 2u);  // minibatches 1 and 4 of 0..6
}

TEST(PipelineTrainingReplication, RunMatchesTheTimingModel) {
  // The first test's layers with 0.1 GB of parameters in layer 0: PipeDream's stage 0 on two
  // hosts now takes (4 + 4 x 1 x 0.1 / 2) / 2 = 2.1 s, still its best configuration. The run
  // all-reduces stage 0 as a ring over the star (each hop crosses two 1 us links) after every
  // round; without contention it takes the time the model predicts, for full rounds (8
  // minibatches) and a last round of one replica (9).
  TrainingParams p;
  p.layers = repl_layers({{2, 2, 0.1e9}, {0.5, 0.5, 0}, {0.5, 0.5, 3e9}});
  p.samples_per_minibatch = 1;
  for (std::size_t m : {8u, 9u}) {
    p.minibatches = m;
    const Outcome r = simulate(p, 3, 1e9, Time::us(1));
    const auto& parts = r.results.details()["partitions"];
    ASSERT_EQ(parts.size(), 1u);
    EXPECT_EQ(parts[0]["replicas"], (std::vector<std::size_t>{2, 1}));
    const Conditions c = repl_conditions(p.layers, {1, 1, 1}, 1e9, 1e-6);
    const double model =
        estimate_1f1b(stage_costs(p.layers, Partition{{0, 1, 3}, {2, 1}}, c), c, m);
    EXPECT_NEAR(r.results.metrics().at("time_s"), model, 1e-9) << m;
    // One all-reduce per round of two replicas; a lone last replica reduces nothing.
    EXPECT_EQ(r.results.metrics().at("allreduces"), 4);
    EXPECT_EQ(r.totals.transfers_started, r.totals.transfers_delivered);
  }
}

TEST(PipelineTrainingReplication, GPipeReducesOncePerGroup) {
  // The same job under GPipe with a flush every 4 minibatches: stage 0's two replicas take
  // minibatches round-robin, so with 8 each has 4 (one group, one all-reduce of both); with 9
  // replica 0 has 5 (groups of 4 and 1) and replica 1 has 4: round 0 reduces both, round 1 has
  // replica 0 alone, which reduces nothing. One all-reduce either way, against 4 under 1F1B.
  TrainingParams p;
  p.layers = repl_layers({{2, 2, 0.1e9}, {0.5, 0.5, 0}, {0.5, 0.5, 3e9}});
  p.samples_per_minibatch = 1;
  p.schedule = training::PipelineSchedule::Kind::kGPipe;
  p.gpipe_group = 4;
  for (std::size_t m : {8u, 9u}) {
    p.minibatches = m;
    const Outcome r = simulate(p, 3, 1e9, Time::us(1));
    EXPECT_EQ(r.results.metrics().at("completed"), 1) << m;
    EXPECT_EQ(r.results.metrics().at("minibatches"), static_cast<double>(m));
    EXPECT_EQ(r.results.metrics().at("allreduces"), 1) << m;
    EXPECT_EQ(r.totals.transfers_started, r.totals.transfers_delivered);
  }
}

TEST(Migrations, EachHostFetchesTheLayersItLacks) {
  const auto l = repl_layers({{1, 1, 1e6}, {1, 1, 2e6}, {1, 1, 4e6}});
  // [0,1) x2 | [1,3) on host 2  ->  [0,2) on host 0 | [2,3) x2 on hosts 1, 2.
  //   host 0 held layer 0, lacks layer 1 (old stage 1, host 2): 2 MB from host 2;
  //   host 1 held layer 0, lacks layer 2 (host 2): 4 MB from host 2; host 2 holds layer 2.
  const auto moves = migrations(l, Partition{{0, 1, 3}, {2, 1}}, Partition{{0, 2, 3}, {1, 2}});
  ASSERT_EQ(moves.size(), 2u);
  EXPECT_EQ(moves[0].from_host, 2u);
  EXPECT_EQ(moves[0].to_host, 0u);
  EXPECT_DOUBLE_EQ(moves[0].parameter_bytes, 2e6);
  EXPECT_EQ(moves[1].from_host, 2u);
  EXPECT_EQ(moves[1].to_host, 1u);
  EXPECT_DOUBLE_EQ(moves[1].parameter_bytes, 4e6);
  EXPECT_DOUBLE_EQ(
      moved_parameter_bytes(l, Partition{{0, 1, 3}, {2, 1}}, Partition{{0, 2, 3}, {1, 2}}), 6e6);
}

TEST(AutoPipePlanner, FindsTheHandComputedOptimum) {
  // Four layers of f = b = 1 s, no parameters or activations, host 1 at half speed. Straight:
  // 1 | 3 -> max(2, 12) = 12 s, 2 | 2 -> max(4, 8) = 8 s, 3 | 1 -> max(6, 4) = 6 s; one stage on
  // both hosts: a round of two minibatches takes max(8, 16) = 16 s, 8 s each. Best: 3 | 1, 6 s
  // per minibatch (stage 0 is the bottleneck of the 1F1B steady state).
  const auto l = repl_layers({{1, 1, 0}, {1, 1, 0}, {1, 1, 0}, {1, 1, 0}});
  const Conditions c = repl_conditions(l, {1, 0.5}, 1e9);
  for (bool straight : {true, false}) {
    const Plan plan = autopipe_plan(l, c, {straight, {}});
    EXPECT_EQ(plan.partition.first, (std::vector<std::size_t>{0, 3, 4})) << straight;
    EXPECT_NEAR(plan.seconds_per_minibatch, 6, 1e-9);
    const Plan all = exhaustive_plan(l, c, {straight, {}});
    EXPECT_NEAR(all.seconds_per_minibatch, 6, 1e-9);
    // Straight: the 3 splits; with replication also the single stage on both hosts.
    EXPECT_EQ(all.evaluated, straight ? 3u : 4u);
  }
}

TEST(AutoPipePlanner, MatchesTheExhaustiveSearch) {
  // Random small jobs (up to 7 layers on 2 to 4 hosts of random speed and bandwidth): the pruned
  // search finds the exhaustive search's best time every time, and never times more.
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0.1, 1);
  for (int trial = 0; trial < 60; ++trial) {
    const std::size_t hosts = 2 + rng() % 3, n = hosts + rng() % 4;
    std::vector<LayerCost> l;
    for (std::size_t i = 0; i < n; ++i)
      l.push_back({u(rng), 2 * u(rng), u(rng) * 4e8, u(rng) * 4e8});
    Conditions c = repl_conditions(l, {}, 1e9, 5e-6);
    for (std::size_t h = 0; h < hosts; ++h) {
      c.hosts.push_back(profiled_host(l, 0.3 + u(rng)));
      c.bandwidth.push_back(1e9 * (0.2 + u(rng)));
      c.latency_out.push_back(5e-6);
      c.latency_in.push_back(5e-6);
    }
    for (bool straight : {true, false}) {
      const Plan fast = autopipe_plan(l, c, {straight, {}}),
                 all = exhaustive_plan(l, c, {straight, {}});
      EXPECT_NEAR(fast.seconds_per_minibatch, all.seconds_per_minibatch,
                  1e-12 * all.seconds_per_minibatch)
          << trial << " " << straight;
      EXPECT_NEAR(steady_state_seconds(l, fast.partition, c), fast.seconds_per_minibatch, 1e-15);
    }
  }
}
