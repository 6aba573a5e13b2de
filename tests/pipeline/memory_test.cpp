// GPU memory as a constraint of the planners (stage_memory.hpp): the accounting by hand, four
// layers on two GPUs where the unconstrained optimum does not fit (PipeDream's check and the
// exact planner, each by hand), and on random small jobs: every planner's plan fits, and the
// exact planner's constrained optimum is brute force's over the configurations that fit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "models/pipeline/autopipe_planner.hpp"
#include "models/pipeline/dp_planner.hpp"
#include "models/pipeline/pipedream_partitioner.hpp"
#include "models/pipeline/pipeline_model.hpp"
#include "models/pipeline/rl_planner.hpp"
#include "models/pipeline/stage_memory.hpp"
#include "sim_core/base/error.hpp"
#include "tests/hardware/gpu_fixtures.hpp"
#include "tests/pipeline/configurations.hpp"

using namespace mlsim;
using namespace mlsim::pipeline;

namespace {

constexpr double kGB = 1e9;

// Layers (f + b seconds, split evenly; activation out; parameters), GB.
//   L0: 3 s; 2 GB; 0     L1: 1 s; 3 GB; 0     L2: 2 s; 1 GB; 0     L3: 2 s; 1 GB; 0.5 GB
std::vector<LayerCost> mem_four_layers() {
  return {{1.5, 1.5, 2 * kGB, 0},
          {0.5, 0.5, 3 * kGB, 0},
          {1, 1, 1 * kGB, 0},
          {1, 1, 1 * kGB, 0.5 * kGB}};
}

// Hosts at speed 1 with links so fast that transfers cost nothing (below 1e-8 s), no latency.
Conditions mem_conditions(const std::vector<LayerCost>& l, std::size_t hosts) {
  Conditions c;
  for (std::size_t h = 0; h < hosts; ++h) c.hosts.push_back(profiled_host(l, 1));
  c.bandwidth.assign(hosts, 1e18);
  c.latency_out.assign(hosts, 0);
  c.latency_in.assign(hosts, 0);
  return c;
}

MemoryLimit mem_limit(double gb, std::size_t hosts) {
  return MemoryLimit{std::vector<double>(hosts, gb * kGB), 1};
}

}  // namespace

TEST(StageMemory, AccountingByHand) {
  const std::vector<LayerCost> l = mem_four_layers();
  // 1F1B, straight on 2 hosts: stage 0 keeps k = 2 minibatches in flight, stage 1 one.
  // bytes = P (k + 1 + f) + k (A + a_in), f = 1.
  const StageMemory one_f(l, mem_limit(9, 2), {}, 2);
  EXPECT_DOUBLE_EQ(one_f.bytes(0, 2, 0, 1), 2 * (2 + 3) * kGB);  // 10 GB
  EXPECT_DOUBLE_EQ(one_f.bytes(0, 1, 0, 1), 2 * 2 * kGB);        // 4 GB
  // [1, 4): 0.5 x (1 + 1 + 1) + 1 x (3 + 1 + 1 + 2) = 1.5 + 7.
  EXPECT_DOUBLE_EQ(one_f.bytes(1, 4, 1, 1), 8.5 * kGB);
  // One stage replicated on both: k = (2 - 1 - 0) / 2 + 1 = 1: 1.5 + 7 = 8.5 GB.
  EXPECT_DOUBLE_EQ(one_f.bytes(0, 4, 0, 2), 8.5 * kGB);
  // Three hosts, stage on hosts [0, 2): k = (3 - 1 - 0) / 2 + 1 = 2.
  const StageMemory three(l, mem_limit(9, 3), {}, 3);
  EXPECT_DOUBLE_EQ(three.bytes(0, 1, 0, 2), 2 * 2 * kGB);
  // GPipe, 4 micro-batches per flush: P (2 + f) + g (A + a_in): [1, 4): 1.5 + 4 x 7 = 29.5 GB.
  const StageMemory gpipe(l, mem_limit(9, 2), {training::PipelineSchedule::Kind::kGPipe, 4}, 2);
  EXPECT_DOUBLE_EQ(gpipe.bytes(1, 4, 1, 1), 29.5 * kGB);
  EXPECT_DOUBLE_EQ(gpipe.bytes(0, 2, 0, 1), 4 * 5 * kGB);
  // PipeDream's check: ceil(machines after / machines of the stage) x (A + P).
  const StageMemory pd(l, mem_limit(9, 3), {}, 3, MemoryRule::kPipeDream);
  EXPECT_DOUBLE_EQ(pd.bytes(0, 2, 0, 1), 2 * 5 * kGB);  // two machines after it
  EXPECT_DOUBLE_EQ(pd.bytes(0, 2, 0, 2), 1 * 5 * kGB);  // ceil(1 / 2) = 1
  EXPECT_DOUBLE_EQ(pd.bytes(2, 4, 2, 1), 0);            // the last stage: nothing counted
  // Fits on every host of the stage, each against its own memory.
  const StageMemory uneven(l, MemoryLimit{{20 * kGB, 8 * kGB}, 1}, {}, 2);
  EXPECT_FALSE(uneven.fits(0, 4, 0, 2));  // 8.5 GB > host 1's 8 GB
  EXPECT_TRUE(uneven.fits(0, 2, 0, 1));   // 10 GB on host 0's 20 GB
  // No limit: everything fits.
  const StageMemory none(l, {}, {}, 2);
  EXPECT_TRUE(none.fits(0, 4, 0, 2));
  EXPECT_TRUE(none.any_fits());
}

