// AutoPipe's RL planner (rl_planner.hpp): a policy trained inside the timing model finds the
// hand-computed optimum of a tiny job, learns (its greedy choice moves from the untrained one to
// the optimum), is deterministic for a seed, and on random small jobs never reports a time its
// configuration does not have.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "models/pipeline/autopipe_planner.hpp"
#include "models/pipeline/one_f_one_b.hpp"
#include "models/pipeline/rl_planner.hpp"

using namespace mlsim;
using namespace mlsim::pipeline;

namespace {

std::vector<LayerCost> equal_layers(std::size_t n) {
  return std::vector<LayerCost>(n, LayerCost{1, 1, 0, 0});
}

Conditions conditions(const std::vector<LayerCost>& l, std::vector<double> speeds,
                      double bandwidth) {
  Conditions c;
  for (double s : speeds) c.hosts.push_back(profiled_host(l, s));
  c.bandwidth.assign(speeds.size(), bandwidth);
  c.latency_out.assign(speeds.size(), 0);
  c.latency_in.assign(speeds.size(), 0);
  return c;
}

}  // namespace

TEST(RlPlanner, FindsTheHandComputedOptimum) {
  // As AutoPipePlanner.FindsTheHandComputedOptimum: four layers of f = b = 1 s, host 1 at half
  // speed. 1 | 3 -> 12 s, 2 | 2 -> 8 s, 3 | 1 -> 6 s, one stage on both hosts 8 s. The untrained
  // policy (zero weights) is uniform and its greedy choice the first action, 1 | 3; after 64
  // episodes the greedy choice is the optimum. The balance feature of the first stage's actions
  // (ideal I = (8 + 16) / 2 / 2 = 6 s): j = 1, 2, 3 -> e = 2/6 - 1, 4/6 - 1, 0; both hosts
  // -> 16 / 2 / 6 - 1 = 1/3; the optimum is the one with e = 0.
  const auto l = equal_layers(4);
  const Conditions c = conditions(l, {1, 0.5}, 1e9);
  for (bool straight : {true, false}) {
    RlPlanner agent({128, 16, 0.2}, RandomStream(7, "rl"));  // the default step
    const PlannerOptions o{straight, {}};
    EXPECT_EQ(agent.greedy(l, c, o).first, (std::vector<std::size_t>{0, 1, 4}));
    const Plan plan = agent.plan(l, c, o);
    EXPECT_EQ(plan.partition.first, (std::vector<std::size_t>{0, 3, 4})) << straight;
    EXPECT_NEAR(plan.seconds_per_minibatch, 6, 1e-9);
    EXPECT_EQ(agent.greedy(l, c, o).first, (std::vector<std::size_t>{0, 3, 4})) << straight;
    // Configurations are timed once: 3 straight, 4 with replication, at most.
    EXPECT_LE(plan.evaluated, straight ? 3u : 4u);
    // It learned that balance matters: the weight of e^2 is negative.
    EXPECT_LT(agent.weights()[1], 0);
  }
}

TEST(RlPlanner, SameSeedSamePlan) {
  const auto l = equal_layers(9);
  const Conditions c = conditions(l, {1, 0.7, 0.4}, 1e9);
  auto run = [&](std::uint64_t seed) {
    RlPlanner agent({96, 16, 0.05}, RandomStream(seed, "rl"));
    const Plan p = agent.plan(l, c, {false, {}});
    return std::make_tuple(p.partition.first, p.partition.replicas, p.seconds_per_minibatch,
                           p.evaluated, agent.weights());
  };
  EXPECT_EQ(run(3), run(3));
  // Another seed draws other episodes.
  EXPECT_NE(std::get<4>(run(3)), std::get<4>(run(4)));
}

TEST(RlPlanner, NeverBeatsTheOptimumAndReportsTrueTimes) {
  // Random small jobs: the agent's configuration uses every host, its reported time is the timing
  // model's, and is never below the exhaustive optimum; on most jobs it reaches it.
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(0.1, 1);
  int optimal = 0;
  constexpr int kTrials = 30;
  for (int trial = 0; trial < kTrials; ++trial) {
    const std::size_t hosts = 2 + rng() % 3, n = hosts + rng() % 5;
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
    RlPlanner agent({128, 16, 0.05}, RandomStream(trial, "rl"));
    const Plan plan = agent.plan(l, c, {false, {}});
    const Plan best = exhaustive_plan(l, c, {false, {}});
    EXPECT_EQ(plan.partition.hosts_used(), hosts);
    EXPECT_EQ(plan.partition.first.back(), n);
    EXPECT_EQ(steady_state_seconds(l, plan.partition, c), plan.seconds_per_minibatch);
    EXPECT_GE(plan.seconds_per_minibatch, best.seconds_per_minibatch * (1 - 1e-12));
    optimal += plan.seconds_per_minibatch <= best.seconds_per_minibatch * (1 + 1e-9);
  }
  std::cout << "RL planner optimal on " << optimal << " of " << kTrials << " jobs\n";
  EXPECT_GE(optimal, kTrials / 2);
}
