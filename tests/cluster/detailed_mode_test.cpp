// The cluster model's detailed mode (models/cluster/communication_mode.hpp): placed jobs train
// on the training core over one shared network. A case computed by hand (two jobs sharing one
// leaf uplink by max-min) and properties over random job streams placed by every policy.
#include <gtest/gtest.h>

#include <random>

#include "models/cluster/communication_mode.hpp"
#include "tests/cluster/test_support.hpp"
#include "tests/support/platform_bench.hpp"

using namespace mlsim;
using namespace mlsim::cluster;
using namespace mlsim::cluster::testing;

namespace {

constexpr double kHostBandwidth = 4e6;  // bytes/s: one million fp32 parameters per second
constexpr std::int64_t M = 1'000'000;

// A model of `layers` {forward s, backward s, parameters} on every host of `topology`.
TrainingModel model(const Topology& topology, const std::string& scheduler, const std::string& sync,
                    std::vector<std::tuple<double, double, std::int64_t>> layers,
                    training::SchedulerConfig config = {}) {
  TrainingModel m;
  m.name = scheduler + "_" + sync;
  m.scheduler = scheduler;
  m.sync = sync;
  m.make_scheduler = training::training_policies().schedulers.get(scheduler, "").value;
  m.make_sync = training::training_policies().syncs.get(sync, "").value;
  m.config = config;
  auto times = std::make_shared<ProfileSeconds>();
  for (const auto& [f, b, p] : layers) {
    times->push_back({f, b});
    m.parameters.push_back(p);
    m.reference_iteration_s += f + b;
  }
  m.times.assign(topology.nodes().size(), nullptr);
  for (NodeId h : topology.hosts()) m.times[h] = times;
  return m;
}

// The platform pieces a cluster run needs, on a topology with the flow backend (max-min).
using Platform = test::PlatformBench;

// Two leaves of two hosts under one spine at 2:1: each leaf's one uplink carries
// 2 x 4e6 / (1 x 2) = 4e6 B/s, the hosts' own bandwidth. Hosts 0, 1 on leaf 0; 2, 3 on leaf 1.
Topology two_leaves() {
  return build_topology(
      LeafSpineSpec{2, 2, 1, 2.0, LinkSpec{Bandwidth{kHostBandwidth}, Time::zero()}, Time::zero()});
}

// Ends of the jobs started at 0 on `placements` (one iteration of one layer: forward 1 s,
// backward 1 s, 1M parameters, FIFO ring).
std::vector<double> run_jobs(const std::vector<std::vector<NodeId>>& placements) {
  Platform p(two_leaves());
  CommunicationParams params;
  params.models.push_back(model(p.topology, "fifo", "ring", {{1.0, 1.0, M}}));
  CommunicationMode mode(p.engine, p.network, p.compute, params, RandomStream(1, "test"));
  std::vector<double> ends(placements.size(), -1);
  for (std::size_t j = 0; j < placements.size(); ++j) {
    JobSpec job;
    job.id = j;
    job.work = Time::s(2);
    mode.admit(job);
    EXPECT_EQ(job.iterations, 1u);
    EXPECT_TRUE(mode.start(
        job, placements[j], 0, [&ends, &p, j] { ends[j] = p.engine.now().seconds(); },
        [](JobRunner::Failure) { FAIL() << "no failure here"; }));
  }
  p.engine.run();
  EXPECT_EQ(mode.running(), 0u);
  return ends;
}

}  // namespace

// One job on hosts 0 and 2 (across the leaves): F [0,1], B [1,2], then the ring all-reduce of
// 4 MB between 2 workers: 2 steps, each worker sending half the tensor (2 MB) to the other
// across its leaf's uplink at 4e6 B/s: 0.5 s a step, the job ends at 3.
// Two such jobs, on hosts {0, 2} and {1, 3}: both send 0 -> 2 and 1 -> 3 over leaf 0's one
// uplink (and 2 -> 0, 3 -> 1 over leaf 1's) at once; max-min gives each 2e6 B/s: 1 s a step,
// both end at 2 + 2 = 4.
// The same two jobs placed within a leaf ({0, 1} and {2, 3}) share no link: both end at 3.
TEST(DetailedMode, TwoJobsShareOneUplinkByMaxMin) {
  EXPECT_EQ(run_jobs({{0, 2}}), (std::vector<double>{3}));
  EXPECT_EQ(run_jobs({{0, 2}, {1, 3}}), (std::vector<double>{4, 4}));
  EXPECT_EQ(run_jobs({{0, 1}, {2, 3}}), (std::vector<double>{3, 3}));
}

