// Pipeline-parallel jobs in the cluster's detailed mode (models/cluster/pipeline_job.hpp): the
// stage split, a two-stage job alone on a small fabric under GPipe and 1F1B against hand-worked
// times, and a property over random streams of data-parallel and pipeline jobs sharing one
// fabric.
#include <gtest/gtest.h>

#include <numeric>

#include <cmath>
#include <random>
#include <set>
#include <sstream>

#include "models/cluster/communication_mode.hpp"
#include "models/cluster/pipeline_job.hpp"
#include "models/pipeline/pipeline_costs.hpp"
#include "sim_core/hardware/dnn_profile.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "tests/cluster/test_support.hpp"
#include "tests/support/platform_bench.hpp"

using namespace mlsim;
using namespace mlsim::cluster;
using namespace mlsim::cluster::testing;

namespace {

constexpr double kHostBandwidth = 4e6;  // bytes/s
constexpr std::int64_t M = 1'000'000;
using Kind = training::PipelineSchedule::Kind;

struct Layer {
  double forward_s, backward_s;
  std::int64_t parameters, activation_bytes;
};

// A model of `layers` on every host of `topology`; `stages` > 1 makes it a pipeline.
TrainingModel model(const Topology& topology, const std::string& scheduler, const std::string& sync,
                    const std::vector<Layer>& layers, std::size_t stages = 1,
                    Kind schedule = Kind::kOneFOneB, std::size_t micro_batches = 1,
                    training::SchedulerConfig config = {}) {
  TrainingModel m;
  m.name = scheduler + "_" + sync + "_" + std::to_string(stages);
  m.scheduler = scheduler;
  m.sync = sync;
  m.make_scheduler = training::training_policies().schedulers.get(scheduler, "").value;
  m.make_sync = training::training_policies().syncs.get(sync, "").value;
  m.config = config;
  auto times = std::make_shared<ProfileSeconds>();
  for (const Layer& l : layers) {
    times->push_back({l.forward_s, l.backward_s});
    m.parameters.push_back(l.parameters);
    m.reference_iteration_s += l.forward_s + l.backward_s;
    m.reference_layer_s.push_back(l.forward_s + l.backward_s);
    m.activation_bytes.push_back(l.activation_bytes);
  }
  m.times.assign(topology.nodes().size(), nullptr);
  for (NodeId h : topology.hosts()) m.times[h] = times;
  m.pipeline.stages = stages;
  m.pipeline.schedule = schedule;
  m.pipeline.micro_batches = micro_batches;
  return m;
}

// Two leaves of two hosts under one spine at 2:1 (each uplink 4e6 B/s, a host's own rate).
Topology two_leaves() {
  return build_topology(
      LeafSpineSpec{2, 2, 1, 2.0, LinkSpec{Bandwidth{kHostBandwidth}, Time::zero()}, Time::zero()});
}

}  // namespace

// Stage s ends where the compute before it first reaches s / stages of the whole, every stage
// keeping a layer; replicas floor(hosts / stages); fewer hosts than stages, fewer stages.
TEST(PipelineJobs, StagesSplitTheComputeAndTheHosts) {
  // 1 + 1 + 2 = 4 s; half is 2 s, reached after layer 1: stages [0, 2), [2, 3).
  StageLayout l = split_stages({1, 1, 2}, 2, 5);
  EXPECT_EQ(l.first_layer, (std::vector<std::size_t>{0, 2, 3}));
  EXPECT_EQ(l.replicas, (std::vector<std::size_t>{2, 2}));  // 5 hosts, 2 stages: the fifth idles
  EXPECT_EQ(l.workers(), 4u);
  EXPECT_EQ(l.rounds_multiple(), 2u);
  // One heavy first layer: thirds at 4 and 8 of 12 s are both passed at layer 0, yet every
  // stage keeps a layer.
  l = split_stages({10, 1, 1}, 3, 3);
  EXPECT_EQ(l.first_layer, (std::vector<std::size_t>{0, 1, 2, 3}));
  l = split_stages({1, 1, 1, 1}, 4, 2);  // two hosts: two stages of one replica
  EXPECT_EQ(l.first_layer, (std::vector<std::size_t>{0, 2, 4}));
  EXPECT_EQ(l.replicas, (std::vector<std::size_t>{1, 1}));
  // Replicas per stage: stage s starts after the earlier stages' replicas; an iteration's
  // micro-batches are a multiple of every stage's replicas.
  l.replicas = {2, 3, 1};
  l.first_layer = {0, 1, 2, 3};
  EXPECT_EQ(l.first_worker(1), 2u);
  EXPECT_EQ(l.first_worker(2), 5u);
  EXPECT_EQ(l.workers(), 6u);
  EXPECT_EQ(l.rounds_multiple(), 6u);
}

