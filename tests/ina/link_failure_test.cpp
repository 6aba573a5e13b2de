// The INA switch program on a two-rack leaf-spine over the flow backend, with link failures (the
// combination of workloads/scenarios/ina_dsa_two_racks.json): the program runs on rack 0's ToR,
// so rack 1's hosts reach it over the leaf-spine uplinks.
// - One uplink down: transfers reroute over the other spine; every job finishes.
// - Both uplinks down for a while: rack 1's bursts fail (no route), the senders' timeouts resend
//   them, and after the repair every job finishes.
// - Both uplinks down for good: the jobs with a host in rack 1 make no progress; each is aborted
//   by its stall watchdog and reported failed, the others finish, and the run ends (no hang).
// In every case: each finished job's workers received every gradient value of every iteration
// exactly once with the right sum (bytes sent = bytes delivered for completed aggregations), no
// aggregator ever has two owners (audited through the pool's observer), and no aggregator is
// left held at the end, not even by an aborted job.
#include <gtest/gtest.h>

#include <map>

#include "models/ina/ina_cluster.hpp"
#include "sim_core/engine/random.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "sim_core/run/results.hpp"
#include "test_support.hpp"

using namespace mlsim;
using namespace mlsim::ina;
using namespace mlsim::ina::testing;

namespace {

// Two leaves under two spines, 100 Gbps host links, 4:1 oversubscribed uplinks, 500 ns per hop
// (the shipped scenario's shape with fewer hosts per rack).
Topology two_racks(int hosts_per_leaf) {
  LeafSpineSpec s;
  s.leaves = 2;
  s.hosts_per_leaf = hosts_per_leaf;
  s.spines = 2;
  s.oversubscription = 4;
  s.host_link = LinkSpec{parse_bandwidth("100Gbps"), Time::ns(500)};
  s.uplink_latency = Time::ns(500);
  return build_topology(s);
}

// Both directions of the cable between two named nodes.
void set_cable(Network& network, const Topology& t, const std::string& a, const std::string& b,
               bool up) {
  const NodeId na = *t.find(a), nb = *t.find(b);
  for (LinkId l = 0; l < t.links().size(); ++l) {
    const Link& link = t.link(l);
    if ((link.src == na && link.dst == nb) || (link.src == nb && link.dst == na))
      network.set_link_up(l, up);
  }
}

enum class Failure { kOneUplink, kRackCutThenRepaired, kRackCutForGood };

struct Outcome {
  std::size_t finished = 0, failed = 0;
  bool failed_only_in_rack1 = true;
  std::uint64_t undelivered = 0, timeouts = 0;
};

// Checks the invariants of one run and returns what happened.
Outcome run_checked(ClusterParams p, Failure failure, Time fail_at, const std::string& label) {
  SCOPED_TRACE(label);
  p.data_path = DataPathKind::kNetwork;
  p.switch_node = "leaf0";
  int hosts = 0;
  for (const JobSpec& j : p.jobs) hosts += j.workers + 1;
  const int per_leaf = (hosts + 1) / 2;
  const Topology topology = two_racks(per_leaf);
  Engine engine;
  FluidNetwork flow(engine, topology, Sharing::kMaxMin);
  InaCluster cluster(engine, p, &flow, &topology);
  OwnershipTracker ownership;
  cluster.policy().pool().set_observer([&](const PoolEvent& e) { ownership(e); });
  engine.schedule_at(fail_at, [&] {
    set_cable(flow, topology, "leaf1", "spine0", false);
    if (failure != Failure::kOneUplink) set_cable(flow, topology, "leaf1", "spine1", false);
  });
  if (failure == Failure::kOneUplink) {
    engine.schedule_at(fail_at + Time::ms(3),
                       [&] { set_cable(flow, topology, "leaf1", "spine0", true); });
  } else if (failure == Failure::kRackCutThenRepaired) {
    engine.schedule_at(fail_at + Time::ms(2), [&] {
      set_cable(flow, topology, "leaf1", "spine0", true);
      set_cable(flow, topology, "leaf1", "spine1", true);
    });
  }
  cluster.start();
  // Bounded, so that a hang fails here; the watchdog must have ended every job long before.
  engine.run_until(Time::s(10));
  EXPECT_EQ(engine.pending_events(), 0u) << "the run did not end by itself";
  EXPECT_TRUE(cluster.all_ended());
  EXPECT_EQ(ownership.violations, 0);
  EXPECT_TRUE(ownership.held.empty()) << ownership.held.size() << " aggregators left held";
  const InaCounters& c = cluster.stats();
  EXPECT_EQ(c.wrong_sums, 0u);
  EXPECT_EQ(c.duplicate_results, 0u);
  Outcome o;
  for (std::size_t j = 0; j < p.jobs.size(); ++j) {
    InaJob& job = cluster.job(j);
    EXPECT_NE(job.finished(), job.failed()) << "job " << j;
    if (job.finished()) {
      ++o.finished;
      // Every gradient value of every iteration reached every worker exactly once.
      EXPECT_EQ(job.elements_delivered(), job.plan().elements() * job.workers() * job.iterations())
          << "job " << j;
    } else {
      ++o.failed;
      std::size_t first = 0;
      for (std::size_t k = 0; k < j; ++k) first += static_cast<std::size_t>(p.jobs[k].workers) + 1;
      const std::size_t last = first + static_cast<std::size_t>(p.jobs[j].workers);  // its PS
      if (last < static_cast<std::size_t>(per_leaf)) o.failed_only_in_rack1 = false;
      EXPECT_GT(job.finished_at(), fail_at) << "job " << j;  // aborted only after the cut
    }
  }
  Results out;
  cluster.report(out);
  EXPECT_EQ(out.metrics().at("jobs_finished"), static_cast<double>(o.finished));
  EXPECT_EQ(out.metrics().at("jobs_failed"), static_cast<double>(o.failed));
  o.undelivered = static_cast<std::uint64_t>(out.metrics().at("undelivered_packets"));
  o.timeouts = c.timeouts;
  const NetworkTotals n = flow.totals();
  EXPECT_EQ(n.transfers_in_flight, 0u);
  EXPECT_EQ(n.bytes_started, n.bytes_delivered + n.bytes_failed);
  return o;
}

// A few jobs of random sizes spread over both racks, scarce aggregator memory, arriving within
// 300 us (as properties_test.cpp's workloads).
ClusterParams failure_random_workload(std::uint64_t seed, PolicyKind policy) {
  RandomStream rng(seed, "ina-link-failure");
  ClusterParams p;
  p.policy = policy;
  p.burst_values = seed % 2 == 0 ? 62 * 4 : 1;
  p.atp_timeout = Time::us(200 + 200 * static_cast<std::int64_t>(rng.below(5)));
  p.switchml_timeout = Time::ms(1);
  p.stall_timeout = Time::ms(20);
  const int jobs = 3 + static_cast<int>(rng.below(2));
  for (int j = 0; j < jobs; ++j) {
    const long values = 2000 + static_cast<long>(rng.below(20000));
    p.jobs.push_back(job(two_layers(values), 2 + static_cast<int>(rng.below(3)),
                         3 + static_cast<int>(rng.below(3)),
                         Time::us(static_cast<std::int64_t>(rng.below(300)))));
  }
  p.aggregator_memory = Bytes{(16 + static_cast<std::int64_t>(rng.below(64))) * 2048 * jobs};
  return p;
}

}  // namespace