TEST(StageMemory, PipeDreamsCheckPicksADifferentSplitByHand) {
  // Straight, 2 hosts. PipeDream's objective is the largest stage time (no transfers):
  //   1 | 3: max(3, 5) = 5     2 | 2: max(4, 4) = 4     3 | 1: max(6, 2) = 6
  // so 2 | 2 without the constraint. Its check counts ceil(1 / 1) (A + P) for stage 0 (one
  // machine after it) and nothing for stage 1:
  //   1 | 3: 2 GB     2 | 2: 5 GB     3 | 1: 6 GB
  // With --memory_size 4.5 GB only 1 | 3 passes (5 s); with 8 GB, 2 | 2 passes although
  // mlsim's accounting gives its stage 0 10 GB (AccountingByHand).
  const std::vector<LayerCost> l = mem_four_layers();
  const Conditions c = mem_conditions(l, 2);
  PipeDreamOptions o{.straight = true, .activation_compression_ratio = {}};
  EXPECT_EQ(pipedream_partition(l, c, o).first, (std::vector<std::size_t>{0, 2, 4}));
  o.memory_size = {4.5 * kGB, 4.5 * kGB};
  const Partition p = pipedream_partition(l, c, o);
  EXPECT_EQ(p.first, (std::vector<std::size_t>{0, 1, 4}));
  EXPECT_DOUBLE_EQ(pipedream_objective(l, p, c, o), 5);
  o.memory_size = {8 * kGB, 8 * kGB};
  EXPECT_EQ(pipedream_partition(l, c, o).first, (std::vector<std::size_t>{0, 2, 4}));
  // 1.5 GB: no split passes stage 0's check -> the InputError at system.memory.
  o.memory_size = {1.5 * kGB, 1.5 * kGB};
  try {
    pipedream_partition(l, c, o);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "system.memory");
  }
  // With replication the single stage on both machines has none after it: it always passes.
  o.straight = false;
  const Partition r = pipedream_partition(l, c, o);
  EXPECT_EQ(r.stages(), 1u);
  EXPECT_EQ(r.replication(0), 2u);
}

