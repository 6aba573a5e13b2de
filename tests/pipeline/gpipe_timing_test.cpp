// GPipe's timing model (estimate_pipeline with a flush every `group` micro-batches) and AutoPipe's
// planner choosing under the schedule the run executes, against cases computed by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "tests/pipeline/simulate.hpp"

#include "models/pipeline/autopipe_planner.hpp"
#include "models/pipeline/one_f_one_b.hpp"

using namespace mlsim;
using namespace mlsim::pipeline;
using mlsim::pipeline::test_support::Outcome;
using mlsim::pipeline::test_support::simulate;

namespace {

using Kind = training::PipelineSchedule::Kind;

std::vector<LayerCost> gpipe_layers(std::vector<std::pair<double, double>> fb) {
  std::vector<LayerCost> out;
  for (auto [f, b] : fb) out.push_back({f, b, 0, 0});
  return out;
}

Conditions gpipe_conditions(const std::vector<LayerCost>& l, std::size_t hosts,
                            double bandwidth = 1e12, double latency = 0) {
  Conditions c;
  for (std::size_t h = 0; h < hosts; ++h) c.hosts.push_back(profiled_host(l, 1));
  c.bandwidth.assign(hosts, bandwidth);
  c.latency_out.assign(hosts, latency);
  c.latency_in.assign(hosts, 0);
  return c;
}

ScheduleTiming gpipe(std::size_t group) {
  return {Kind::kGPipe, group};
}

}  // namespace

// Two stages, f0 = 1, b0 = 3, f1 = 2, b1 = 1 s, no transfer time, a flush every 2 micro-batches.
// Group 0: stage 0 F0 [0,1] F1 [1,2]; stage 1 F0 [1,3] F1 [3,5] B0 [5,6] B1 [6,7];
//          stage 0 B0 [6,9] B1 [9,12] (its last backward ends the group; one host: no wait).
// Group 1 starts at 12 on stage 0 and repeats: 12 s per flush of 2, 24 s for 4 micro-batches.
// By the flow-shop formula: fill f0 + f1 + (g - 1) max(f0, f1) = 1 + 2 + 2 = 5, drain
// b1 + b0 + (g - 1) max(b0, b1) = 1 + 3 + 3 = 7: 12 s per flush, 6 s per micro-batch, where 1F1B
// takes max(f0 + b0, f1 + b1) = 4 s per micro-batch in its steady state.
TEST(GPipeTiming, TwoStagesByHand) {
  const StageCosts costs{.first_host = {0, 1, 2},
                         .forward_s = {1, 2},
                         .backward_s = {3, 1},
                         .boundary_bytes = {0},
                         .parameter_bytes = {0, 0}};
  const Conditions c = gpipe_conditions(gpipe_layers({{1, 1}}), 2);
  EXPECT_DOUBLE_EQ(estimate_pipeline(costs, c, 2, gpipe(2)), 12);
  EXPECT_DOUBLE_EQ(estimate_pipeline(costs, c, 4, gpipe(2)), 24);
  // A last group of one: F [24,25] at stage 0, [25,27] at stage 1, B [27,28], [28,31].
  EXPECT_DOUBLE_EQ(estimate_pipeline(costs, c, 5, gpipe(2)), 31);
  // With 1 s transfers each way (1 GB at 1 GB/s, one at a time out of a host):
  //   s0 F0 [0,1] -> s1 at 2; F1 [1,2] -> NIC [2,3] -> s1 at 3;
  //   s1 F0 [2,4] F1 [4,6] B0 [6,7] -> s0 at 8; B1 [7,8] -> NIC [8,9] -> s0 at 9;
  //   s0 B0 [8,11] B1 [11,14]: 14 s for one flush, the two crossings of the critical path more.
  const Conditions slow = gpipe_conditions(gpipe_layers({{1, 1}}), 2, 1e9);
  StageCosts moving = costs;
  moving.boundary_bytes = {1e9};
  EXPECT_DOUBLE_EQ(estimate_pipeline(moving, slow, 2, gpipe(2)), 14);
}

