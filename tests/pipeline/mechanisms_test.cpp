// The pipeline model's mechanisms against cases computed by hand: PipeDream's partition, the 1F1B
// order, the 1F1B timing model, and a simulated run over the network.
#include <gtest/gtest.h>

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

// Layers with forward f, backward b (seconds), activation and parameter bytes.
std::vector<LayerCost> mech_layers(std::vector<std::pair<double, double>> fb, double act = 0,
                                   double params = 1e6) {
  std::vector<LayerCost> out;
  for (auto [f, b] : fb) out.push_back({f, b, act, params});
  return out;
}

// Hosts of the profile's GPU type at `speeds` (their layer times are the profile's); a transfer
// between two of them takes bytes / bandwidth + latency.
Conditions mech_conditions(const std::vector<LayerCost>& l, std::vector<double> speeds,
                           double bandwidth = 1e12, double latency = 0) {
  Conditions c;
  for (double s : speeds) c.hosts.push_back(profiled_host(l, s));
  c.bandwidth.assign(speeds.size(), bandwidth);
  c.latency_out.assign(speeds.size(), latency);
  c.latency_in.assign(speeds.size(), 0);
  return c;
}

// PipeDream's optimizer with --straight_pipeline (one host per stage).
const PipeDreamOptions kStraight{.straight = true, .activation_compression_ratio = {}};
// ... and with --activation_compression_ratio 1 (transfers in the objective, uncompressed).
const PipeDreamOptions kStraightWithActivations{.straight = true,
                                                .activation_compression_ratio = 1.0};

std::vector<Op> order(std::size_t stage, std::size_t stages, std::size_t m) {
  std::vector<Op> ops;
  std::size_t f = 0, b = 0;
  for (Op op; (op = next_op(stage, stages, f, b, m)) != Op::kNone;) {
    ops.push_back(op);
    (op == Op::kForward ? f : b)++;
  }
  return ops;
}

}  // namespace

TEST(PipeDreamPartition, BalancesStageTimes) {
  // f + b per layer: 1, 1, 1, 3. Two stages: cut after 1 -> max(1, 5) = 5; after 2 -> 4;
  // after 3 -> max(3, 3) = 3. Best: layers 0-2 | 3.
  const auto l = mech_layers({{0.5, 0.5}, {0.5, 0.5}, {0.5, 0.5}, {1, 2}});
  EXPECT_EQ(pipedream_partition(l, mech_conditions(l, {1, 1}), kStraight).first,
            (std::vector<std::size_t>{0, 3, 4}));
  EXPECT_DOUBLE_EQ(
      pipedream_objective(l, Partition{{0, 3, 4}, {}}, mech_conditions(l, {1, 1}), kStraight), 3);
  // GPU 0 at half speed: cut after 1 -> max(2, 5) = 5; after 2 -> max(4, 4) = 4; after 3 ->
  // max(6, 3) = 6. Best: 0-1 | 2-3.
  EXPECT_EQ(pipedream_partition(l, mech_conditions(l, {0.5, 1}), kStraight).first,
            (std::vector<std::size_t>{0, 2, 4}));
}

TEST(PipeDreamPartition, TimesEachStageOnItsOwnHost) {
  // Four layers of 1 s (f + b) as profiled. Stage 1's host has a GPU twice as fast (0.5 s a
  // layer): 1 | 3 -> max(1, 1.5) = 1.5; 2 | 2 -> max(2, 1) = 2; 3 | 1 -> 3. Best: 0 | 1-3.
  const auto l = mech_layers({{0.5, 0.5}, {0.5, 0.5}, {0.5, 0.5}, {0.5, 0.5}});
  Conditions c = mech_conditions(l, {1, 1});
  for (double& f : c.hosts[1].forward_s) f /= 2;
  for (double& b : c.hosts[1].backward_s) b /= 2;
  EXPECT_EQ(pipedream_partition(l, c, kStraight).first, (std::vector<std::size_t>{0, 1, 4}));
  EXPECT_DOUBLE_EQ(pipedream_objective(l, Partition{{0, 1, 4}, {}}, c, kStraight), 1.5);
  // The same host at half speed is back to 1 s a layer: 2 | 2 (tie with nothing: 1 | 3 -> 3).
  c.hosts[1].speed = 0.5;
  EXPECT_EQ(pipedream_partition(l, c, kStraight).first, (std::vector<std::size_t>{0, 2, 4}));
}