TEST(StageMemory, ExactPlannerPicksADifferentSplitByHand) {
  // Straight, 2 hosts, transfers free: the 1F1B steady state is the largest stage time, so
  // unconstrained 2 | 2 at 4 s. mlsim's accounting (AccountingByHand) with 9 GB per GPU:
  //   1 | 3: stage 0 4 GB, stage 1 8.5 GB: fits      -> 5 s
  //   2 | 2: stage 0 10 GB: does not fit
  //   3 | 1: stage 0 2 x 6 = 12 GB: does not fit
  // so 1 | 3 at 5 s, for every planner (the only configuration that fits).
  const std::vector<LayerCost> l = mem_four_layers();
  const Conditions c = mem_conditions(l, 2);
  PlannerOptions o{.straight = true, .schedule = {}};
  const Plan free_plan = autopipe_plan(l, c, o);
  EXPECT_EQ(free_plan.partition.first, (std::vector<std::size_t>{0, 2, 4}));
  EXPECT_NEAR(free_plan.seconds_per_minibatch, 4, 1e-6);
  o.memory = mem_limit(9, 2);
  for (const Plan& p : {autopipe_plan(l, c, o), exhaustive_plan(l, c, o), dp_plan(l, c, o)}) {
    EXPECT_EQ(p.partition.first, (std::vector<std::size_t>{0, 1, 4}));
    EXPECT_NEAR(p.seconds_per_minibatch, 5, 1e-6);
  }
  RlPlanner rl({.episodes = 32, .batch = 8, .learning_rate = 0.2}, RandomStream(7));
  EXPECT_EQ(rl.plan(l, c, o).partition.first, (std::vector<std::size_t>{0, 1, 4}));
  // With replication: the single stage on both (8.5 GB, (8 + 0) / 2 = 4 s) also fits, and
  // beats 1 | 3.
  o.straight = false;
  const Plan replicated = autopipe_plan(l, c, o);
  EXPECT_EQ(replicated.partition.stages(), 1u);
  EXPECT_NEAR(replicated.seconds_per_minibatch, 4, 1e-6);
  // 8 GB: the replicated stage (8.5) and 1 | 3 (8.5) no longer fit; nothing does.
  o.memory = mem_limit(8, 2);
  for (bool straight : {true, false}) {
    o.straight = straight;
    EXPECT_THROW(autopipe_plan(l, c, o), InputError);
    EXPECT_THROW(exhaustive_plan(l, c, o), InputError);
    EXPECT_THROW(dp_plan(l, c, o), InputError);
    EXPECT_THROW(rl.plan(l, c, o), InputError);
  }
}

namespace {

// Independent of StageMemory: a host's bytes for stage [i, j) on hosts [h, h + r) of H.
// `gpipe_group` 0: 1F1B.
double mem_bytes_by_formula(const std::vector<LayerCost>& l, std::size_t i, std::size_t j,
                            std::size_t h, std::size_t r, std::size_t H, bool pipedream,
                            std::size_t gpipe_group = 0) {
  double P = 0, A = 0;
  for (std::size_t x = i; x < j; ++x) {
    P += l[x].parameter_bytes;
    A += l[x].activation_bytes;
  }
  if (pipedream)
    return std::ceil(static_cast<double>(H - h - r) / static_cast<double>(r)) * (A + P);
  const double a_in = i > 0 ? l[i - 1].activation_bytes : 0;
  if (gpipe_group > 0) return P * 3 + static_cast<double>(gpipe_group) * (A + a_in);
  const double k = static_cast<double>((H - 1 - h) / r + 1);
  return P * (k + 2) + k * (A + a_in);
}

bool mem_fits_by_formula(const std::vector<LayerCost>& l, const Partition& p, std::size_t H,
                         const std::vector<double>& cap, bool pipedream,
                         std::size_t gpipe_group = 0) {
  for (std::size_t s = 0; s < p.stages(); ++s)
    for (std::size_t x = p.first_host(s); x < p.first_host(s + 1); ++x)
      if (mem_bytes_by_formula(l, p.first[s], p.first[s + 1], p.first_host(s), p.replication(s), H,
                               pipedream, gpipe_group) > cap[x])
        return false;
  return true;
}

}  // namespace

