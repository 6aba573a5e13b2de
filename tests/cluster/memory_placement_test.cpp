// Placement of pipeline jobs whose stages must fit their GPUs' memory (docs/cluster.md,
// "Pipeline-parallel jobs", GPU memory): the cluster spreads a job the runner refuses on place()'s
// hosts over more hosts, keeps it queued while no spread fits, and drops it at arrival only when
// no spread over the whole cluster could. NodePool::spread by hand, one hand-worked run per case
// and a property over random job streams.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "models/cluster/communication_mode.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "tests/cluster/test_support.hpp"
#include "tests/support/platform_bench.hpp"

using namespace mlsim;
using namespace mlsim::cluster;
using namespace mlsim::cluster::testing;

namespace memory_placement_test {

constexpr double MB = 1e6;

// Three layers, each forward 1 s, backward 2 s, 2.5M parameters (10 MB of fp32 weights) and a
// 1 MB output activation; 1F1B, M = 1, the `dp` planner under mlsim's accounting with one
// optimizer buffer (stage_memory.hpp: a host of stage [i, j) needs P (k + 1 + 1) + k (A + a_in),
// k = (W - 1 - h) / r + 1 minibatches in flight on hosts [h, h + r) of W).
// The least a host needs over the configurations on W hosts:
//   W = 2: data parallel 30 x 3 + 3 = 93 MB; [L0][L1 L2]: 10 x 4 + 2 x 1 = 42 and
//          20 x 3 + (2 + 1) = 63 MB; [L0 L1][L2]: 20 x 4 + 2 x 2 = 84 MB. Least: 63 MB.
//   W = 3: straight [L0][L1][L2]: k = 3, 2, 1: 10 x 5 + 3 = 53, 10 x 4 + 2 x 2 = 44,
//          10 x 3 + 2 = 32 MB; any other cut keeps a stage of two layers (>= 63 MB). Least: 53 MB.
//   W = 4: [L0] x 2 replicas, [L1], [L2]: k = 2, 2, 1: 42, 44, 32 MB. Least: 44 MB.
//   Any W: a first stage of L0 before later stages has k >= 2 (42 MB at least), data parallel
//          93 MB: 40 MB never fits.
// So at 55 MB a job fits on one host (job-level timing, nothing planned) or on 3 hosts or more,
// not on 2; at 40 MB only on one host.
TrainingModel three_layer_model(const Topology& topology, double memory_per_host) {
  TrainingModel m;
  m.name = "three_layers";
  m.scheduler = "fifo";
  m.sync = "ring";
  m.make_scheduler = training::training_policies().schedulers.get("fifo", "").value;
  m.make_sync = training::training_policies().syncs.get("ring", "").value;
  auto times = std::make_shared<ProfileSeconds>();
  for (int l = 0; l < 3; ++l) {
    times->push_back({1, 2});
    m.parameters.push_back(2'500'000);
    m.reference_iteration_s += 3;
    m.reference_layer_s.push_back(3);
    m.activation_bytes.push_back(1'000'000);
  }
  m.times.assign(topology.nodes().size(), nullptr);
  for (NodeId h : topology.hosts()) m.times[h] = times;
  m.pipeline.stages = 0;
  m.pipeline.planner = StagePlanner::kDp;
  m.pipeline.schedule = training::PipelineSchedule::Kind::kOneFOneB;
  m.pipeline.micro_batches = 1;
  m.pipeline.memory.constraint = true;
  m.pipeline.memory_capacity.assign(topology.nodes().size(), 0);
  for (NodeId h : topology.hosts()) m.pipeline.memory_capacity[h] = memory_per_host;
  return m;
}

// A cluster of `groups` (one GPU type; pool node i = host i of a star at 1e9 B/s) running the
// three-layer model at `memory_per_host` in the detailed mode.
struct MemoryRun {
  std::vector<JobRecord> records;  // in order of leaving
  Results results;
  std::uint64_t queued = 0, running = 0;
  const JobRecord& of(std::uint64_t id) const {
    for (const JobRecord& r : records)
      if (r.spec.id == id) return r;
    throw std::runtime_error("no record for job " + std::to_string(id));
  }
};
MemoryRun run_with_memory(std::vector<NodeGroup> groups, Policy policy, double memory_per_host,
                          std::vector<JobSpec> jobs) {
  int nodes = 0;
  for (const NodeGroup& g : groups) nodes += g.nodes;
  test::PlatformBench p(build_topology(StarSpec{nodes, LinkSpec{Bandwidth{1e9}, Time::zero()}}));
  LinkConditions links(p.topology, p.network);
  CommunicationParams params;
  params.models.push_back(three_layer_model(p.topology, memory_per_host));
  CommunicationMode mode(p.engine, p.network, p.compute, params, RandomStream(1, "test"));
  mode.set_links(&links);
  ClusterParams cp;
  cp.types = {{"ref", 1.0}};
  cp.groups = std::move(groups);
  cp.policy = policy;
  ClusterSimulation sim(p.engine, cp, list_source(std::move(jobs)), 1, nullptr, p.topology.hosts());
  sim.set_runner(&mode);
  MemoryRun out;
  sim.set_observer([&](const JobRecord& r) { out.records.push_back(r); });
  sim.start();
  p.engine.run();
  sim.report(out.results);
  out.queued = sim.queued();
  out.running = sim.running();
  EXPECT_EQ(mode.running(), 0u);
  return out;
}

JobSpec data_parallel(JobSpec j) {
  j.stages = 1;  // a listed job's `stages: 1`: data parallel, no planner, no memory limit
  return j;
}

std::vector<Slice> slices(std::initializer_list<std::pair<int, int>> s) {
  std::vector<Slice> out;
  for (const auto& [node, gpus] : s) out.push_back({node, gpus});
  return out;
}

bool same_slices(const std::vector<Slice>& a, const std::vector<Slice>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const Slice& x, const Slice& y) {
    return x.node == y.node && x.gpus == y.gpus;
  });
}

}  // namespace memory_placement_test