TEST(PipeDreamPartition, CountsTwiceTheActivationOnTheCutOnlyWithTheOption) {
  // Same layers; layer 2's activation is 2.5 GB on a 1 GB/s link. With
  // --activation_compression_ratio 1, cutting after it costs 2 x 2.5 = 5 s, so the 3 s split
  // loses to cutting after layer 1 (4 s). By default (no ratio) the released optimizer leaves
  // activations out of the objective and keeps the 3 s split.
  auto l = mech_layers({{0.5, 0.5}, {0.5, 0.5}, {0.5, 0.5}, {1, 2}});
  l[2].activation_bytes = 2.5e9;
  const Conditions c = mech_conditions(l, {1, 1}, 1e9);
  EXPECT_EQ(pipedream_partition(l, c, kStraightWithActivations).first,
            (std::vector<std::size_t>{0, 2, 4}));
  EXPECT_EQ(pipedream_partition(l, c, kStraight).first, (std::vector<std::size_t>{0, 3, 4}));
  EXPECT_DOUBLE_EQ(pipedream_objective(l, Partition{{0, 3, 4}, {}}, c, kStraightWithActivations),
                   5);
  EXPECT_DOUBLE_EQ(pipedream_objective(l, Partition{{0, 3, 4}, {}}, c, kStraight), 3);
}

TEST(OneFOneB, WarmUpThenAlternate) {
  const Op F = Op::kForward, B = Op::kBackward;
  // Stage 0 of 3 admits 3 minibatches, stage 1 two, stage 2 one.
  EXPECT_EQ(order(0, 3, 5), (std::vector<Op>{F, F, F, B, F, B, F, B, B, B}));
  EXPECT_EQ(order(1, 3, 5), (std::vector<Op>{F, F, B, F, B, F, B, F, B, B}));
  EXPECT_EQ(order(2, 3, 5), (std::vector<Op>{F, B, F, B, F, B, F, B, F, B}));
  EXPECT_EQ(order(0, 3, 2), (std::vector<Op>{F, F, B, B}));
}

// Two stages, f = 1 s, b = 2 s each, 3 minibatches. Stage 0: F0 F1 B0 F2 B1 B2; stage 1 alternates.
//   no transfer time: s0 F0 [0,1] F1 [1,2]; s1 F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7];
//   s0 B0 [4,6] F2 [6,7] B1 [7,9]; s1 F2 [7,8] B2 [8,10]; s0 B2 [10,12]: 12 s.
//   transfers 0.6 s (0.5 GB at 1 GB/s + 0.1 s latency), one at a time per sender:
//   s0 F0 [0,1] -> 1.6, F1 [1,2] -> 2.6; s1 F0 [1.6,2.6] B0 [2.6,4.6] -> 5.2, F1 [4.6,5.6],
//   B1 [5.6,7.6] -> 8.2; s0 B0 [5.2,7.2] F2 [7.2,8.2] -> 8.8, B1 [8.2,10.2]; s1 F2 [8.8,9.8]
//   B2 [9.8,11.8] -> 12.4; s0 B2 [12.4,14.4]: 14.4 s.
TEST(OneFOneB, TimingModelMatchesHandSchedule) {
  StageCosts costs{.first_host = {0, 1, 2},
                   .forward_s = {1, 1},
                   .backward_s = {2, 2},
                   .boundary_bytes = {0},
                   .parameter_bytes = {0, 0}};
  EXPECT_DOUBLE_EQ(estimate_1f1b(costs, mech_conditions({}, {1, 1}), 3), 12);
  costs.boundary_bytes = {0.5e9};
  EXPECT_NEAR(estimate_1f1b(costs, mech_conditions({}, {1, 1}, 1e9, 0.1), 3), 14.4, 1e-9);
}

namespace {

TrainingParams two_stage_params(std::size_t minibatches) {
  TrainingParams p;
  p.layers = mech_layers({{1, 2}, {1, 2}}, 0.5e9);
  p.minibatches = minibatches;
  p.samples_per_minibatch = 32;
  return p;
}

}  // namespace

TEST(PipelineTraining, SimulatedRunMatchesTheHandSchedule) {
  // The schedule above on a star: each transfer crosses two links of 50 ms (0.1 s) at 1 GB/s.
  const Outcome r = simulate(two_stage_params(3), 2, 1e9, Time::ms(50));
  EXPECT_DOUBLE_EQ(r.results.metrics().at("completed"), 1);
  EXPECT_NEAR(r.results.metrics().at("time_s"), 14.4, 1e-8);
  EXPECT_NEAR(r.results.metrics().at("throughput_samples_per_s"), 3 * 32 / 14.4, 1e-6);
  // Each minibatch crosses the boundary twice (activation, gradient); nothing is lost.
  EXPECT_EQ(r.totals.transfers_started, 6u);
  EXPECT_EQ(r.totals.transfers_delivered, 6u);
  EXPECT_EQ(r.totals.bytes_delivered.count, std::int64_t{6} * 500'000'000);
}