// One job of two layers (forward 2 s, backward 4 s, 1M parameters, a 4 MB activation each, as
// profiled for one batch), two stages on hosts 0 and 2 (across the leaves: the activations
// cross both leaves' uplinks, at 4e6 B/s like the hosts' links), 4 micro-batches per replica.
// An iteration processes one profiled batch per host: each micro-batch is 2 / 4 of a batch, so
// ops take F = 1 s, B = 2 s and an activation (or its gradient) 2 MB = 0.5 s. One replica per
// stage: each update is local (no gradient crosses the network). One iteration.
//   GPipe (one flush): stage 0 F0..F3 in [0, 4], activations arrive at 1.5, 2.5, 3.5, 4.5;
//   stage 1 F0..F3 in [1.5, 5.5], B0..B3 in [5.5, 13.5], gradients arrive at 8, 10, 12, 14;
//   stage 0 B0..B3 in [8, 10], [10, 12], [12, 14], [14, 16]: the job ends at 16 s.
//   1F1B (in-flight limits 2 and 1): stage 0 F0 [0, 1], F1 [1, 2]; stage 1 F0 [1.5, 2.5],
//   B0 [2.5, 4.5] (gradient at 5), F1 [4.5, 5.5], B1 [5.5, 7.5] (at 8); stage 0 B0 [5, 7],
//   F2 [7, 8] (activation at 8.5), B1 [8, 10], F3 [10, 11] (at 11.5); stage 1 F2 [8.5, 9.5],
//   B2 [9.5, 11.5] (at 12), F3 [11.5, 12.5], B3 [12.5, 14.5] (at 15); stage 0 B2 [12, 14],
//   B3 [15, 17]: the job ends at 17 s.
// Compute alone: a worker's 4 x (1 + 2) = 12 s. Activations: 4 forward and 4 backward messages
// of 2 MB, 16 MB delivered.
TEST(PipelineJobs, TwoStageJobAloneTakesTheHandWorkedTime) {
  for (const auto& [kind, end] :
       std::vector<std::pair<Kind, double>>{{Kind::kGPipe, 16}, {Kind::kOneFOneB, 17}}) {
    SCOPED_TRACE(kind == Kind::kGPipe ? "gpipe" : "1f1b");
    test::PlatformBench p(two_leaves());
    CommunicationParams params;
    params.models.push_back(
        model(p.topology, "fifo", "ring", {{2, 4, M, 4 * M}, {2, 4, M, 4 * M}}, 2, kind, 4));
    CommunicationMode mode(p.engine, p.network, p.compute, params, RandomStream(1, "test"));
    std::vector<TrainingRecord> records;
    mode.set_observer([&](const TrainingRecord& r) { records.push_back(r); });
    JobSpec job;
    job.work = Time::s(12);
    mode.admit(job);
    EXPECT_EQ(job.iterations, 1u);  // 12 s of work / 12 s of compute per iteration
    double ended = -1;
    const std::vector<NodeId> hosts{0, 2};
    ASSERT_TRUE(mode.start(
        job, hosts, 0, [&] { ended = p.engine.now().seconds(); },
        [](JobRunner::Failure) { FAIL() << "no failure here"; }));
    p.engine.run();
    EXPECT_DOUBLE_EQ(ended, end);
    ASSERT_EQ(records.size(), 1u);
    const TrainingRecord& r = records[0];
    EXPECT_EQ(r.stage_first_layer, (std::vector<std::size_t>{0, 1, 2}));
    EXPECT_DOUBLE_EQ(r.compute_only_s, 12);
    EXPECT_EQ(r.activation_bytes_delivered, 16 * M);
    EXPECT_EQ(r.bytes_delivered, 0);
    // Worker 0 (stage 0) updated layer 0 only: once per backward under 1F1B, once per
    // iteration under GPipe; worker 1 layer 1.
    const std::size_t updates = kind == Kind::kGPipe ? 1 : 4;
    EXPECT_EQ(r.updates, (std::vector<std::vector<std::size_t>>{{updates, 0}, {0, updates}}));
    Results out;
    mode.report(out);
    EXPECT_EQ(out.metrics().at("detailed_pipeline_jobs"), 1);
    EXPECT_EQ(out.metrics().at("activation_bytes_delivered"), 16 * M);
    EXPECT_EQ(p.network.totals().bytes_delivered.count, 16 * M);
  }
}