using namespace memory_placement_test;

// The memory table above, as the planners' check computes it (so that the runs below rest on it).
TEST(MemoryPlacement, TheThreeLayerModelFitsTheHandWorkedHostCounts) {
  test::PlatformBench p(build_topology(StarSpec{4, LinkSpec{Bandwidth{1e9}, Time::zero()}}));
  const TrainingModel m = three_layer_model(p.topology, 0);
  const auto layers = planner_layer_sizes(m);
  auto fits = [&](std::size_t hosts, double mb) {
    return pipeline_memory_fits(m, StagePlanner::kDp, layers, std::vector<double>(hosts, mb * MB));
  };
  EXPECT_TRUE(fits(2, 63));
  EXPECT_FALSE(fits(2, 62.9));
  EXPECT_TRUE(fits(3, 53));
  EXPECT_FALSE(fits(3, 52.9));
  EXPECT_TRUE(fits(4, 44));
  EXPECT_FALSE(fits(4, 43.9));
  EXPECT_FALSE(fits(6, 41.9));
}

// NodePool::spread by hand on free counts [2, 2, 1, 0] (node 3 has nothing free):
//   3 GPUs on 3 nodes: nodes 0, 1, 2 (most free first), the split from the fullest: node 2 takes
//   min(1, ceil(3 / 3)) = 1, node 0 min(2, ceil(2 / 2)) = 1, node 1 the last 1;
//   4 GPUs on 3 nodes: node 2 takes 1, node 0 ceil(3 / 2) = 2, node 1 the last 1;
//   3 GPUs on 2 nodes: nodes 0 and 1, 2 + 1; 5 GPUs on 3 nodes: all 5 free, 2 + 2 + 1;
//   6 GPUs on 3 nodes: 5 free, no; 2 GPUs on 3 nodes: more nodes than GPUs, no; 4 nodes: only
//   three have a GPU free, no.
// With racks {0, 1, 1, 1}: 3 GPUs on 2 nodes fit rack 1 (nodes 1 and 2: 2 + 1), the only rack
// with two nodes free; on 3 nodes no rack has three, so across racks, the emptiest racks first
// (rack 1 with 3 free, then rack 0 with 2): nodes 1, 2, then 0.
TEST(MemoryPlacement, SpreadTakesTheEmptiestNodesAndSplitsEvenly) {
  NodePool pool({{"ref", 1.0}}, {{0, 4, 2}});
  const std::vector<int> free = {2, 2, 1, 0};
  EXPECT_TRUE(same_slices(pool.spread(free, 3, 0, 3).slices, slices({{0, 1}, {1, 1}, {2, 1}})));
  EXPECT_TRUE(same_slices(pool.spread(free, 4, 0, 3).slices, slices({{0, 2}, {1, 1}, {2, 1}})));
  EXPECT_TRUE(same_slices(pool.spread(free, 3, 0, 2).slices, slices({{0, 2}, {1, 1}})));
  EXPECT_TRUE(same_slices(pool.spread(free, 5, 0, 3).slices, slices({{0, 2}, {1, 2}, {2, 1}})));
  EXPECT_FALSE(pool.spread(free, 6, 0, 3).ok());
  EXPECT_FALSE(pool.spread(free, 2, 0, 3).ok());
  EXPECT_FALSE(pool.spread(free, 4, 0, 4).ok());
  EXPECT_EQ(pool.gpus_per_node(), (std::vector<int>{2, 2, 2, 2}));
  pool.set_racks({0, 1, 1, 1});
  EXPECT_TRUE(same_slices(pool.spread(free, 3, 0, 2).slices, slices({{1, 2}, {2, 1}})));
  EXPECT_TRUE(same_slices(pool.spread(free, 3, 0, 3).slices, slices({{1, 1}, {2, 1}, {0, 1}})));
}