// Four layers on two hosts, straight pipelines, no transfers (f, b in seconds):
//   layer 0 (1, 1), layer 1 (1, 3), layer 2 (1, 3), layer 3 (6, 1).
//   cut after 1: stages (1, 1) | (8, 7); cut after 2: (2, 4) | (7, 4); cut after 3: (3, 7) | (6,
//   1).
// 1F1B, per micro-batch: max(f0 + b0, f1 + b1) = 15, 11, 10: the cut after 3 (10 s).
// GPipe with a flush every 2 micro-batches, per flush (fill f0 + f1 + max(f0, f1), drain
// b1 + b0 + max(b0, b1)), per micro-batch half of it:
//   after 1: (1 + 8 + 8) + (7 + 1 + 7) = 32 -> 16;  after 2: (2 + 7 + 7) + (4 + 4 + 4) = 28 -> 14;
//   after 3: (3 + 6 + 6) + (1 + 7 + 7) = 30 -> 15.  The cut after 2 (14 s).
// GPipe's bubble charges the forward and the backward phase each their own slowest stage, so
// the split that balances f + b is not the one that balances each phase.
TEST(GPipePlanner, BestSplitDiffersFromOneFOneB) {
  const auto l = gpipe_layers({{1, 1}, {1, 3}, {1, 3}, {6, 1}});
  const Conditions c = gpipe_conditions(l, 2);
  const PlannerOptions one_f_one_b{.straight = true, .schedule = {}};
  const PlannerOptions flush{.straight = true, .schedule = gpipe(2)};
  EXPECT_NEAR(steady_state_seconds(l, Partition{{0, 1, 4}, {}}, c, gpipe(2)), 16, 1e-9);
  EXPECT_NEAR(steady_state_seconds(l, Partition{{0, 2, 4}, {}}, c, gpipe(2)), 14, 1e-9);
  EXPECT_NEAR(steady_state_seconds(l, Partition{{0, 3, 4}, {}}, c, gpipe(2)), 15, 1e-9);
  EXPECT_NEAR(steady_state_seconds(l, Partition{{0, 3, 4}, {}}, c), 10, 1e-9);
  const Plan a = autopipe_plan(l, c, one_f_one_b), g = autopipe_plan(l, c, flush);
  EXPECT_EQ(a.partition.first, (std::vector<std::size_t>{0, 3, 4}));
  EXPECT_NEAR(a.seconds_per_minibatch, 10, 1e-9);
  EXPECT_EQ(g.partition.first, (std::vector<std::size_t>{0, 2, 4}));
  EXPECT_NEAR(g.seconds_per_minibatch, 14, 1e-9);
  EXPECT_NEAR(exhaustive_plan(l, c, flush).seconds_per_minibatch, 14, 1e-9);
}

// A replicated stage under GPipe all-reduces once per group. Stage 0 on hosts 0 and 1
// (f = b = 1 s, 0.5 GB of parameters), stage 1 on host 2 (f = b = 1 s), flush every 2 of a
// worker's micro-batches, 4 micro-batches: replica 0 gets 0 and 2, replica 1 gets 1 and 3.
//   r0 F0 [0,1] F2 [1,2]; r1 F1 [0,1] F3 [1,2]
//   s1 (its own group of 2): F0 [1,2] F1 [2,3] B0 [3,4] B1 [4,5]; then F2 [5,6] F3 [6,7]
//      B2 [7,8] B3 [8,9]
//   r0 B0 [4,5] B2 [8,9]; r1 B1 [5,6] B3 [9,10]; round 0: both replicas' group ends at 9 and
//   10: all-reduce [10, 10.5] (A = 2 x 1 x (0.5 GB / 2) / 1 GB/s = 0.5 s). End 10.5 s.
// 1F1B reduces after each round of backwards instead (10.5 s too, replication_test.cpp, two
// all-reduces); here one.
TEST(GPipeTiming, ReplicatedStageReducesOncePerGroup) {
  const StageCosts costs{.first_host = {0, 2, 3},
                         .forward_s = {1, 1, 1},
                         .backward_s = {1, 1, 1},
                         .boundary_bytes = {0},
                         .parameter_bytes = {0.5e9, 0}};
  const Conditions c = gpipe_conditions(gpipe_layers({{1, 1}}), 3, 1e9);
  EXPECT_DOUBLE_EQ(estimate_pipeline(costs, c, 4, gpipe(2)), 10.5);
  // The other way round (one host, then two replicas) deadlocks: replica 0 of stage 1 has
  // micro-batches 0 and 2 and needs both forwards before its first backward, but stage 0's group
  // is {0, 1} and its forward of 2 waits for its backwards of 0 and 1.
  StageCosts reversed = costs;
  reversed.first_host = {0, 1, 3};
  reversed.parameter_bytes = {0, 0.5e9};
  EXPECT_TRUE(std::isinf(estimate_pipeline(reversed, c, 4, gpipe(2))));
  // A flush after every micro-batch runs, one at a time through the pipeline:
  //   s0 F0 [0,1]; r0 F0 [1,2] B0 [2,3]; s0 B0 [3,4] F1 [4,5]; r1 F1 [5,6] B1 [6,7];
  //   round 0 all-reduce [7,7.5]; s0 B1 [7,8] F2 [8,9]; r0 F2 [9,10] B2 [10,11];
  //   s0 B2 [11,12] F3 [12,13]; r1 F3 [13,14] B3 [14,15]; round 1 [15,15.5]; s0 B3 [15,16].
  EXPECT_DOUBLE_EQ(estimate_pipeline(reversed, c, 4, gpipe(1)), 16);
}

