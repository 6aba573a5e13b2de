// Invariants over randomised contended workloads, for every policy and both modes:
// - every gradient element of every iteration reaches every worker exactly once, aggregated over
//   every worker exactly once (the result's sum of 1 << w contributions proves it);
// - an aggregator never has two owners (audited from outside through the pool's observer);
// - no job starves: under DSA's preemption the lowest-priority jobs still finish;
// - all of this also under random packet loss (1% per packet per hop), which every policy must
//   recover from through its timeouts (SwitchML's shadow copies, ATP's and DSA's PS);
// - on both data paths: the model's packet links, and the switch program hosted on the star's
//   switch node over the flow backend, where moreover every transfer started is delivered
//   (bytes started = bytes delivered, nothing failed or left in flight).
#include <gtest/gtest.h>

#include <map>

#include "models/ina/ina_cluster.hpp"
#include "sim_core/engine/random.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "test_support.hpp"

using namespace mlsim;
using namespace mlsim::ina;
using namespace mlsim::ina::testing;

namespace {

struct Workload {
  ClusterParams params;
  std::string label;
  HostSpeeds speeds{256};  // per host: stragglers
};

// A few jobs of different sizes and compute/communication ratios arriving close together, with
// stragglers, on a switch with little aggregator memory.
Workload random_workload(std::uint64_t seed, PolicyKind policy, int burst_values,
                         double loss_rate) {
  RandomStream rng(seed, "ina-properties");
  Workload w;
  ClusterParams& p = w.params;
  p.policy = policy;
  p.burst_values = burst_values;
  p.loss_rate = loss_rate;
  p.seed = seed;
  p.atp_timeout = Time::us(200 + 200 * static_cast<std::int64_t>(rng.below(5)));
  // DSA: both readings of its priority (dsa_priority.hpp), per tensor on odd seeds.
  p.dsa_priority = seed % 2 ? DsaPriorityKind::kTensor : DsaPriorityKind::kJob;
  const int jobs = add_random_jobs(rng, p, w.speeds);
  // Scarce: room for a few dozen ATP aggregators (SwitchML gets the same bytes).
  p.aggregator_memory = Bytes{(16 + static_cast<std::int64_t>(rng.below(64))) * 2048 * jobs};
  w.label =
      std::string(policy_name(policy)) + " seed " + std::to_string(seed) + " burst " +
      std::to_string(burst_values) + " loss " + std::to_string(loss_rate) +
      (policy == PolicyKind::kDsa ? " priority " + std::string(dsa_priority_name(p.dsa_priority))
                                  : "");
  return w;
}

}  // namespace

class InaProperties
    : public ::testing::TestWithParam<std::tuple<PolicyKind, int, double, DataPathKind>> {};