// Three nodes of two GPUs at 55 MB a host, one 3-GPU job at 0. place() puts it on nodes 0 and 1
// (2 + 1 GPUs): two hosts need 63 MB. A spread over two nodes is two hosts again; over three
// (1 + 1 + 1) the straight pipeline needs 53 MB: it starts there at 0, and finishes. Before
// 2026-12-07 it was started on the two hosts and dropped (kNoMemory).
TEST(MemoryPlacement, AJobTheRunnerRefusesIsSpreadOverMoreHosts) {
  const MemoryRun r = run_with_memory({{0, 3, 2}}, Policy::kFcfs, 55 * MB, {job(0, 3, 9)});
  ASSERT_EQ(r.records.size(), 1u);
  EXPECT_TRUE(r.records[0].finished) << r.records[0].drop_reason;
  EXPECT_EQ(r.records[0].start, Time::zero());
  EXPECT_TRUE(same_slices(r.records[0].slices, slices({{0, 1}, {1, 1}, {2, 1}})));
  EXPECT_EQ(r.results.metrics().at("jobs_spread_for_memory"), 1);
  EXPECT_EQ(r.results.metrics().at("detailed_jobs_no_memory_fit"), 0);
  EXPECT_EQ(r.results.metrics().at("detailed_jobs_simulated"), 1);
}

// FCFS, 55 MB: job 0 (2 GPUs, 10 s) takes node 0 whole (best fit, one host: job-level timing,
// 0-10 s). Job 1 (3 GPUs) finds nodes 1 and 2 free: two hosts only, 63 MB: it waits (no spread
// over three nodes while node 0 is full), and is not dropped. At 10 s it spreads over all three
// (1 + 1 + 1) and starts. Job 2 (1 GPU, data parallel) waits behind it (FCFS) and then takes
// node 0's second GPU (best fit: every node has one free, the first).
TEST(MemoryPlacement, AJobThatFitsNowhereYetWaitsInsteadOfBeingDropped) {
  const MemoryRun r = run_with_memory({{0, 3, 2}}, Policy::kFcfs, 55 * MB,
                                      {job(0, 2, 10), job(0, 3, 9), data_parallel(job(0, 1, 5))});
  ASSERT_EQ(r.records.size(), 3u);
  for (const JobRecord& rec : r.records) EXPECT_TRUE(rec.finished) << rec.drop_reason;
  EXPECT_EQ(r.of(0).start, Time::zero());
  EXPECT_EQ(r.of(0).end, Time::s(10));
  EXPECT_EQ(r.of(1).start, Time::s(10));
  EXPECT_TRUE(same_slices(r.of(1).slices, slices({{0, 1}, {1, 1}, {2, 1}})));
  EXPECT_EQ(r.of(2).start, Time::s(10));
  EXPECT_TRUE(same_slices(r.of(2).slices, slices({{0, 1}})));
  EXPECT_EQ(r.of(2).end, Time::s(15));
  EXPECT_EQ(r.results.metrics().at("jobs_spread_for_memory"), 1);
  EXPECT_EQ(r.results.metrics().at("jobs_dropped"), 0);
}

