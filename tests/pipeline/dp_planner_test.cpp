// AutoPipe's dynamic-programming planner (dp_planner.hpp) against a case computed by hand, and
// against brute-force enumeration of its own objective (the bottleneck time, bottleneck.hpp) and
// the branch and bound of the full objective (the 1F1B steady-state time) on random small jobs.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "models/pipeline/autopipe_planner.hpp"
#include "models/pipeline/bottleneck.hpp"
#include "models/pipeline/dp_planner.hpp"
#include "models/pipeline/one_f_one_b.hpp"
#include "tests/pipeline/configurations.hpp"

using namespace mlsim;
using namespace mlsim::pipeline;

namespace {

Conditions dp_conditions(const std::vector<LayerCost>& l, std::vector<double> speeds,
                         double bandwidth, double latency_each_way = 0) {
  Conditions c;
  for (double s : speeds) c.hosts.push_back(profiled_host(l, s));
  c.bandwidth.assign(speeds.size(), bandwidth);
  c.latency_out.assign(speeds.size(), latency_each_way);
  c.latency_in.assign(speeds.size(), latency_each_way);
  return c;
}

// A random job of up to 8 layers on 2 to 4 hosts of random speed and bandwidth.
struct Job {
  std::vector<LayerCost> layers;
  Conditions c;
};
Job random_job(std::mt19937& rng, double latency, bool communication = true) {
  std::uniform_real_distribution<double> u(0.1, 1);
  const std::size_t hosts = 2 + rng() % 3, n = hosts + rng() % (9 - hosts);
  Job job;
  for (std::size_t i = 0; i < n; ++i)
    job.layers.push_back(
        {u(rng), 2 * u(rng), communication ? u(rng) * 4e8 : 0, communication ? u(rng) * 4e8 : 0});
  for (std::size_t h = 0; h < hosts; ++h) {
    job.c.hosts.push_back(profiled_host(job.layers, 0.3 + u(rng)));
    job.c.bandwidth.push_back(1e9 * (0.2 + u(rng)));
    job.c.latency_out.push_back(latency);
    job.c.latency_in.push_back(latency);
  }
  return job;
}

// The 1F1B timing model's time per minibatch over a long run: its slope between 60 and 120
// rounds (a round: every host used x the replication factors' least common multiple, as
// steady_state counts them).
double long_run_seconds(const Job& job, const Partition& p) {
  std::size_t rounds = 1;
  for (std::size_t s = 0; s < p.stages(); ++s) rounds = std::lcm(rounds, p.replication(s));
  const std::size_t n = p.hosts_used() * rounds;
  const StageCosts costs = stage_costs(job.layers, p, job.c);
  return (estimate_1f1b(costs, job.c, 120 * n) - estimate_1f1b(costs, job.c, 60 * n)) /
         static_cast<double>(60 * n);
}

}  // namespace

TEST(DpPlanner, FourLayersOnTwoHostsByHand) {
  // Layers (f + b; activation out; parameters), 2 hosts at speed 1, B = 1 GB/s, no latency:
  //   L0: 2 s; 1 GB; 0    L1: 2 s; 7 GB; 0    L2: 3 s; 1 GB; 0    L3: 1 s; 0; 3 GB
  // Stage term (bottleneck.hpp) = (max(T, N) + R) / r, N = (gradient in + activation out) / B,
  // R the ring all-reduce of the stage's parameters, 2 (r - 1) (P / r / B) for r hosts.
  //   1 | 3:  stage 0 max(2, 1) = 2; stage 1 max(6, 1) = 6                     -> 6
  //   2 | 2:  stage 0 max(4, 7) = 7; stage 1 max(4, 7) = 7                     -> 7
  //   3 | 1:  stage 0 max(7, 1) = 7; stage 1 max(1, 1) = 1                     -> 7
  //   one stage on both: (8 + 2 x 1 x (3 GB / 2 / 1 GB/s)) / 2 = (8 + 3) / 2   -> 5.5
  // Compute alone would split 2 | 2 (4 s); the 7 GB activation rules it out. With replication
  // the best is the one replicated stage, 5.5 s; straight, 1 | 3 at 6 s.
  const std::vector<LayerCost> l{
      {1, 1, 1e9, 0}, {1, 1, 7e9, 0}, {1.5, 1.5, 1e9, 0}, {0.5, 0.5, 0, 3e9}};
  const Conditions c = dp_conditions(l, {1, 1}, 1e9);
  const Plan replicated = dp_plan(l, c, {false, {}});
  EXPECT_EQ(replicated.partition.first, (std::vector<std::size_t>{0, 4}));
  EXPECT_EQ(replicated.partition.replicas, (std::vector<std::size_t>{2}));
  EXPECT_NEAR(replicated.bottleneck_seconds, 5.5, 1e-12);
  const Plan straight = dp_plan(l, c, {true, {}});
  EXPECT_EQ(straight.partition.first, (std::vector<std::size_t>{0, 1, 4}));
  EXPECT_NEAR(straight.bottleneck_seconds, 6, 1e-12);
  // Here nothing couples the stages beyond the bottleneck: the 1F1B steady state is the same
  // (a round of the replicated stage is 8 s of compute then the 3 s all-reduce, for two
  // minibatches; the straight pipeline runs at its 6 s stage), and the branch and bound agrees.
  EXPECT_NEAR(replicated.seconds_per_minibatch, 5.5, 1e-9);
  EXPECT_NEAR(straight.seconds_per_minibatch, 6, 1e-9);
  EXPECT_NEAR(autopipe_plan(l, c, {false, {}}).seconds_per_minibatch, 5.5, 1e-9);
  EXPECT_NEAR(autopipe_plan(l, c, {true, {}}).seconds_per_minibatch, 6, 1e-9);
}