class InaLinkFailure : public ::testing::TestWithParam<PolicyKind> {};

TEST_P(InaLinkFailure, EveryJobFinishesOrIsReportedFailedWithExactlyOnceAggregation) {
  const PolicyKind policy = GetParam();
  int rerouted_runs_finished = 0, cut_runs_recovered = 0, cut_for_good_with_failures = 0;
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    const ClusterParams p = failure_random_workload(seed, policy);
    // Fail while every job is running and communicating: arrivals are within 300 us, the first
    // gradients leave 0.5 ms after arrival, an iteration computes 0.8 ms and every job runs at
    // least 3, so at 1.3 ms every job has chunks in the switch and on the wires.
    const Time at = Time::us(1300);
    const std::string what = std::string(policy_name(policy)) + " seed " + std::to_string(seed);
    const Outcome reroute = run_checked(p, Failure::kOneUplink, at, what + " one uplink");
    EXPECT_EQ(reroute.failed, 0u);
    EXPECT_EQ(reroute.undelivered, 0u);  // the other spine carries everything
    if (reroute.failed == 0) ++rerouted_runs_finished;

    const Outcome repaired = run_checked(p, Failure::kRackCutThenRepaired, at, what + " cut 2 ms");
    EXPECT_EQ(repaired.failed, 0u);
    EXPECT_GT(repaired.undelivered, 0u);  // rack 1's bursts failed while it was cut off...
    EXPECT_GT(repaired.timeouts, 0u);     // ...and were resent after the senders' timeouts
    if (repaired.failed == 0 && repaired.undelivered > 0) ++cut_runs_recovered;

    const Outcome cut = run_checked(p, Failure::kRackCutForGood, at, what + " cut for good");
    EXPECT_TRUE(cut.failed_only_in_rack1);
    if (cut.failed > 0) ++cut_for_good_with_failures;
  }
  EXPECT_EQ(rerouted_runs_finished, 6);
  EXPECT_EQ(cut_runs_recovered, 6);
  EXPECT_EQ(cut_for_good_with_failures, 6);  // the case must actually cut jobs off
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, InaLinkFailure,
                         ::testing::Values(PolicyKind::kSwitchMl, PolicyKind::kAtp,
                                           PolicyKind::kDsa),
                         [](const auto& info) { return std::string(policy_name(info.param)); });