TEST(StageMemory, EveryPlannersPlanFitsAndTheExactOneIsBruteForcesOverThoseThatFit) {
  std::mt19937 rng(20261206);
  std::uniform_real_distribution<double> u(0.1, 1);
  int bound = 0, infeasible = 0, gpipe = 0;
  for (int trial = 0; trial < 80; ++trial) {
    const std::size_t H = 2 + rng() % 2, n = H + rng() % (7 - H);
    std::vector<LayerCost> l;
    for (std::size_t i = 0; i < n; ++i)
      l.push_back({u(rng), 2 * u(rng), u(rng) * kGB, u(rng) * kGB});
    Conditions c;
    for (std::size_t h = 0; h < H; ++h) {
      c.hosts.push_back(profiled_host(l, 0.3 + u(rng)));
      c.bandwidth.push_back(1e9 * (0.2 + u(rng)));
      c.latency_out.push_back(1e-5);
      c.latency_in.push_back(1e-5);
    }
    const bool straight = trial % 3 == 0;
    // 4 to 16 GB per host: most cases bind, a few leave nothing (26 and 6 of 80 today).
    std::vector<double> cap;
    for (std::size_t h = 0; h < H; ++h) cap.push_back((4 + 12 * u(rng)) * kGB);
    // Every fourth job under GPipe with 2 to 4 micro-batches per flush.
    const std::size_t group = trial % 4 == 3 ? 2 + static_cast<std::size_t>(trial) % 3 : 0;
    PlannerOptions o{.straight = straight, .schedule = {}};
    if (group > 0) {
      o.schedule = {training::PipelineSchedule::Kind::kGPipe, group};
      ++gpipe;
    }
    const Plan free_plan = autopipe_plan(l, c, o);
    o.memory = MemoryLimit{cap, 1};
    // Brute force over the configurations that fit (a GPipe one that deadlocks is infinite).
    double best = std::numeric_limits<double>::infinity();
    bool any_fits = false;
    test_support::each_configuration(n, H, straight, [&](const Partition& p) {
      if (!mem_fits_by_formula(l, p, H, cap, false, group)) return;
      any_fits = true;
      best = std::min(best, steady_state_seconds(l, p, c, o.schedule));
    });
    RlPlanner rl({.episodes = 24, .batch = 8, .learning_rate = 0.2}, RandomStream(trial));
    if (any_fits && !std::isfinite(best)) continue;  // only deadlocking ones fit: nothing to rank
    if (!any_fits) {
      ++infeasible;
      EXPECT_THROW(autopipe_plan(l, c, o), InputError) << trial;
      EXPECT_THROW(dp_plan(l, c, o), InputError) << trial;
      EXPECT_THROW(rl.plan(l, c, o), InputError) << trial;
      continue;
    }
    if (!mem_fits_by_formula(l, free_plan.partition, H, cap, false, group)) ++bound;
    const Plan exact = autopipe_plan(l, c, o);
    EXPECT_TRUE(mem_fits_by_formula(l, exact.partition, H, cap, false, group)) << trial;
    EXPECT_NEAR(exact.seconds_per_minibatch, best, 1e-9 * best) << trial;
    EXPECT_NEAR(exhaustive_plan(l, c, o).seconds_per_minibatch, best, 1e-9 * best) << trial;
    EXPECT_GE(exact.seconds_per_minibatch, free_plan.seconds_per_minibatch * (1 - 1e-12));
    for (const Plan& p : {dp_plan(l, c, o), rl.plan(l, c, o)}) {
      EXPECT_TRUE(mem_fits_by_formula(l, p.partition, H, cap, false, group)) << trial;
      EXPECT_GE(p.seconds_per_minibatch, best * (1 - 1e-12)) << trial;
    }
    // PipeDream's program under its own check (schedule-free, as released): a configuration
    // that passes it, with its objective the smallest over those that do. (1F1B jobs only: the
    // note below holds for mlsim's 1F1B accounting.)
    if (group > 0) continue;
    PipeDreamOptions pd{.straight = straight, .activation_compression_ratio = {}};
    pd.memory_size = cap;
    double pd_best = std::numeric_limits<double>::infinity();
    test_support::each_configuration(n, H, straight, [&](const Partition& p) {
      if (mem_fits_by_formula(l, p, H, cap, true))
        pd_best = std::min(pd_best, pipedream_objective(l, p, c, pd));
    });
    const Partition q = pipedream_partition(l, c, pd);  // pd_best is finite: see the note below
    EXPECT_TRUE(mem_fits_by_formula(l, q, H, cap, true)) << trial;
    EXPECT_NEAR(pipedream_objective(l, q, c, pd), pd_best, 1e-12 * pd_best) << trial;
  }
  // PipeDream's check is never stricter than mlsim's accounting (ceil(M / r) <= k - 1 and the
  // weights, gradient and input are not counted), so a case some configuration fits under
  // mlsim's fits under PipeDream's too. The cases must exercise the constraint.
  std::printf("memory property: %d binding, %d with nothing fitting, %d under GPipe\n", bound,
              infeasible, gpipe);
  EXPECT_GE(bound, 15);
  EXPECT_GE(infeasible, 3);
}