// A cut's bytes on a profile with a skip edge (a residual block's input), as the pipeline
// model counts them (pipeline::layer_costs, LayerCost::cut_bytes: every activation made before
// the cut and consumed after it). Profile, one batch: L0 forward 1 s, backward 2 s, a 2 MB
// output; L1 1 s, 2 s, 4 MB; L2 2 s, 4 s, 4 bytes; edges L0 -> L1 -> L2 and L0 -> L2. The even
// split of two stages cuts after L1 (half of the 12 s is reached there): L0's output (read by
// L2) and L1's cross, 2 + 4 = 6 MB, where the last layer's output alone is 4 MB. Two stages on
// hosts 0 and 2 of the two leaves (every link 4e6 B/s, no latency), GPipe, M = 2 micro-batches
// of 2 / 2 = 1 profiled batch: stage 0 F = 2 s, B = 4 s; stage 1 F = 2 s, B = 4 s; a cut 1.5 s.
//   Stage 0 F0 [0, 2], F1 [2, 4]; activations [2, 3.5], [4, 5.5].
//   Stage 1 F0 [3.5, 5.5], F1 [5.5, 7.5], B0 [7.5, 11.5], B1 [11.5, 15.5]; gradients
//   [11.5, 13], [15.5, 17].
//   Stage 0 B0 [13, 17], B1 [17, 21]: the job ends at 21 s (20 s with the chain's 4 MB, 1 s a
//   cut: activations at 3 and 5, stage 1 ends B1 at 15, gradients at 12 and 16, stage 0 ends at
//   20). 2 activations and 2 gradients of 6 MB: 24 MB delivered.
TEST(PipelineJobs, ACutAcrossASkipEdgeSendsEveryActivationThatCrossesIt) {
  const char* const profile_text =
      "node1 -- Input0 -- forward_compute_time=0.000, backward_compute_time=0.000, "
      "activation_size=1000.0, parameter_size=0.000\n"
      "node2 -- L0 -- forward_compute_time=1000.0, backward_compute_time=2000.0, "
      "activation_size=2000000.0, parameter_size=0.000\n"
      "node3 -- L1 -- forward_compute_time=1000.0, backward_compute_time=2000.0, "
      "activation_size=4000000.0, parameter_size=0.000\n"
      "node4 -- L2 -- forward_compute_time=2000.0, backward_compute_time=4000.0, "
      "activation_size=4.0, parameter_size=0.000\n"
      "\tnode1 -- node2\n"
      "\tnode2 -- node3\n"
      "\tnode3 -- node4\n"
      "\tnode2 -- node4\n";
  std::istringstream in(profile_text);
  const std::vector<pipeline::LayerCost> cuts =
      pipeline::layer_costs(parse_pipedream_graph(in, "skip"));
  for (const bool chain : {false, true}) {
    SCOPED_TRACE(chain ? "chain" : "skip edge");
    test::PlatformBench p(two_leaves());
    CommunicationParams params;
    TrainingModel m = model(p.topology, "fifo", "ring",
                            {{1, 2, 0, 2 * M}, {1, 2, 0, 4 * M}, {2, 4, 0, 4}}, 2, Kind::kGPipe, 2);
    if (!chain)
      for (const pipeline::LayerCost& l : cuts) m.boundary_bytes.push_back(l.cut_bytes());
    // The planners' sizes carry the same cuts (the one source of a cut's bytes).
    const std::vector<pipeline::LayerCost> sizes = planner_layer_sizes(m);
    EXPECT_DOUBLE_EQ(sizes[0].cut_bytes(), 2 * M);
    EXPECT_DOUBLE_EQ(sizes[1].cut_bytes(), chain ? 4 * M : 6 * M);
    EXPECT_DOUBLE_EQ(sizes[2].cut_bytes(), chain ? 4 : 0);
    params.models.push_back(m);
    CommunicationMode mode(p.engine, p.network, p.compute, params, RandomStream(1, "test"));
    std::vector<TrainingRecord> records;
    mode.set_observer([&](const TrainingRecord& r) { records.push_back(r); });
    JobSpec job;
    job.work = Time::s(12);
    mode.admit(job);
    EXPECT_EQ(job.iterations, 1u);
    double ended = -1;
    ASSERT_TRUE(mode.start(
        job, std::vector<NodeId>{0, 2}, 0, [&] { ended = p.engine.now().seconds(); },
        [](JobRunner::Failure) { FAIL() << "no failure here"; }));
    p.engine.run();
    EXPECT_DOUBLE_EQ(ended, chain ? 20 : 21);
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0].stage_first_layer, (std::vector<std::size_t>{0, 2, 3}));
    EXPECT_EQ(records[0].activation_bytes_delivered, chain ? 16 * M : 24 * M);
    EXPECT_EQ(p.network.totals().bytes_delivered.count, chain ? 16 * M : 24 * M);
  }
}