// EASY, 55 MB. Job 0 (2 GPUs, 10 s) on node 0; job 1 (3 GPUs, the pipeline) waits and reserves:
// when job 0 ends (estimate 10 s) every node is free and a spread over three fits, so its
// reservation is at 10 s. Job 2 (2 GPUs, data parallel, 20 s) would take node 1 whole (best fit)
// past 10 s: the GPUs left at 10 s ([2, 0, 2]: 4 >= 3) would hold job 1 but only on two hosts,
// where its stages do not fit, so job 2 is not backfilled (counting GPUs alone, it would have
// been, and job 1 dropped at 10 s). Job 3 (1 GPU, data parallel, 20 s) is: on node 1 (best fit),
// it leaves [2, 1, 2] at 10 s, three nodes. At 10 s job 1 goes on nodes 0, 2, 1 (most free
// first; 1 GPU each), and job 2 on what is left, nodes 0 and 2 (one GPU each).
TEST(MemoryPlacement, EasyReservesWhereTheJobsStagesFitAndBackfillsOnlyWhatLeavesThemRoom) {
  const MemoryRun r = run_with_memory(
      {{0, 3, 2}}, Policy::kEasyBackfill, 55 * MB,
      {job(0, 2, 10), job(0, 3, 9), data_parallel(job(0, 2, 20)), data_parallel(job(0, 1, 20))});
  ASSERT_EQ(r.records.size(), 4u);
  for (const JobRecord& rec : r.records) EXPECT_TRUE(rec.finished) << rec.drop_reason;
  EXPECT_EQ(r.of(1).first_reservation, Time::s(10));
  EXPECT_EQ(r.of(3).start, Time::zero());
  EXPECT_TRUE(same_slices(r.of(3).slices, slices({{1, 1}})));
  EXPECT_EQ(r.of(1).start, Time::s(10));
  EXPECT_TRUE(same_slices(r.of(1).slices, slices({{0, 1}, {2, 1}, {1, 1}})));
  EXPECT_EQ(r.of(2).start, Time::s(10));
  EXPECT_TRUE(same_slices(r.of(2).slices, slices({{0, 1}, {2, 1}})));
  EXPECT_EQ(r.results.metrics().at("reservations_missed"), 0);
}

// 40 MB: the 3-GPU job fits no number of hosts (one node has only 2 GPUs; 2 hosts need 63 MB,
// 3 hosts 53 MB): dropped at its arrival (5 s) with the reason, never started (the runner saw
// nothing). The 2-GPU job fits one node (job-level timing) and runs 0-10 s.
TEST(MemoryPlacement, AJobNoPlacementCouldFitIsDroppedAtArrival) {
  const MemoryRun r =
      run_with_memory({{0, 3, 2}}, Policy::kFcfs, 40 * MB, {job(0, 2, 10), job(5, 3, 9)});
  ASSERT_EQ(r.records.size(), 2u);
  EXPECT_EQ(r.records[0].spec.id, 1u);  // dropped at 5 s, before job 0 ends
  EXPECT_FALSE(r.records[0].finished);
  EXPECT_NE(r.records[0].drop_reason.find("no placement on any number of hosts"), std::string::npos)
      << r.records[0].drop_reason;
  EXPECT_EQ(r.records[0].restarts, 0);
  EXPECT_TRUE(r.of(0).finished);
  EXPECT_EQ(r.of(0).end, Time::s(10));
  EXPECT_EQ(r.results.metrics().at("detailed_jobs_no_memory_fit"), 0);
  EXPECT_EQ(r.results.metrics().at("jobs_dropped"), 1);
  EXPECT_EQ(r.results.metrics().at("jobs_spread_for_memory"), 0);
}