TEST_P(InaProperties, ExactlyOnceSingleOwnerAndEveryJobFinishes) {
  const auto [policy, burst, loss, path] = GetParam();
  std::uint64_t contended_runs = 0, retransmitting_runs = 0, lossy_runs = 0;
  std::uint64_t evicting_runs[2] = {0, 0};  // DSA, by priority kind
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    Workload w = random_workload(seed, policy, burst, loss);
    w.params.data_path = path;
    SCOPED_TRACE(w.label);
    int hosts = 0;
    for (const JobSpec& j : w.params.jobs) hosts += j.workers + 1;
    const Topology topology =
        build_topology(StarSpec{hosts, LinkSpec{w.params.link_bandwidth, w.params.link_latency}});
    Engine engine;
    FluidNetwork flow(engine, topology, Sharing::kMaxMin);
    ComputeOn platform(engine, w.speeds);
    InaCluster cluster(engine, w.params, &flow, &topology, &platform.compute);
    OwnershipTracker ownership;
    cluster.policy().pool().set_observer([&](const PoolEvent& e) { ownership(e); });
    cluster.start();
    // Bounded: under loss, a recovery bug would retry forever; it must fail here, not hang.
    engine.run_until(Time::s(1000));
    const InaCounters& c = cluster.stats();
    EXPECT_TRUE(cluster.all_finished());  // no job starves
    EXPECT_EQ(ownership.violations, 0);
    EXPECT_EQ(c.wrong_sums, 0u);
    EXPECT_EQ(c.duplicate_results, 0u);
    EXPECT_EQ(c.elements_delivered, cluster.expected_elements());
    std::uint64_t chunks = 0;
    for (std::size_t j = 0; j < w.params.jobs.size(); ++j)
      chunks += static_cast<std::uint64_t>(cluster.job(j).plan().units()) *
                static_cast<std::uint64_t>(cluster.job(j).workers() * cluster.job(j).iterations());
    EXPECT_EQ(c.results_received, chunks);
    if (c.collision_packets > 0 || c.preemptions > 0) ++contended_runs;
    if (c.retransmitted_packets > 0) ++retransmitting_runs;
    // In-progress aggregators preempted: their partial went to the PS, which asked exactly the
    // missing workers to resend (selective retransmission).
    if (c.evicted_partial_packets > 0 && c.resend_requests > 0)
      ++evicting_runs[static_cast<int>(w.params.dsa_priority)];
    if (c.lost_packets > 0 && c.timeouts > 0) ++lossy_runs;
    if (loss == 0) {
      EXPECT_EQ(c.lost_packets, 0u);
    }
    const NetworkTotals n = flow.totals();
    if (path == DataPathKind::kNetwork) {
      EXPECT_GT(n.transfers_started, 0u);
      EXPECT_EQ(n.transfers_failed, 0u);
      EXPECT_EQ(n.transfers_in_flight, 0u);
      EXPECT_EQ(n.bytes_delivered, n.bytes_started);
    } else {
      EXPECT_EQ(n.transfers_started, 0u);  // the packet path never touches the backend
    }
  }
  // With loss, every run must actually lose packets and recover through timeouts.
  if (loss > 0) {
    EXPECT_EQ(lossy_runs, 12u);
  }
  // The workloads must actually contend, or the test proves nothing for ATP and DSA.
  if (policy != PolicyKind::kSwitchMl) {
    EXPECT_GE(contended_runs, 6u);
    EXPECT_GE(retransmitting_runs, 3u);  // timeouts and partial flushes exercised too
  }
  // DSA must actually preempt in-progress aggregators, under both readings of its priority, or
  // the exactly-once and single-owner checks prove nothing for the hand-off.
  if (policy == PolicyKind::kDsa) {
    EXPECT_GE(evicting_runs[static_cast<int>(DsaPriorityKind::kTensor)], 3u);
    EXPECT_GE(evicting_runs[static_cast<int>(DsaPriorityKind::kJob)], 3u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllPolicies, InaProperties,
    ::testing::Combine(::testing::Values(PolicyKind::kSwitchMl, PolicyKind::kAtp, PolicyKind::kDsa),
                       ::testing::Values(1, 62 * 4), ::testing::Values(0.0, 0.01),
                       ::testing::Values(DataPathKind::kPacket, DataPathKind::kNetwork)),
    [](const auto& info) {
      return std::string(policy_name(std::get<0>(info.param))) + "_burst" +
             std::to_string(std::get<1>(info.param)) +
             (std::get<2>(info.param) > 0 ? "_lossy" : "") +
             (std::get<3>(info.param) == DataPathKind::kNetwork ? "_flow" : "");
    });

// DSA gives the switch to the most communication-intensive job; the least intensive one must
// still make progress through its PS while higher-priority jobs keep preempting it.
TEST(InaProperties, DsaLowestPriorityJobStillFinishes) {
  ClusterParams p;
  p.policy = PolicyKind::kDsa;
  p.aggregator_memory = Bytes{8 * 248};
  p.jobs.push_back(job(one_layer(0.5, 0.5, 20000), 4, 3));  // least intensive
  for (int j = 0; j < 4; ++j)
    p.jobs.push_back(job(one_layer(0.02 + 0.01 * j, 0.02, 30000), 4, 6, Time::us(10 * j)));
  Engine engine;
  InaCluster cluster(engine, p);
  cluster.start();
  engine.run();
  ASSERT_TRUE(cluster.all_finished());
  EXPECT_EQ(cluster.job(0).priority(), 0);
  EXPECT_GT(cluster.stats().preemptions, 0u);
  EXPECT_EQ(cluster.stats().wrong_sums, 0u);
  EXPECT_EQ(cluster.stats().elements_delivered, cluster.expected_elements());
}

// The same invariants through the training core (models/training: each job a DataParallelJob,
// its gradients ordered by a CommScheduler, INA its GradientSync), with what only the core
// makes possible: ByteScheduler's order (random partition and credit) over ATP and DSA, and
// SwitchML jobs beside ATP or DSA jobs on one switch. Checked, beside the above:
// - every layer's parameters were updated exactly once per iteration on every worker (the
//   core's count: each gradient came back exactly once);
// - every job finished or was reported failed, never both (no failures here: all finish);
// - no aggregator had two owners in either pool, and each pool held only its own policy's jobs.
struct CoreCase {
  PolicyKind shared;   // ATP or DSA
  bool with_switchml;  // some jobs SwitchML (then the scheduler is FIFO)
  double loss;
  DataPathKind path;
};

class InaCoreProperties : public ::testing::TestWithParam<CoreCase> {};

TEST_P(InaCoreProperties, ExactlyOnceThroughTheCore) {
  const CoreCase k = GetParam();
  std::uint64_t reordered_runs = 0, mixed_runs = 0;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    Workload w = random_workload(seed, k.shared, 62 * 4, k.loss);
    ClusterParams& p = w.params;
    p.data_path = k.path;
    RandomStream rng(seed, "ina-core-properties");
    if (k.with_switchml) {
      // At least one job of each policy.
      for (std::size_t j = 0; j < p.jobs.size(); ++j)
        if (j == 0 || (j + 1 < p.jobs.size() && rng.uniform() < 0.5))
          p.jobs[j].policy = PolicyKind::kSwitchMl;
    } else {
      p.scheduler = "bytescheduler";
      const std::int64_t partition = 62 + static_cast<std::int64_t>(rng.below(4000));
      p.scheduler_config = {partition, partition * (1 + static_cast<std::int64_t>(rng.below(8)))};
    }
    SCOPED_TRACE(w.label + " scheduler " + p.scheduler + " partition " +
                 std::to_string(p.scheduler_config.partition) + " credit " +
                 std::to_string(p.scheduler_config.credit));
    int hosts = 0;
    for (const JobSpec& j : p.jobs) hosts += j.workers + 1;
    const Topology topology =
        build_topology(StarSpec{hosts, LinkSpec{p.link_bandwidth, p.link_latency}});
    Engine engine;
    FluidNetwork flow(engine, topology, Sharing::kMaxMin);
    ComputeOn platform(engine, w.speeds);
    InaCluster cluster(engine, p, &flow, &topology, &platform.compute);
    std::vector<OwnershipTracker> ownership(cluster.programs());
    int foreign_claims = 0;
    for (std::size_t i = 0; i < cluster.programs(); ++i) {
      const AggregationPolicy* program = &cluster.program(i);
      cluster.program(i).pool().set_observer([&, i, program](const PoolEvent& e) {
        ownership[i](e);
        if (&cluster.policy_of(e.job) != program) ++foreign_claims;
      });
    }
    cluster.start();
    engine.run_until(Time::s(1000));
    const InaCounters& c = cluster.stats();
    EXPECT_TRUE(cluster.all_finished());
    EXPECT_EQ(cluster.failed_jobs(), 0u);
    for (const OwnershipTracker& o : ownership) {
      EXPECT_EQ(o.violations, 0);
      EXPECT_TRUE(o.held.empty());
    }
    EXPECT_EQ(foreign_claims, 0);
    EXPECT_EQ(c.wrong_sums, 0u);
    EXPECT_EQ(c.duplicate_results, 0u);
    EXPECT_EQ(c.elements_delivered, cluster.expected_elements());
    std::uint64_t units = 0;
    for (std::size_t j = 0; j < p.jobs.size(); ++j) {
      InaJob& job = cluster.job(j);
      EXPECT_NE(job.finished(), job.failed());
      units += static_cast<std::uint64_t>(job.plan().units()) *
               static_cast<std::uint64_t>(job.workers() * job.iterations());
      const training::DataParallelJob& core = job.core();
      for (std::size_t wk = 0; wk < core.spec().workers.size(); ++wk)
        for (std::size_t l = 0; l < core.spec().parameters.size(); ++l)
          EXPECT_EQ(core.updates(wk, l), core.spec().iterations) << "job " << j << " layer " << l;
      EXPECT_EQ(job.sync().elements_delivered(),
                job.plan().elements() * job.workers() * job.iterations());
    }
    EXPECT_EQ(c.results_received, units);
    if (cluster.programs() == 2) ++mixed_runs;
    if (p.scheduler == "bytescheduler") {
      // More than one chunk in some layer: ByteScheduler had something to order.
      for (std::size_t j = 0; j < p.jobs.size(); ++j)
        if (cluster.job(j).plan().chunks.size() > cluster.job(j).plan().layers.size()) {
          ++reordered_runs;
          break;
        }
    }
  }
  if (k.with_switchml) {
    EXPECT_EQ(mixed_runs, 8u);
  } else {
    EXPECT_GE(reordered_runs, 6u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Core, InaCoreProperties,
    ::testing::Values(CoreCase{PolicyKind::kAtp, false, 0.0, DataPathKind::kPacket},
                      CoreCase{PolicyKind::kAtp, false, 0.01, DataPathKind::kPacket},
                      CoreCase{PolicyKind::kDsa, false, 0.0, DataPathKind::kPacket},
                      CoreCase{PolicyKind::kDsa, false, 0.01, DataPathKind::kNetwork},
                      CoreCase{PolicyKind::kAtp, true, 0.0, DataPathKind::kPacket},
                      CoreCase{PolicyKind::kAtp, true, 0.01, DataPathKind::kNetwork},
                      CoreCase{PolicyKind::kDsa, true, 0.0, DataPathKind::kNetwork},
                      CoreCase{PolicyKind::kDsa, true, 0.01, DataPathKind::kPacket}),
    [](const auto& info) {
      const CoreCase& k = info.param;
      return std::string(k.with_switchml ? "switchml_and_" : "bytescheduler_over_") +
             std::string(policy_name(k.shared)) + (k.loss > 0 ? "_lossy" : "") +
             (k.path == DataPathKind::kNetwork ? "_flow" : "");
    });