// PipeDream's hybrid in a cluster job: a stage replicated over two hosts whose replicas
// all-reduce the stage's weights, chosen by PipeDream's optimizer (planner "pipedream") on a star
// of three hosts at 4e6 B/s, no latency. Profile: layer 0 forward 4 s, backward 8 s, 1M
// parameters (4 MB), an 8 MB activation; layer 1 forward 2 s, backward 4 s, 1M parameters.
// PipeDream's objective (pipedream_partitioner.hpp), B = 4e6 B/s:
//   layer 0 on 2 replicas, layer 1 on 1: max((12 + 4 x 1 x 4 MB / (2 B)) / 2, 6) = max(7, 6) = 7;
//   one stage on 3 replicas: (18 + 4 x 2 x 8 MB / (3 B)) / 3 = 7.78; layer 0 on 1 host: 12.
// So stage 0 = layer 0 on hosts 0, 1 (workers 0, 1), stage 1 = layer 1 on host 2. An iteration
// has N = M x lcm(2, 1) = 2M micro-batches and one profiled batch per host used, so each is
// 3 / N of a batch; host 0 runs the even micro-batches, host 1 the odd ones (round-robin). The
// ring all-reduce of layer 0's 4 MB over the two replicas is 2 steps of 2 MB, 0.5 s each.
// GPipe, M = 3 (6 micro-batches of half a batch: stage 0 F = 2, B = 4, stage 1 F = 1, B = 2,
// an activation or its gradient 4 MB):
//   Stage 0 forwards in [0, 2], [2, 4], [4, 6] on both hosts; at 2, 4 and 6 two activations share
//   host 2's downlink (2e6 B/s each): they arrive at 4, 6 and 8.
//   Host 2: F m0 [4, 5], m1 [5, 6], m2 [6, 7], m3 [7, 8], m4 [8, 9], m5 [9, 10]; then B m0
//   [10, 12], m1 [12, 14], ..., m5 [20, 22], each gradient 1 s alone on its uplink: at 13 (host
//   0), 15 (host 1), 17, 19, 21, 23.
//   Host 0: B m0 [13, 17], m2 [17, 21], m4 [21, 25]; host 1: B m1 [15, 19], m3 [19, 23],
//   m5 [23, 27]. The flush hands layer 0's gradient over at 25 and 27: the all-reduce [27, 28].
//   The job ends at 28 s; each replica of stage 0 updates once, host 2 once.
// 1F1B, M = 1 (2 micro-batches of 1.5 batches: stage 0 F = 6, B = 12, stage 1 F = 3, B = 6, an
// activation 12 MB; in-flight limits 2 for stage 0, 1 for stage 1):
//   Hosts 0, 1: F m0, F m1 in [0, 6]; both activations share host 2's downlink: at 12.
//   Host 2: F m0 [12, 15], B m0 [15, 21] (gradient at host 0 at 24), F m1 [21, 24], B m1 [24, 30]
//   (at host 1 at 33).
//   Host 0: B m0 [24, 36]; host 1: B m1 [33, 45]; the round's all-reduce [45, 46]: the job ends
//   at 46 s; each replica of stage 0 updates once (one backward each), host 2 twice.
// Compute alone: each host's 18 s either way. Traffic: 48 MB of activations and their
// gradients, the ring's 2 x (2 - 1) x 4 MB = 8 MB.
TEST(PipelineJobs, TwoStageJobWithAReplicatedStageTakesTheHandWorkedTime) {
  struct Case {
    Kind kind;
    std::size_t micro_batches;
    double end;
    std::size_t last_stage_updates;
  };
  for (const Case& c : std::vector<Case>{{Kind::kGPipe, 3, 28, 1}, {Kind::kOneFOneB, 1, 46, 2}}) {
    SCOPED_TRACE(c.kind == Kind::kGPipe ? "gpipe" : "1f1b");
    test::PlatformBench p(
        build_topology(StarSpec{3, LinkSpec{Bandwidth{kHostBandwidth}, Time::zero()}}));
    LinkConditions links(p.topology, p.network);
    CommunicationParams params;
    TrainingModel m = model(p.topology, "fifo", "ring", {{4, 8, M, 8 * M}, {2, 4, M, 4 * M}}, 1,
                            c.kind, c.micro_batches);
    m.pipeline.stages = 0;
    m.pipeline.planner = StagePlanner::kPipeDream;
    params.models.push_back(m);
    CommunicationMode mode(p.engine, p.network, p.compute, params, RandomStream(1, "test"));
    mode.set_links(&links);
    std::vector<TrainingRecord> records;
    mode.set_observer([&](const TrainingRecord& r) { records.push_back(r); });
    JobSpec job;
    job.work = Time::s(18);
    mode.admit(job);
    EXPECT_EQ(job.iterations, 1u);
    double ended = -1;
    const std::vector<NodeId> hosts = p.topology.hosts();
    ASSERT_EQ(hosts.size(), 3u);
    ASSERT_TRUE(mode.start(
        job, hosts, 0, [&] { ended = p.engine.now().seconds(); },
        [](JobRunner::Failure) { FAIL() << "no failure here"; }));
    p.engine.run();
    EXPECT_DOUBLE_EQ(ended, c.end);
    ASSERT_EQ(records.size(), 1u);
    const TrainingRecord& r = records[0];
    EXPECT_EQ(r.stage_first_layer, (std::vector<std::size_t>{0, 1, 2}));
    EXPECT_EQ(r.replicas, (std::vector<std::size_t>{2, 1}));
    EXPECT_EQ(r.micro_batches, c.micro_batches);
    EXPECT_DOUBLE_EQ(r.compute_only_s, 18);
    EXPECT_EQ(r.activation_bytes_delivered, 48 * M);
    EXPECT_EQ(r.bytes_delivered, 8 * M);
    EXPECT_EQ(r.updates,
              (std::vector<std::vector<std::size_t>>{{1, 0}, {1, 0}, {0, c.last_stage_updates}}));
    EXPECT_EQ(p.network.totals().bytes_delivered.count, 56 * M);
  }
}

// `pipeline.straight` (PipeDream's --straight_pipeline) reaches the planner: the job above (layer
// 0 forward 4 s, backward 8 s, an 8 MB activation; layer 1 forward 2 s, backward 4 s; 1M
// parameters, 4 MB, each) under 1F1B, M = 1, on a star of two hosts at 4e6 B/s, no latency.
// PipeDream's objective (pipedream_partitioner.hpp), B = 4e6 B/s:
//   one stage on 2 replicas: (18 + 4 x 1 x 8 MB / (2 B)) / 2 = 11; layer 0 on one host, layer 1
//   on the other: max(12, 6) = 12.
// Without straight it replicates: one stage of both layers on both hosts (data parallel), N = M x
// lcm(2) = 2 micro-batches of one profiled batch each, the ring all-reduce of 8 MB over two
// replicas moving 2 x (2 - 1) x 8 MB = 16 MB, no activations: each host F [0, 6], B [6, 18],
// then the stage's gradient handed over, the ring's 2 steps of 4 MB, 1 s each: ends at 20 s.
// Straight (a planner's straight
// pipeline uses every host, one per stage): stage 0 = layer 0 on host 0, stage 1 = layer 1 on
// host 1, N = 1 micro-batch of 2 / 1 = 2 profiled batches (stage 0 F = 8, B = 16, stage 1 F =
// 4, B = 8, an activation or its gradient 16 MB = 4 s):
//   host 0 F [0, 8], activation at 12; host 1 F [12, 16], B [16, 24], gradient at 28; host 0
//   B [28, 44]. No stage has two replicas, so no all-reduce: the job ends at 44 s with 32 MB of
//   activations and no gradient bytes.
// The two-layer job above (1F1B, M = 1, ring) planned by `planner` on a star of `hosts` hosts at
// 4e6 B/s with no latency: its one record and the time it ended.
namespace {
struct PlannedJobRun {
  TrainingRecord record;
  double ended = -1;
};
PlannedJobRun run_planned_two_layer_job(int hosts, StagePlanner planner, bool straight,
                                        double memory_per_host = 0) {
  test::PlatformBench p(
      build_topology(StarSpec{hosts, LinkSpec{Bandwidth{kHostBandwidth}, Time::zero()}}));
  LinkConditions links(p.topology, p.network);
  CommunicationParams params;
  TrainingModel m = model(p.topology, "fifo", "ring", {{4, 8, M, 8 * M}, {2, 4, M, 4 * M}}, 1,
                          Kind::kOneFOneB, 1);
  m.pipeline.stages = 0;
  m.pipeline.planner = planner;
  m.pipeline.straight = straight;
  if (memory_per_host > 0) {  // pipeline.memory: every host's GPU with this much
    m.pipeline.memory.constraint = true;
    m.pipeline.memory_capacity.assign(p.topology.nodes().size(), 0);
    for (NodeId h : p.topology.hosts()) m.pipeline.memory_capacity[h] = memory_per_host;
  }
  params.models.push_back(m);
  CommunicationMode mode(p.engine, p.network, p.compute, params, RandomStream(1, "test"));
  mode.set_links(&links);
  std::vector<TrainingRecord> records;
  mode.set_observer([&](const TrainingRecord& r) { records.push_back(r); });
  JobSpec job;
  job.work = Time::s(18);
  mode.admit(job);
  PlannedJobRun run;
  EXPECT_TRUE(mode.start(
      job, p.topology.hosts(), 0, [&] { run.ended = p.engine.now().seconds(); },
      [](JobRunner::Failure) { FAIL() << "no failure here"; }));
  p.engine.run();
  EXPECT_EQ(records.size(), 1u);
  if (!records.empty()) run.record = records[0];
  return run;
}
}  // namespace

