// PipeDream's hierarchical solve (msr-fiddle/pipedream optimizer/optimizer_graph_hierarchical.py,
// main: compute_partitioning once per level of --all_num_machines / --network_bandwidths, then
// analyze_partitioning top level first): a two-level case by hand, one level against the
// one-level program, and the scenario key's errors.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "models/pipeline/pipedream_partitioner.hpp"

using namespace mlsim;
using namespace mlsim::pipeline;

namespace {

// Layers of forward + backward `t` seconds (half each) and `p` parameter bytes, activation `act`.
std::vector<LayerCost> hier_layers(const std::vector<double>& t, const std::vector<double>& p,
                                   double act = 0) {
  std::vector<LayerCost> out;
  for (std::size_t l = 0; l < t.size(); ++l) out.push_back({t[l] / 2, t[l] / 2, act, p[l]});
  return out;
}

Conditions hier_conditions(const std::vector<LayerCost>& l, std::size_t hosts, double bandwidth) {
  Conditions c;
  for (std::size_t h = 0; h < hosts; ++h) c.hosts.push_back(profiled_host(l));
  c.bandwidth.assign(hosts, bandwidth);
  c.latency_out.assign(hosts, 0);
  c.latency_in.assign(hosts, 0);
  return c;
}

}  // namespace

TEST(PipeDreamHierarchy, TwoServersOfTwoGpusByHand) {
  // Layers (f + b, parameters): 1 s / 0, 1 s / 0, 1 s / 0, 2 s / 2 B. Prefix sums T = 0 1 2 3 5,
  // P = 0 0 0 0 2. Two servers of two GPUs: B1 = 8 B/s inside a server, B2 = 1 B/s between.
  //
  // Level 1 (2 GPUs over B1, every start i: final_level false). One stage on m GPUs:
  // (T + 4 (m - 1) P / (B1 m)) / m, on 2: (T + P / 4) / 2; a split max(prefix, last stage).
  //   [0,1) 0.5   [0,2) min((2 + 0) / 2 = 1, max(1, 1) = 1) = 1 (the single stage: ties keep it)
  //   [0,3) min((3 + 0) / 2 = 1.5, max(1, 2), max(2, 1)) = 1.5
  //   [0,4) min((5 + 0.5) / 2 = 2.75, max(1, 4), max(2, 3), max(3, 2)) = 2.75
  //   [1,4) min((4 + 0.5) / 2 = 2.25, max(1, 3), max(2, 2) = 2) = 2
  //   [2,4) min((3 + 0.5) / 2 = 1.75, max(1, 2)) = 1.75
  //   [3,4) (2 + 0.5) / 2 = 1.25
  // Level 2 (2 servers over B2, final): a server's time for [i, j) is level 1's [i, j) on 2 GPUs.
  // Its single stage divides the synchronisation by the 2 GPUs within
  // (num_machines_within_machine):
  //   [0,4) on 2 servers: (2.75 + 4 x 1 x 2 / (1 x 2) / 2) / 2 = 2.375
  //   splits, one server each: max([0,1), [1,4)) = max(0.5, 2) = 2; max(1, 1.75) = 1.75;
  //   max([0,3), [3,4)) = max(1.5, 1.25) = 1.5  <- the best
  // Read back: [0,3) on one server, which level 1 keeps as one stage on its 2 GPUs; [3,4) on the
  // other, on its 2 GPUs. Flattened: [0,3) x2, [3,4) x2.
  const auto l = hier_layers({1, 1, 1, 2}, {0, 0, 0, 2});
  const Conditions c = hier_conditions(l, 4, 1);
  PipeDreamOptions two_levels;
  two_levels.levels = {{2, 8}, {2, 1}};
  const Partition p = pipedream_partition(l, c, two_levels);
  EXPECT_EQ(p.first, (std::vector<std::size_t>{0, 3, 4}));
  EXPECT_EQ(p.replicas, (std::vector<std::size_t>{2, 2}));
  EXPECT_DOUBLE_EQ(pipedream_plan(l, c, two_levels).objective_s, 1.5);
  // One level over the cluster's 1 B/s (today's program): layer 3 replicated r times costs
  // (2 + 8 (r - 1) / r) / r >= 2.44 for r >= 2 (3 at r = 2, 2.75 as data parallelism on 4), so it
  // stays on one GPU at 2 s and the first three layers take the other three: [0,3) x3, [3,4) x1.
  const Partition flat = pipedream_partition(l, c);
  EXPECT_EQ(flat.first, (std::vector<std::size_t>{0, 3, 4}));
  EXPECT_EQ(flat.replicas, (std::vector<std::size_t>{3, 1}));
  EXPECT_DOUBLE_EQ(pipedream_objective(l, flat, c), 2.0);
  EXPECT_DOUBLE_EQ(pipedream_plan(l, c).objective_s, 2.0);
}