TEST(StageMemory, ModelSetupRefusesAJobThatFitsNowhereAtTheJsonPath) {
  TrainingParams p;
  p.layers = mem_four_layers();
  p.hosts = {NodeId{0}, NodeId{1}};
  p.straight = true;
  p.policy = Policy::kAutoPipe;
  p.memory_constraint = true;
  static const GpuSpec gpu = test::make_gpu("G", 0, 10, 1000);  // 16 GiB
  NodeHardware hardware(2);
  for (NodeId h : p.hosts)
    hardware.set_host(h, HostHardware{.gpu = &gpu, .gpus = 1, .nic = nullptr, .intra_node = {}});
  nlohmann::json doc = {{"memory", {{"constraint", true}}}};
  const JsonReader system(doc, "system");
  // 16 GiB per GPU: 1 | 3 fits (AccountingByHand), so nothing is thrown and each host gets its
  // GPU's memory.
  apply_memory_limit(p, hardware, system);
  EXPECT_EQ(p.memory.capacity, (std::vector<double>{16.0 * (1 << 30), 16.0 * (1 << 30)}));
  // A 4 GB override: nothing fits mlsim's accounting (AutoPipe's planners), the error names
  // system.memory.capacity; PipeDream's own check passes 1 | 3 (2 GB), so its policy runs.
  p.memory_capacity_override = 4 * kGB;
  p.policy = Policy::kPipeDream;
  apply_memory_limit(p, hardware, system);
  EXPECT_EQ(p.memory.capacity, (std::vector<double>{4 * kGB, 4 * kGB}));
  p.policy = Policy::kAutoPipe;
  try {
    apply_memory_limit(p, hardware, system);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "system.memory.capacity");
  }
  // Without the override, a GPU too small is named at system.memory.constraint with its name.
  static const GpuSpec small = [] {
    GpuSpec g = test::make_gpu("Tiny", 0, 10, 1000);
    g.hbm_capacity = Bytes{4'000'000'000};
    return g;
  }();
  for (NodeId h : p.hosts)
    hardware.set_host(h, HostHardware{.gpu = &small, .gpus = 1, .nic = nullptr, .intra_node = {}});
  p.memory_capacity_override.reset();
  try {
    apply_memory_limit(p, hardware, system);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "system.memory.constraint");
    EXPECT_NE(std::string(e.what()).find("Tiny"), std::string::npos) << e.what();
  }
  // The constraint off: nothing is checked, no limit.
  p.memory_constraint = false;
  apply_memory_limit(p, hardware, system);
  EXPECT_FALSE(p.memory.active());
}