TEST(PipelineJobs, StraightKeepsOneHostPerStageWherePipeDreamWouldReplicate) {
  struct Case {
    bool straight;
    std::vector<std::size_t> first_layer, replicas;
    double end;
    std::int64_t activation_bytes, gradient_bytes;
  };
  for (const Case& c : std::vector<Case>{{false, {0, 2}, {2}, 20, 0, 16 * M},
                                         {true, {0, 1, 2}, {1, 1}, 44, 32 * M, 0}}) {
    SCOPED_TRACE(c.straight ? "straight" : "not straight");
    const PlannedJobRun run = run_planned_two_layer_job(2, StagePlanner::kPipeDream, c.straight);
    const TrainingRecord& r = run.record;
    EXPECT_EQ(r.stage_first_layer, c.first_layer);
    EXPECT_EQ(r.replicas, c.replicas);
    EXPECT_EQ(r.activation_bytes_delivered, c.activation_bytes);
    EXPECT_EQ(r.bytes_delivered, c.gradient_bytes);
    EXPECT_DOUBLE_EQ(run.ended, c.end);
  }
}

// `pipeline.memory` reaches the planners (stage_memory.hpp, mlsim's accounting under 1F1B with
// one optimizer buffer, f = 1): the two-layer job above (layer 0: P = 4 MB of weights, A = 8 MB
// of activation; layer 1: 4 MB and 4 MB) on two hosts.
//   - Both layers on 2 replicas (data parallel, what dp and exact choose unconstrained, as
//     PipeDream does above: 20 s): k = (2 - 1 - 0) / 2 + 1 = 1 in flight, P (k + 1 + f) +
//     k (A + a_in) = 8 MB x 3 + 12 MB = 36 MB a host.
//   - Straight: layer 0 on host 0, k = 2: 4 MB x 4 + 2 x 8 MB = 32 MB; layer 1 on host 1, k = 1:
//     4 MB x 3 + (4 + 8 MB in) = 24 MB. Peak 32 MB.
// At 34 MB a host only the straight configuration fits: both planners return it and the job
// takes the straight case's 44 s with 32 MB of activations. At 30 MB none fits: the runner
// reports the job failed (Failure::kNoMemory) from an event at 0, runs nothing and counts it.
TEST(PipelineJobs, PlannersRespectTheGpuMemoryOfTheHostsPlaced) {
  for (StagePlanner planner : {StagePlanner::kDp, StagePlanner::kExact}) {
    SCOPED_TRACE(stage_planner_name(planner));
    const PlannedJobRun free = run_planned_two_layer_job(2, planner, false);
    EXPECT_EQ(free.record.replicas, (std::vector<std::size_t>{2}));
    EXPECT_DOUBLE_EQ(free.ended, 20);
    const PlannedJobRun roomy = run_planned_two_layer_job(2, planner, false, 36e6);
    EXPECT_EQ(roomy.record.replicas, (std::vector<std::size_t>{2}));  // 36 MB fits 36 MB
    const PlannedJobRun tight = run_planned_two_layer_job(2, planner, false, 34e6);
    EXPECT_EQ(tight.record.stage_first_layer, (std::vector<std::size_t>{0, 1, 2}));
    EXPECT_EQ(tight.record.replicas, (std::vector<std::size_t>{1, 1}));
    EXPECT_EQ(tight.record.activation_bytes_delivered, 32 * M);
    EXPECT_DOUBLE_EQ(tight.ended, 44);
  }
  // 30 MB: nothing fits.
  test::PlatformBench p(build_topology(StarSpec{2, LinkSpec{Bandwidth{kHostBandwidth}, {}}}));
  LinkConditions links(p.topology, p.network);
  CommunicationParams params;
  TrainingModel m = model(p.topology, "fifo", "ring", {{4, 8, M, 8 * M}, {2, 4, M, 4 * M}}, 1,
                          Kind::kOneFOneB, 1);
  m.pipeline.stages = 0;
  m.pipeline.planner = StagePlanner::kDp;
  m.pipeline.memory.constraint = true;
  m.pipeline.memory_capacity.assign(p.topology.nodes().size(), 30e6);
  params.models.push_back(m);
  EXPECT_TRUE(pipeline_memory_fits(params.models[0], StagePlanner::kDp,
                                   planner_layer_sizes(params.models[0]), {32e6, 32e6}));
  EXPECT_FALSE(pipeline_memory_fits(params.models[0], StagePlanner::kDp,
                                    planner_layer_sizes(params.models[0]), {30e6, 30e6}));
  CommunicationMode mode(p.engine, p.network, p.compute, params, RandomStream(1, "test"));
  mode.set_links(&links);
  std::vector<TrainingRecord> records;
  mode.set_observer([&](const TrainingRecord& r) { records.push_back(r); });
  JobSpec job;
  job.work = Time::s(18);
  mode.admit(job);
  int failures = 0;
  EXPECT_TRUE(mode.start(
      job, p.topology.hosts(), 0, [] { ADD_FAILURE() << "it cannot finish"; },
      [&](JobRunner::Failure why) {
        ++failures;
        EXPECT_EQ(why, JobRunner::Failure::kNoMemory);
        EXPECT_EQ(p.engine.now(), Time::zero());
      }));
  EXPECT_EQ(mode.running(), 1u);
  p.engine.run();
  EXPECT_EQ(failures, 1);
  EXPECT_EQ(mode.running(), 0u);
  EXPECT_TRUE(records.empty());
  EXPECT_EQ(p.network.totals().bytes_delivered.count, 0);
  Results out;
  mode.report(out);
  EXPECT_EQ(out.metrics().at("detailed_jobs_no_memory_fit"), 1);
  // Killed before its failure is reported (its host failed at the same instant): nothing after.
  JobSpec second = job;
  second.id = 1;
  EXPECT_TRUE(mode.start(
      second, p.topology.hosts(), 0, [] { ADD_FAILURE() << "killed"; },
      [](JobRunner::Failure) { ADD_FAILURE() << "killed"; }));
  mode.kill(1);
  p.engine.run();
  EXPECT_EQ(mode.running(), 0u);

  // Through the cluster: a 2-GPU job can only go on both one-GPU hosts, where nothing fits: it is
  // dropped at its arrival (0) with the reason, never started (the runner refuses no start;
  // before 2026-12-07 it was started there and dropped on the runner's kNoMemory); a 1-GPU job
  // after it runs on one host (job-level timing, no planner), from 0 to its 18 s.
  test::PlatformBench q(build_topology(StarSpec{2, LinkSpec{Bandwidth{kHostBandwidth}, {}}}));
  LinkConditions q_links(q.topology, q.network);
  CommunicationMode q_mode(q.engine, q.network, q.compute, params, RandomStream(1, "test"));
  q_mode.set_links(&q_links);
  ClusterSimulation sim(
      q.engine, one_type(2, 1, Policy::kFcfs),
      list_source({mlsim::cluster::testing::job(0, 2, 18), mlsim::cluster::testing::job(0, 1, 18)}),
      1, nullptr, q.topology.hosts());
  sim.set_runner(&q_mode);
  std::vector<JobRecord> ended;
  sim.set_observer([&](const JobRecord& r) { ended.push_back(r); });
  sim.start();
  q.engine.run();
  ASSERT_EQ(ended.size(), 2u);
  EXPECT_EQ(ended[0].spec.id, 0u);
  EXPECT_FALSE(ended[0].finished);
  EXPECT_NE(ended[0].drop_reason.find("pipeline.memory"), std::string::npos)
      << ended[0].drop_reason;
  EXPECT_EQ(ended[0].restarts, 0);
  EXPECT_TRUE(ended[1].finished);
  EXPECT_DOUBLE_EQ(ended[1].end.seconds(), 18);
  EXPECT_EQ(q_mode.running(), 0u);
  Results q_out;
  q_mode.report(q_out);
  EXPECT_EQ(q_out.metrics().at("detailed_jobs_no_memory_fit"), 0);
}