// The run under GPipe takes the time the model predicts when nothing contends (a straight
// pipeline of the hand case's best GPipe split, no transfer bytes, 1 us hops).
TEST(GPipeTiming, RunMatchesTheModel) {
  TrainingParams p;
  for (auto [f, b] : std::vector<std::pair<double, double>>{{1, 1}, {1, 3}, {1, 3}, {6, 1}})
    p.layers.push_back({f, b, 1e3, 0});
  p.samples_per_minibatch = 1;
  p.straight = true;
  p.policy = Policy::kAutoPipe;
  p.schedule = Kind::kGPipe;
  p.gpipe_group = 2;
  for (std::size_t m : {2u, 4u, 5u}) {
    p.minibatches = m;
    const Outcome r = simulate(p, 2, 1e9, Time::us(1));
    const auto& parts = r.results.details()["partitions"];
    ASSERT_EQ(parts.size(), 1u);
    EXPECT_EQ(parts[0]["first_layer"], (std::vector<std::size_t>{0, 2, 4}));
    Conditions c = gpipe_conditions(p.layers, 2, 1e9, 1e-6);
    c.latency_in.assign(2, 1e-6);  // two 1 us links between hosts of the star
    const double model =
        estimate_pipeline(stage_costs(p.layers, Partition{{0, 2, 4}, {}}, c), c, m, gpipe(2));
    EXPECT_NEAR(r.results.metrics().at("time_s"), model, 1e-9) << m;
    EXPECT_NEAR(r.results.metrics().at("initial_estimate_s_per_minibatch"), 14, 1e-3);
  }
}

// The pruned search under GPipe (its bound charges an all-reduce once per group) finds the
// exhaustive search's best on random small jobs, straight and replicated.
TEST(GPipePlanner, MatchesTheExhaustiveSearch) {
  std::mt19937 rng(23);
  std::uniform_real_distribution<double> u(0.1, 1);
  for (int trial = 0; trial < 30; ++trial) {
    const std::size_t hosts = 2 + rng() % 3, n = hosts + rng() % 4, group = 1 + rng() % 4;
    std::vector<LayerCost> l;
    for (std::size_t i = 0; i < n; ++i)
      l.push_back({u(rng), 2 * u(rng), u(rng) * 4e8, u(rng) * 4e8});
    Conditions c;
    for (std::size_t h = 0; h < hosts; ++h) {
      c.hosts.push_back(profiled_host(l, 0.3 + u(rng)));
      c.bandwidth.push_back(1e9 * (0.2 + u(rng)));
      c.latency_out.push_back(5e-6);
      c.latency_in.push_back(5e-6);
    }
    for (bool straight : {true, false}) {
      const PlannerOptions o{.straight = straight, .schedule = gpipe(group)};
      const Plan fast = autopipe_plan(l, c, o), all = exhaustive_plan(l, c, o);
      EXPECT_NEAR(fast.seconds_per_minibatch, all.seconds_per_minibatch,
                  1e-12 * all.seconds_per_minibatch)
          << trial << " " << straight;
      EXPECT_NEAR(steady_state_seconds(l, fast.partition, c, o.schedule),
                  fast.seconds_per_minibatch, 1e-15);
    }
  }
}