// Activations and gradients are send_recv calls of the collective layer and pay its costs: with
// a 0.1 s launch and 0.1 s of sender overhead per message, each crossing takes 0.8 s instead of
// 0.6 s (a host's messages leave at least 1 s apart, so no overhead waits for another). The hand
// schedule above with 0.8 s crossings: s0 F0 [0,1] -> 1.8, F1 [1,2] -> 2.8; s1 F0 [1.8,2.8]
// B0 [2.8,4.8] -> 5.6, F1 [4.8,5.8], B1 [5.8,7.8] -> 8.6; s0 B0 [5.6,7.6] F2 [7.6,8.6] -> 9.4,
// B1 [8.6,10.6]; s1 F2 [9.4,10.4] B2 [10.4,12.4] -> 13.2; s0 B2 [13.2,15.2]: 15.2 s
// (12 s + 4 crossings on the critical path x 0.8 s; 14.4 s = 12 + 4 x 0.6 without costs).
TEST(PipelineTraining, MessagesPayTheCollectiveLayersCosts) {
  TrainingParams p = two_stage_params(3);
  p.collective_costs.costs.launch = Time::ms(100);
  p.collective_costs.host.message_overhead = Time::ms(100);
  const Outcome r = simulate(p, 2, 1e9, Time::ms(50));
  EXPECT_NEAR(r.results.metrics().at("time_s"), 15.2, 1e-8);
  EXPECT_EQ(r.totals.transfers_delivered, 6u);
}

TEST(PipelineTraining, SimulatedSteadyStateMatchesTheTimingModel) {
  // Without contention on any link, the run and the timing model agree for any length.
  for (std::size_t m : {1u, 2u, 7u, 40u}) {
    TrainingParams p = two_stage_params(m);
    const Conditions c = mech_conditions(p.layers, {1, 1}, 1e9, 0.1);
    const StageCosts costs = stage_costs(p.layers, Partition{{0, 1, 2}, {}}, c);
    const double model = estimate_1f1b(costs, c, m);
    EXPECT_NEAR(simulate(p, 2, 1e9, Time::ms(50)).results.metrics().at("time_s"), model, 1e-8) << m;
  }
}

TEST(AutoPipe, RepartitionsWhenAGpuSlowsDown) {
  // Four layers of 2 s (f 1 + b 1); PipeDream splits 2 | 2 (4 s per stage). At 20 s GPU 1 drops
  // to half speed: 2 | 2 now takes 8 s on stage 1, while 3 | 1 takes max(6, 4) = 6 s.
  TrainingParams p;
  p.layers = mech_layers({{1, 1}, {1, 1}, {1, 1}, {1, 1}}, 1e3, 4e6);
  p.minibatches = 60;
  // The scenario's {"at": "20s", "host": 1, "speed": 0.5}: host 1 is node 1 of the star.
  PlatformEvent slow;
  slow.at = Time::s(20);
  slow.change = EventChange::kSpeed;
  slow.nodes = {1};
  slow.speed = 0.5;
  p.policy = Policy::kPipeDream;
  const Outcome pd = simulate(p, 2, 1e9, Time::ns(500), {slow});
  p.policy = Policy::kAutoPipe;
  const Outcome ap = simulate(p, 2, 1e9, Time::ns(500), {slow});

  EXPECT_EQ(pd.results.metrics().at("repartitions"), 0);
  EXPECT_EQ(ap.results.metrics().at("repartitions"), 1);
  // Layer 2 moves from GPU 1 to GPU 0 with its optimizer state (factor 2).
  EXPECT_DOUBLE_EQ(ap.results.metrics().at("migrated_bytes"), 2 * 4e6);
  const auto& parts = ap.results.details()["partitions"];
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1]["first_layer"], (std::vector<std::size_t>{0, 3, 4}));
  EXPECT_GE(parts[1]["from_s"].get<double>(), 20.0);
  // PipeDream: 8 s per minibatch after the change; AutoPipe: 6 s plus one drain.
  EXPECT_LT(ap.results.metrics().at("time_s"), pd.results.metrics().at("time_s") * 0.85);
  EXPECT_GT(ap.results.metrics().at("switch_time_s"), 0);
  for (const Outcome* r : {&pd, &ap}) {
    EXPECT_EQ(r->results.metrics().at("completed"), 1);
    EXPECT_EQ(r->totals.transfers_started, r->totals.transfers_delivered);
  }
}

TEST(AutoPipe, PlanIsNeverWorseThanPipeDreamUnderItsOwnModel) {
  // The search starts from PipeDream's partition and only takes improving moves.
  auto l = mech_layers({{0.2, 0.4}, {1, 2}, {0.3, 0.6}, {0.5, 1}, {0.1, 0.2}, {0.7, 1.4}}, 4e8);
  for (double bw : {1e8, 1e9, 1e10}) {
    const Conditions c = mech_conditions(l, {1, 0.7, 1.3}, bw, 1e-5);
    for (bool straight : {true, false}) {
      const Plan plan = autopipe_plan(l, c, {straight, {}});
      EXPECT_LE(
          plan.seconds_per_minibatch,
          steady_state_seconds(l, pipedream_partition(l, c, {straight, {}}), c) * (1 + 1e-12));
    }
  }
}