// A straight job placed on more hosts than its model has layers (three hosts, two layers) plans
// over the first two hosts with every planner and leaves the third idle: the same layout, bytes and
// 44 s as the straight case above (the third host's links carry nothing). It used to stop the run
// on an internal check of the planners ("a straight pipeline needs a layer per host").
TEST(PipelineJobs, StraightJobWithMoreHostsThanLayersLeavesTheExtraHostIdle) {
  for (StagePlanner planner : {StagePlanner::kPipeDream, StagePlanner::kDp, StagePlanner::kExact}) {
    SCOPED_TRACE(stage_planner_name(planner));
    const PlannedJobRun run = run_planned_two_layer_job(3, planner, true);
    const TrainingRecord& r = run.record;
    EXPECT_EQ(r.stage_first_layer, (std::vector<std::size_t>{0, 1, 2}));
    EXPECT_EQ(r.replicas, (std::vector<std::size_t>{1, 1}));
    EXPECT_EQ(r.activation_bytes_delivered, 32 * M);
    EXPECT_EQ(r.bytes_delivered, 0);
    EXPECT_DOUBLE_EQ(run.ended, 44);
  }
}

// Random streams of data-parallel and pipeline jobs (1F1B and GPipe, 2 or 3 stages, 1-4
// micro-batches, ring, tree and PS within stages, FIFO and ByteScheduler) placed by FCFS or EASY
// on one leaf-spine, listed jobs overriding some stage counts:
//   - every job is reported once, finished (if it fits the pool) or dropped;
//   - every finished job applied each update once: a data-parallel worker every layer's once per
//     iteration; a pipeline worker its own stage's layers once per backward (1F1B: M per
//     replica and iteration) or once per iteration (GPipe), the other stages' layers never;
//   - every gradient byte is aggregated once: within each stage of R replicas, ring and tree move
//     2 (R - 1) x the stage's gradient per round, PS 2 R x (colocated servers), one replica
//     nothing; the activations are (stages - 1) forward and as many backward messages per
//     micro-batch, each of the boundary's activation x stages / M;
//   - the network delivered exactly the jobs' gradients and activations, nothing is left in
//     flight or running.
TEST(PipelineJobs, MixedDataAndPipelineJobsFinishAndAggregateEveryGradientByteOnce) {
  std::mt19937_64 rng(11);
  auto integer = [&](std::int64_t a, std::int64_t b) {
    return std::uniform_int_distribution<std::int64_t>(a, b)(rng);
  };
  auto uniform = [&](double a, double b) { return std::uniform_real_distribution<>(a, b)(rng); };
  std::size_t megatron_finished = 0;
  for (int trial = 0; trial < 10; ++trial) {
    SCOPED_TRACE(::testing::Message() << "trial " << trial);
    test::PlatformBench p(build_topology(LeafSpineSpec{
        2, 4, 2, 1.5, LinkSpec{Bandwidth{kHostBandwidth}, Time::us(5)}, Time::us(5)}));
    CommunicationParams params;
    const std::vector<std::tuple<const char*, const char*, std::size_t, Kind>> setups = {
        {"fifo", "ring", 1, Kind::kOneFOneB},          {"bytescheduler", "ps", 1, Kind::kOneFOneB},
        {"fifo", "ring", 2, Kind::kOneFOneB},          {"fifo", "ps", 2, Kind::kGPipe},
        {"bytescheduler", "tree", 3, Kind::kOneFOneB}, {"fifo", "ring", 3, Kind::kGPipe}};
    for (const auto& [scheduler, sync, stages, kind] : setups) {
      std::vector<Layer> layers;
      for (std::int64_t l = integer(3, 5); l > 0; --l)
        layers.push_back({uniform(0.01, 0.2), uniform(0.01, 0.2), integer(0, 2) * integer(1, M),
                          12 * integer(1, 50'000)});  // x stages / M stays whole
      const training::SchedulerConfig config =
          std::string(scheduler) == "fifo"
              ? training::SchedulerConfig{}
              : training::SchedulerConfig{integer(1, M), integer(1, 3 * M)};
      std::size_t mb = static_cast<std::size_t>(integer(1, 3));
      if (mb == 3) mb = 4;  // 1, 2 or 4: divides 12 with 2 or 3 stages
      params.models.push_back(model(p.topology, scheduler, sync, layers, stages, kind, mb, config));
    }
    // Megatron jobs of 4 (TP 1, PP 2, DP 2) and 6 GPUs (TP 2, PP 1, DP 3), drawn by the jobs
    // asking for exactly that many: their graphs on the hosts placed, one TP group per host.
    mlsim::cluster::testing::set_megatron_test_hosts(p.hardware, p.topology, 2);
    params.models.push_back(mlsim::cluster::testing::megatron_test_model(
        1, 2, 2, static_cast<int>(integer(1, 3)), uniform(0.01, 0.1), uniform(0.01, 0.2),
        6 * integer(1, 300'000), integer(1, 200'000)));
    params.models.push_back(mlsim::cluster::testing::megatron_test_model(
        2, 1, 3, static_cast<int>(integer(1, 2)), uniform(0.01, 0.1), uniform(0.01, 0.2),
        6 * integer(1, 300'000), integer(1, 200'000)));
    CommunicationMode mode(p.engine, p.network, p.compute, params,
                           RandomStream(static_cast<std::uint64_t>(trial), "models"));
    LinkConditions links(p.topology, p.network);  // a Megatron job's executor routes over them
    mode.set_links(&links);
    ClusterParams c = one_type(8, 2, trial % 2 ? Policy::kEasyBackfill : Policy::kFcfs);
    c.estimate_factor = 1.5;
    std::vector<JobSpec> jobs;
    const std::size_t n = 20;
    double submit = 0;
    for (std::size_t j = 0; j < n; ++j) {
      submit += uniform(0, 0.6);
      JobSpec job = mlsim::cluster::testing::job(
          submit, static_cast<int>(std::vector<int>{1, 2, 3, 4, 6, 8, 17}[integer(0, 6)]),
          uniform(0.5, 2.5));
      if (integer(0, 3) == 0) {  // a listed job naming its model, some overriding the stages
        job.model = static_cast<int>(integer(2, 5));
        job.iterations = static_cast<std::uint64_t>(integer(1, 3));
        if (integer(0, 1)) job.stages = static_cast<int>(integer(1, 3));
      }
      jobs.push_back(job);
    }
    ClusterSimulation sim(p.engine, c, list_source(jobs), 1, nullptr, p.topology.hosts());
    sim.set_runner(&mode);
    std::vector<JobRecord> records;
    std::vector<TrainingRecord> trained;
    sim.set_observer([&](const JobRecord& r) { records.push_back(r); });
    mode.set_observer([&](const TrainingRecord& r) { trained.push_back(r); });
    sim.start();
    p.engine.run();
    ASSERT_EQ(records.size(), n);
    std::vector<int> seen(n, 0);
    for (const JobRecord& r : records) {
      ++seen[r.spec.id];
      EXPECT_EQ(r.finished, r.spec.gpus <= 16) << r.drop_reason;
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<long>(n));
    std::int64_t delivered = 0;
    std::size_t pipelines = 0;
    for (const TrainingRecord& t : trained) {
      SCOPED_TRACE(::testing::Message() << "job " << t.id << " model " << t.model);
      ASSERT_EQ(t.outcome, TrainingRecord::Outcome::kFinished);
      const TrainingModel& m = params.models[static_cast<std::size_t>(t.model)];
      EXPECT_EQ(t.bytes_sent, t.bytes_delivered);
      EXPECT_EQ(t.activation_bytes_sent, t.activation_bytes_delivered);
      delivered += t.bytes_delivered + t.activation_bytes_delivered;
      const auto iterations = static_cast<std::int64_t>(t.iterations);
      if (t.megatron) {
        // Its graph completed on pp x dp distinct hosts of tp GPUs each, with exactly the
        // messages and collectives its layout implies, every one between hosts through the
        // network, which delivered exactly their bytes.
        ++megatron_finished;
        ASSERT_NE(m.megatron, nullptr);
        // dp from the job's GPUs (tp on each host): MegatronModel::layout_for.
        const int job_gpus = std::accumulate(t.gpus.begin(), t.gpus.end(), 0);
        const llm_training::ParallelLayout l = m.megatron->layout_for(job_gpus);
        EXPECT_TRUE(t.graph_done);
        ASSERT_EQ(t.hosts.size(), static_cast<std::size_t>(l.pp * l.dp));
        EXPECT_EQ(std::set<NodeId>(t.hosts.begin(), t.hosts.end()).size(), t.hosts.size());
        for (int g : t.gpus) EXPECT_EQ(g, l.tp);
        const auto per = mlsim::cluster::testing::megatron_test_counts(*m.megatron, job_gpus);
        EXPECT_EQ(t.graph_messages, per.messages * t.iterations);
        EXPECT_EQ(t.graph_collectives, per.collectives * t.iterations);
        EXPECT_EQ(t.graph_network_collectives, per.network * t.iterations);
        EXPECT_EQ(
            t.graph_bytes_delivered,
            mlsim::cluster::testing::megatron_test_bytes_per_iteration(*m.megatron, job_gpus) *
                iterations);
        delivered += t.graph_bytes_delivered;
        EXPECT_GE((t.end - t.start).seconds(), t.compute_only_s - 1e-9);
        continue;
      }
      if (t.stage_first_layer.empty()) {
        for (const auto& worker : t.updates)
          for (std::size_t u : worker) EXPECT_EQ(u, t.iterations);
        const auto w = static_cast<std::int64_t>(t.hosts.size());
        EXPECT_EQ(t.bytes_delivered,
                  (m.sync == "ps" ? 2 * w : 2 * (w - 1)) * t.gradient_bytes * iterations);
        EXPECT_EQ(t.activation_bytes_delivered, 0);
        continue;
      }
      ++pipelines;
      const std::size_t stages = t.stage_first_layer.size() - 1;
      ASSERT_EQ(t.replicas.size(), stages);
      const auto r = static_cast<std::int64_t>(t.replicas[0]);
      for (std::size_t q : t.replicas) ASSERT_EQ(q, t.replicas[0]);  // the even split
      ASSERT_EQ(t.hosts.size(), stages * t.replicas[0]);
      EXPECT_EQ(t.micro_batches, m.pipeline.micro_batches);
      const auto mb = static_cast<std::int64_t>(t.micro_batches);
      const std::int64_t rounds = iterations * (t.gpipe ? 1 : mb);
      std::int64_t gradient = 0, activations = 0;
      for (std::size_t s = 0; s < stages; ++s) {
        std::int64_t stage_bytes = 0;
        for (std::size_t l = t.stage_first_layer[s]; l < t.stage_first_layer[s + 1]; ++l)
          stage_bytes += m.parameters[l] * m.bytes_per_parameter;
        if (r > 1) gradient += (m.sync == "ps" ? 2 * r : 2 * (r - 1)) * stage_bytes * rounds;
        if (s + 1 < stages)
          activations += 2 * iterations * mb * r *
                         m.activation_bytes[t.stage_first_layer[s + 1] - 1] *
                         static_cast<std::int64_t>(stages) / mb;
        for (std::size_t q = 0; q < t.replicas[s]; ++q)
          for (std::size_t l = 0; l < m.parameters.size(); ++l) {
            const bool own = l >= t.stage_first_layer[s] && l < t.stage_first_layer[s + 1];
            EXPECT_EQ(t.updates[s * t.replicas[s] + q][l],
                      own ? static_cast<std::size_t>(rounds) : 0u);
          }
      }
      EXPECT_EQ(t.bytes_delivered, gradient);
      EXPECT_EQ(t.activation_bytes_delivered, activations);
      EXPECT_GE((t.end - t.start).seconds(), t.compute_only_s - 1e-9);
    }
    EXPECT_GT(pipelines, 0u);
    EXPECT_EQ(p.network.totals().bytes_delivered.count, delivered);
    EXPECT_EQ(p.network.totals().transfers_in_flight, 0u);
    EXPECT_EQ(mode.running(), 0u);
  }
  EXPECT_GT(megatron_finished, 0u);
}