TEST(PipeDreamHierarchy, TiesKeepDataParallelismAndStraightSplitsEveryServer) {
  // Layers 1 s each, no parameters, two servers of two GPUs. Level 1: [0,4) on 2 GPUs is 4 / 2 = 2
  // as one stage and max(2, 2) = 2 split in half: the tie keeps the single stage (the code
  // replaces it only when strictly better). Level 2: one stage on both servers, (2 + 0) / 2 = 1,
  // ties the split max([0,2), [2,4)) = max(1, 1): data parallelism on all four GPUs.
  const auto l = hier_layers({1, 1, 1, 1}, {0, 0, 0, 0});
  const Conditions c = hier_conditions(l, 4, 1);
  PipeDreamOptions o;
  o.levels = {{2, 8}, {2, 1}};
  const Partition p = pipedream_partition(l, c, o);
  EXPECT_EQ(p.first, (std::vector<std::size_t>{0, 4}));
  EXPECT_EQ(p.replicas, (std::vector<std::size_t>{4}));
  // --straight_pipeline (every level): a one-layer range has no configuration on a server's two
  // GPUs, [0,2) and [2,4) take 1 s ([0,1) | [1,2)); level 2 can only cut at 2: four stages.
  o.straight = true;
  const Partition s = pipedream_partition(l, c, o);
  EXPECT_EQ(s.first, (std::vector<std::size_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(s.replicas, (std::vector<std::size_t>{1, 1, 1, 1}));
}

TEST(PipeDreamHierarchy, OneLevelIsTheOneLevelProgram) {
  // One level of all the hosts over their own bandwidth is exactly the program without levels:
  // same configuration, on random jobs, replicated and straight, with and without the
  // activation option.
  std::mt19937_64 rng(14);
  std::uniform_real_distribution<double> time(0.1, 3), bytes(0, 4e9), act(0, 2e9);
  std::uniform_int_distribution<std::size_t> layer_count(1, 9), host_count(1, 5);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t n = layer_count(rng), H = host_count(rng);
    std::vector<double> t, p;
    for (std::size_t i = 0; i < n; ++i) {
      t.push_back(time(rng));
      p.push_back(bytes(rng));
    }
    const auto l = hier_layers(t, p, act(rng));
    const double B = 1e9 * (1 + trial % 7);
    const Conditions c = hier_conditions(l, H, B);
    for (bool straight : {false, true}) {
      if (straight && n < H) continue;
      for (bool activations : {false, true}) {
        PipeDreamOptions flat{.straight = straight, .activation_compression_ratio = {}};
        if (activations) flat.activation_compression_ratio = 1.5;
        PipeDreamOptions one = flat;
        one.levels = {{H, B}};
        const Partition a = pipedream_partition(l, c, flat), b = pipedream_partition(l, c, one);
        EXPECT_EQ(a.first, b.first) << trial;
        EXPECT_EQ(a.replicas, b.replicas) << trial;
        EXPECT_DOUBLE_EQ(pipedream_objective(l, a, c, flat), pipedream_objective(l, b, c, flat));
        // Both programs' own values are the configuration's objective.
        EXPECT_DOUBLE_EQ(pipedream_plan(l, c, one).objective_s, pipedream_objective(l, a, c, flat));
        EXPECT_DOUBLE_EQ(pipedream_plan(l, c, flat).objective_s,
                         pipedream_objective(l, a, c, flat));
      }
    }
  }
}

TEST(PipeDreamHierarchy, EveryHostUsedOnEveryShape) {
  // Property: the flattened configuration covers every layer once and uses every host (the
  // code's --use_fewer_machines is off), for every split of 8 hosts into levels.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> time(0.1, 3), bytes(0, 4e9);
  const std::vector<std::vector<PipeDreamOptions::Level>> shapes = {
      {{8, 1e9}}, {{2, 1e11}, {4, 1e9}}, {{4, 1e11}, {2, 1e9}}, {{2, 1e11}, {2, 1e10}, {2, 1e9}}};
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<double> t, p;
    for (int i = 0; i < 12; ++i) {
      t.push_back(time(rng));
      p.push_back(bytes(rng));
    }
    const auto l = hier_layers(t, p, 1e8);
    const Conditions c = hier_conditions(l, 8, 1e9);
    for (const auto& shape : shapes) {
      PipeDreamOptions o;
      o.levels = shape;
      const Partition q = pipedream_partition(l, c, o);
      EXPECT_EQ(q.first.front(), 0u);
      EXPECT_EQ(q.first.back(), l.size());
      for (std::size_t s = 0; s + 1 < q.first.size(); ++s) EXPECT_LT(q.first[s], q.first[s + 1]);
      EXPECT_EQ(q.hosts_used(), 8u) << trial;
    }
  }
}