// Over random streams (nodes of 1-3 GPUs, 40-100 MB a host, FCFS or EASY, pipeline and
// data-parallel jobs of 1-6 GPUs): every job is reported once, finished or dropped; a dropped one
// only at arrival, when no number of hosts it could be spread over (k nodes holding its GPUs,
// k <= its GPUs) fits its stages; a finished pipeline job ran on one host or on hosts where its
// stages fit; the runner never refused a start; nothing is left queued or running.
TEST(MemoryPlacement, EveryJobFinishesOrIsDroppedAtArrivalWhenNothingCouldFit) {
  std::mt19937_64 rng(20261207);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const std::vector<double> capacities = {40 * MB, 50 * MB, 55 * MB, 65 * MB, 100 * MB};
  // What the streams exercised, summed over the trials (each must occur).
  int dropped_for_memory = 0, spread = 0, waited = 0;
  for (int trial = 0; trial < 40; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    std::vector<NodeGroup> groups;
    std::vector<int> node_gpus;
    for (int g = uniform(1, 2); g > 0; --g) {
      groups.push_back({0, uniform(1, 3), uniform(1, 3)});
      for (int n = 0; n < groups.back().nodes; ++n)
        node_gpus.push_back(groups.back().gpus_per_node);
    }
    const double capacity = capacities[static_cast<std::size_t>(uniform(0, 4))];
    const Policy policy = uniform(0, 1) ? Policy::kEasyBackfill : Policy::kFcfs;
    std::vector<JobSpec> jobs;
    double at = 0;
    for (int j = uniform(4, 10); j > 0; --j) {
      at += uniform(0, 6);
      JobSpec spec = job(at, uniform(1, 6), 3 * uniform(1, 3));
      if (uniform(0, 3) == 0) spec = data_parallel(spec);
      jobs.push_back(spec);
    }
    const MemoryRun r = run_with_memory(groups, policy, capacity, jobs);

    test::PlatformBench p(build_topology(
        StarSpec{static_cast<int>(node_gpus.size()), LinkSpec{Bandwidth{1e9}, Time::zero()}}));
    const TrainingModel m = three_layer_model(p.topology, capacity);
    const auto layers = planner_layer_sizes(m);
    auto fits_hosts = [&](std::size_t hosts) {
      return hosts < 2 || pipeline_memory_fits(m, StagePlanner::kDp, layers,
                                               std::vector<double>(hosts, capacity));
    };
    std::vector<int> most_first = node_gpus;
    std::sort(most_first.rbegin(), most_first.rend());
    ASSERT_EQ(r.records.size(), jobs.size());
    std::vector<int> seen(jobs.size(), 0);
    for (const JobRecord& rec : r.records) {
      ++seen[rec.spec.id];
      const JobSpec& spec = jobs[rec.spec.id];
      const bool limited = spec.stages != 1;
      if (rec.finished) {
        EXPECT_TRUE(!limited || fits_hosts(rec.slices.size())) << "job " << rec.spec.id;
        continue;
      }
      // Dropped: at arrival, with no restart, and only when no spread could ever fit.
      EXPECT_EQ(rec.restarts, 0) << rec.drop_reason;
      bool could_fit = false;
      int largest = 0;
      for (std::size_t k = 1; k <= most_first.size() && static_cast<int>(k) <= spec.gpus; ++k) {
        largest += most_first[k - 1];
        if (largest >= spec.gpus && (!limited || fits_hosts(k))) could_fit = true;
      }
      EXPECT_FALSE(could_fit) << "job " << rec.spec.id << ": " << rec.drop_reason;
      dropped_for_memory += rec.drop_reason.find("GPU memory") != std::string::npos ? 1 : 0;
    }
    for (const JobRecord& rec : r.records)
      waited += rec.finished && rec.start > rec.spec.submit && rec.spec.stages != 1 ? 1 : 0;
    spread += static_cast<int>(r.results.metrics().at("jobs_spread_for_memory"));
    for (int s : seen) EXPECT_EQ(s, 1);
    EXPECT_EQ(r.queued, 0u);
    EXPECT_EQ(r.running, 0u);
    EXPECT_EQ(r.results.metrics().at("jobs_unfinished"), 0);
    EXPECT_EQ(r.results.metrics().at("detailed_jobs_no_memory_fit"), 0);
  }
  EXPECT_GT(dropped_for_memory, 0);
  EXPECT_GT(spread, 0);
  EXPECT_GT(waited, 0);
}