// A job on one host has nothing to send: the runner leaves it to the job-level timing.
TEST(DetailedMode, OneHostJobsAreLeftToTheJobLevelTiming) {
  Platform p(two_leaves());
  CommunicationParams params;
  params.models.push_back(model(p.topology, "fifo", "ring", {{1.0, 1.0, M}}));
  CommunicationMode mode(p.engine, p.network, p.compute, params, RandomStream(1, "test"));
  JobSpec job;
  job.work = Time::s(10);
  mode.admit(job);
  EXPECT_EQ(job.iterations, 5u);  // 10 s of work / 2 s of compute per iteration
  const std::vector<NodeId> one{0};
  EXPECT_FALSE(mode.start(
      job, one, 0, [] { FAIL() << "not simulated"; },
      [](JobRunner::Failure) { FAIL() << "not simulated"; }));
}

// Through the cluster simulation: hosts of 2 GPUs, jobs of 3 GPUs span two hosts. FCFS on the
// two-leaf pool (nodes with the most free GPUs first, lower index first): job 0 gets hosts 0 and
// 1 (leaf 0), job 1 hosts 2 and 3 (leaf 1): no shared link, each ends at 3 s as alone above,
// while the job-level mode ends them at their runtime, 2 s.
TEST(DetailedMode, ClusterPlacesAndTheRunnerTimesTheJobs) {
  Platform p(two_leaves());
  CommunicationParams params;
  params.models.push_back(model(p.topology, "fifo", "ring", {{1.0, 1.0, M}}));
  CommunicationMode mode(p.engine, p.network, p.compute, params, RandomStream(1, "test"));
  ClusterSimulation sim(p.engine, one_type(4, 2, Policy::kFcfs),
                        list_source({job(0, 3, 2), job(0, 3, 2)}), 1, nullptr, p.topology.hosts());
  sim.set_runner(&mode);
  std::vector<JobRecord> records;
  sim.set_observer([&](const JobRecord& r) { records.push_back(r); });
  sim.start();
  p.engine.run();
  ASSERT_EQ(records.size(), 2u);
  for (const JobRecord& r : records) {
    EXPECT_TRUE(r.finished);
    EXPECT_DOUBLE_EQ(r.end.seconds(), 3);
  }
  EXPECT_EQ(records[0].slices[0].node, 0);
  EXPECT_EQ(records[0].slices[1].node, 1);
  Results out;
  sim.report(out);
  EXPECT_EQ(out.metrics().at("detailed_jobs_simulated"), 2);
  EXPECT_DOUBLE_EQ(out.metrics().at("communication_slowdown_mean"), 1.5);  // 3 s / 2 s
}