TEST(PipeDreamHierarchy, OptionChargesTheFirstStagesOutputOnlyAsTheSecondsInput) {
  // --activation_compression_ratio 1. Layer 0: 1 s, 1 GB of parameters, a 1.2 GB output; layer
  // 1: 2 s, nothing else; 3 hosts at 1 GB/s. compute_partitioning's single-stage cells carry no
  // transfer; a split's last stage takes its input 2 x 1.2 / (1 x m'):
  //   [0,1) x1 | [1,2) x2: max(1, 2 / 2, 2.4 / 2) = 1.2   <- the best
  //   [0,1) x2 | [1,2) x1: max((1 + 4 x 1 / 2) / 2 = 1.5, 2, 2.4) = 2.4
  //   [0,2) x3: (3 + 4 x 2 x 1 / 3) / 3 = 17 / 9
  // Charging the first stage's output over its own one host too (mlsim before 2026-12-07) made
  // the first 2.4 and picked [0,2) x3.
  const std::vector<LayerCost> l{{0.5, 0.5, 1.2e9, 1e9}, {1, 1, 0, 0}};
  const Conditions c = hier_conditions(l, 3, 1e9);
  PipeDreamOptions o{.straight = false, .activation_compression_ratio = 1.0};
  const Partition p = pipedream_partition(l, c, o);
  EXPECT_EQ(p.first, (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_EQ(p.replicas, (std::vector<std::size_t>{1, 2}));
  EXPECT_DOUBLE_EQ(pipedream_objective(l, p, c, o), 1.2);
  EXPECT_DOUBLE_EQ(pipedream_plan(l, c, o).objective_s, 1.2);
  EXPECT_DOUBLE_EQ(pipedream_objective(l, Partition{{0, 2}, {3}}, c, o), 17.0 / 9);
  EXPECT_DOUBLE_EQ(pipedream_objective(l, Partition{{0, 1, 2}, {2, 1}}, c, o), 2.4);
  o.levels = {{3, 1e9}};  // the hierarchical program, one level: the same
  EXPECT_EQ(pipedream_partition(l, c, o), p);
}