// Hand-computed: job A (2 workers + PS on hosts 0-2, rack 0) and job B (hosts 3-5, rack 1), one
// layer of 62 values (one ATP packet), 1 ms forward + 1 ms backward, rack 1 cut off from time 0
// and never repaired, stall timeout 5 ms. A runs exactly as on the star (mechanisms_test.cpp's
// first case: its traffic never leaves leaf0): JCT 2,002,900 ns. B's workers compute forward and
// backward (their last progress at 2,000,000 ns), then every burst fails for want of a route and
// its ATP timeouts (1 ms) resend it to no avail; the watchdog aborts B at 2 ms + 5 ms =
// 7,000,000 ns, releases nothing (B never reached the switch), and the run ends.
TEST(InaLinkFailure, ACutOffJobIsAbortedAfterItsStallTimeout) {
  ClusterParams p = one_aggregator(PolicyKind::kAtp, Time::ms(1));
  p.data_path = DataPathKind::kNetwork;
  p.switch_node = "leaf0";
  p.stall_timeout = Time::ms(5);
  p.jobs.push_back(job(one_layer(1.0, 1.0, 62), 2, 1));
  p.jobs.push_back(job(one_layer(1.0, 1.0, 62), 2, 1));
  const Topology topology = two_racks(3);
  Engine engine;
  FluidNetwork flow(engine, topology, Sharing::kMaxMin);
  InaCluster cluster(engine, p, &flow, &topology);
  set_cable(flow, topology, "leaf1", "spine0", false);
  set_cable(flow, topology, "leaf1", "spine1", false);
  cluster.start();
  engine.run();  // must end by itself
  EXPECT_EQ(engine.now(), Time::ns(7'000'000));
  ASSERT_TRUE(cluster.job(0).finished());
  EXPECT_EQ(cluster.job(0).finished_at(), Time::ns(2'002'900));
  ASSERT_TRUE(cluster.job(1).failed());
  EXPECT_EQ(cluster.job(1).finished_at(), Time::ns(7'000'000));
  EXPECT_EQ(cluster.job(1).elements_delivered(), 0);
  // B's two workers resent at 3, 4, 5 and 6 ms (every 1 ms after the 2 ms send): 8 timeouts.
  EXPECT_EQ(cluster.stats().timeouts, 8u);
  Results out;
  cluster.report(out);
  EXPECT_EQ(out.metrics().at("jobs_finished"), 1);
  EXPECT_EQ(out.metrics().at("jobs_failed"), 1);
  EXPECT_EQ(out.metrics().at("jct_count"), 1);  // the failed job has no completion time
  EXPECT_EQ(out.metrics().at("undelivered_packets"), 2 + 8);  // first sends and resends
  EXPECT_EQ(out.details()["jobs"][1]["status"], "failed");
  EXPECT_TRUE(out.details()["jobs"][1]["jct_s"].is_null());
}

// The watchdog must not fire on a job that is only slow: the same two jobs without the cut both
// finish with a 5 ms stall timeout, although the run lasts 2 ms and nothing waits 5 ms.
TEST(InaLinkFailure, TheWatchdogLeavesAHealthyRunUnchanged) {
  ClusterParams p = one_aggregator(PolicyKind::kAtp, Time::ms(1));
  p.data_path = DataPathKind::kNetwork;
  p.switch_node = "leaf0";
  p.stall_timeout = Time::ms(5);
  p.jobs.push_back(job(one_layer(1.0, 1.0, 62), 2, 1));
  const Topology topology = two_racks(3);
  Engine engine;
  FluidNetwork flow(engine, topology, Sharing::kMaxMin);
  InaCluster cluster(engine, p, &flow, &topology);
  cluster.start();
  engine.run();
  ASSERT_TRUE(cluster.all_finished());
  EXPECT_EQ(cluster.job(0).finished_at(), Time::ns(2'002'900));
  EXPECT_EQ(engine.now(), Time::ns(2'002'900));  // the watchdog left no event behind
}