// Random job streams on a leaf-spine pool, every policy, ring and PS, FIFO and ByteScheduler:
//   - every job is reported once, finished or dropped;
//   - every simulated job applied every layer's update on every worker once per iteration;
//   - its strategy delivered every byte it sent, and the network delivered exactly what the
//     jobs' strategies delivered (nothing else crosses it);
//   - the gradient crosses as the strategy implies: ring 2 (W - 1) x the gradient per
//     iteration, PS (one colocated server per worker) 2 W x (each worker pushes and pulls its
//     whole gradient, to and from its own host's server as well);
//   - memory is released: nothing is left running.
TEST(DetailedMode, EveryJobEndsAndEveryGradientByteIsSynchronisedOnce) {
  std::mt19937_64 rng(7);
  auto integer = [&](std::int64_t a, std::int64_t b) {
    return std::uniform_int_distribution<std::int64_t>(a, b)(rng);
  };
  auto uniform = [&](double a, double b) { return std::uniform_real_distribution<>(a, b)(rng); };
  for (int trial = 0; trial < 12; ++trial) {
    SCOPED_TRACE(::testing::Message() << "trial " << trial);
    Platform p(build_topology(LeafSpineSpec{
        2, 3, 2, 1.5, LinkSpec{Bandwidth{kHostBandwidth}, Time::us(5)}, Time::us(5)}));
    CommunicationParams params;
    for (const char* sync : {"ring", "ps"})
      for (const char* scheduler : {"fifo", "bytescheduler"}) {
        std::vector<std::tuple<double, double, std::int64_t>> layers;
        for (std::int64_t l = integer(1, 4); l > 0; --l)
          layers.emplace_back(uniform(0.01, 0.2), uniform(0.01, 0.2),
                              integer(0, 2) * integer(1, M));
        const training::SchedulerConfig config =
            std::string(scheduler) == "fifo"
                ? training::SchedulerConfig{}
                : training::SchedulerConfig{integer(1, M), integer(1, 3 * M)};
        params.models.push_back(model(p.topology, scheduler, sync, layers, config));
      }
    CommunicationMode mode(p.engine, p.network, p.compute, params,
                           RandomStream(static_cast<std::uint64_t>(trial), "models"));
    ClusterParams c = one_type(6, 2, trial % 2 ? Policy::kEasyBackfill : Policy::kFcfs);
    c.estimate_factor = 1.5;
    if (trial % 3 == 0) c.racks = {0, 0, 0, 1, 1, 1};  // rack-local placement, by leaf
    PoissonOptions o;
    o.jobs = 25;
    o.mean_interarrival = Time::s(0.3);
    o.mean_duration = Time::s(1.5);
    o.gpus = {1, 2, 3, 4, 6, 13};  // 13 GPUs: more than the pool has, dropped
    ClusterSimulation sim(p.engine, c,
                          std::make_unique<PoissonJobSource>(o, RandomStream(trial, "jobs")), 1,
                          nullptr, p.topology.hosts());
    sim.set_runner(&mode);
    std::vector<JobRecord> records;
    std::vector<TrainingRecord> trained;
    sim.set_observer([&](const JobRecord& r) { records.push_back(r); });
    mode.set_observer([&](const TrainingRecord& r) { trained.push_back(r); });
    sim.start();
    p.engine.run();
    ASSERT_EQ(records.size(), o.jobs);
    std::vector<int> seen(o.jobs, 0);
    for (const JobRecord& r : records) {
      ++seen[r.spec.id];
      EXPECT_EQ(r.finished, r.spec.gpus <= 12) << r.drop_reason;
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<long>(o.jobs));
    EXPECT_FALSE(trained.empty());
    std::int64_t delivered = 0;
    for (const TrainingRecord& t : trained) {
      SCOPED_TRACE(::testing::Message() << "job " << t.id << " model " << t.model);
      for (const auto& worker : t.updates)
        for (std::size_t u : worker) EXPECT_EQ(u, t.iterations);
      EXPECT_EQ(t.bytes_sent, t.bytes_delivered);
      const auto w = static_cast<std::int64_t>(t.hosts.size());
      const std::int64_t per_iteration =
          params.models[static_cast<std::size_t>(t.model)].sync == "ring"
              ? 2 * (w - 1) * t.gradient_bytes
              : 2 * w * t.gradient_bytes;
      EXPECT_EQ(t.bytes_delivered, per_iteration * static_cast<std::int64_t>(t.iterations));
      EXPECT_GE((t.end - t.start).seconds(), t.compute_only_s - 1e-9);
      delivered += t.bytes_delivered;
    }
    EXPECT_EQ(p.network.totals().bytes_delivered.count, delivered);
    EXPECT_EQ(p.network.totals().transfers_in_flight, 0u);
    EXPECT_EQ(mode.running(), 0u);
  }
}

// Rack-local placement, by hand: 4 nodes of 4 GPUs, nodes 0 and 1 in rack 0, 2 and 3 in rack 1.
// With 1 GPU taken on node 0 and 2 on node 2, free: node 0 3, node 1 4 (rack 0: 7), node 2 2,
// node 3 4 (rack 1: 6). A 6-GPU job fits no node:
//   - fewest nodes: the emptiest nodes first, node 1 (4) then node 3 (2): across the racks;
//   - rack-local: both racks have room; the one with the fewest free GPUs (rack 1, 6) takes it,
//     node 3 (4) then node 2 (2), leaving rack 0's 7 for a larger job.
// A 10-GPU job fits no rack: the emptiest rack first (rack 0: nodes 1, 0), then rack 1's node 3.
TEST(DetailedMode, RackLocalPlacementKeepsAJobUnderOneSwitch) {
  NodePool pool({{"ref", 1.0}}, {{0, 4, 4}});
  Placement taken;
  taken.type = 0;
  taken.slices = {{0, 1}, {2, 2}};
  pool.allocate(taken);
  auto nodes = [](const Placement& p) {
    std::vector<std::pair<int, int>> out;
    for (const Slice& s : p.slices) out.emplace_back(s.node, s.gpus);
    return out;
  };
  using V = std::vector<std::pair<int, int>>;
  EXPECT_EQ(nodes(pool.place(6, pool.all_types())), (V{{1, 4}, {3, 2}}));
  pool.set_racks({0, 0, 1, 1});
  EXPECT_EQ(nodes(pool.place(6, pool.all_types())), (V{{3, 4}, {2, 2}}));
  EXPECT_EQ(nodes(pool.place(10, pool.all_types())), (V{{1, 4}, {0, 3}, {3, 3}}));
  EXPECT_EQ(nodes(pool.place(3, pool.all_types())), (V{{0, 3}}));  // one node: best fit as before
}