TEST(DpPlanner, MatchesBruteForceOnItsObjective) {
  // Random small jobs, 1F1B and GPipe, straight and replicated: the program's optimum is the
  // smallest bottleneck time over every configuration, and its configuration has that time.
  std::mt19937 rng(14);
  for (int trial = 0; trial < 80; ++trial) {
    const Job job = random_job(rng, 5e-6);
    for (const ScheduleTiming schedule :
         {ScheduleTiming{}, ScheduleTiming{training::PipelineSchedule::Kind::kGPipe, 3}}) {
      const Bottleneck cost(job.layers, job.c, schedule);
      for (bool straight : {true, false}) {
        double best = std::numeric_limits<double>::infinity();
        test_support::each_configuration(
            job.layers.size(), job.c.host_count(), straight,
            [&](const Partition& p) { best = std::min(best, cost.of(p)); });
        const Plan dp = dp_plan(job.layers, job.c, {straight, schedule});
        EXPECT_NEAR(dp.bottleneck_seconds, best, 1e-12 * best) << trial << " " << straight;
        EXPECT_NEAR(cost.of(dp.partition), dp.bottleneck_seconds, 1e-15);
        EXPECT_EQ(dp.partition.hosts_used(), job.c.host_count());
        if (straight) {
          EXPECT_EQ(dp.partition.stages(), job.c.host_count());
        }
      }
    }
  }
}

TEST(DpPlanner, BoundsTheLongRunSteadyStateFromBelow) {
  // The bottleneck time is a lower bound on the rate the 1F1B timing model settles to, which
  // steady_state gives exactly (the period of its max-plus recurrence, one_f_one_b.hpp), so the
  // program's optimum bounds every configuration's steady state from below: checked on the
  // program's configuration and the branch and bound's, by steady_state (periodic on every one
  // of these) and by the slope over 60 to 120 rounds; and the branch and bound's own figure,
  // now that it is the exact period, never sits below the bound either. Until 2026-12-06
  // steady_state_seconds was the slope between 2 and 6 rounds, which sat below the bound on 3
  // of these 120 jobs, by 0.1% to 1.2%, where the pipeline had not settled after 2 rounds.
  // The program's configuration never beats the branch and bound's under the latter's objective.
  std::mt19937 rng(15);
  int optimal = 0, total = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const Job job = random_job(rng, 5e-6);
    for (bool straight : {true, false}) {
      const Plan dp = dp_plan(job.layers, job.c, {straight, {}});
      const Plan exact = autopipe_plan(job.layers, job.c, {straight, {}});
      for (const Partition& p : {dp.partition, exact.partition}) {
        EXPECT_LE(dp.bottleneck_seconds, long_run_seconds(job, p) * (1 + 1e-9)) << trial;
        const SteadyState s = steady_state(job.layers, p, job.c);
        EXPECT_TRUE(s.periodic) << trial;
        EXPECT_LE(dp.bottleneck_seconds, s.seconds * (1 + 1e-9)) << trial;
        EXPECT_LE(Bottleneck(job.layers, job.c).of(p), s.seconds * (1 + 1e-9)) << trial;
      }
      EXPECT_LE(dp.bottleneck_seconds, exact.seconds_per_minibatch * (1 + 1e-9)) << trial;
      EXPECT_GE(dp.seconds_per_minibatch, exact.seconds_per_minibatch * (1 - 1e-12)) << trial;
      ++total;
      optimal += dp.seconds_per_minibatch <= exact.seconds_per_minibatch * (1 + 1e-9) ? 1 : 0;
    }
  }
  // Not an assertion: how often the program's configuration is also optimal for the branch and
  // bound's objective (docs/pipeline.md quotes it).
  std::printf("DP configuration optimal for steady_state_seconds on %d of %d jobs\n", optimal,
              total);
}

TEST(DpPlanner, ExactForTheLongRunSteadyStateOfAStraightPipelineWithoutCommunication) {
  // Without activations, parameters or latency a straight 1F1B pipeline settles at its slowest
  // stage: the two objectives are the same for every configuration, so the program's optimum is
  // the long-run optimum over every configuration (brute force).
  std::mt19937 rng(16);
  for (int trial = 0; trial < 40; ++trial) {
    const Job job = random_job(rng, 0, /*communication=*/false);
    const Bottleneck cost(job.layers, job.c);
    double best = std::numeric_limits<double>::infinity();
    test_support::each_configuration(job.layers.size(), job.c.host_count(), true,
                                     [&](const Partition& p) {
                                       const double t = long_run_seconds(job, p);
                                       EXPECT_NEAR(t, cost.of(p), 1e-9 * t) << trial;
                                       best = std::min(best, t);
                                     });
    EXPECT_NEAR(dp_plan(job.layers, job.c, {true, {}}).bottleneck_seconds, best, 1e-9 * best)
        << trial;
  }
}
