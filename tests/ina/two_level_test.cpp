// Two-level aggregation on the ina model's own network path (system.levels "two_level";
// models/ina/aggregation_levels.hpp, the implementation the cluster model's fabric runs too):
// - by hand, through the scenario reader and runner: one job across two racks, one switch
//   against two levels;
// - properties over random contended workloads on racks of three hosts (every job spans racks):
//   every gradient value reaches every worker exactly once with the right sum (a contribution
//   aggregated at a rack's switch and again at the root would be a wrong sum), no aggregator of
//   any switch has two owners, every job finishes or is reported failed;
// - the shipped two-rack scenario's `two_level` variant, shrunk, through its link failures.
#include <gtest/gtest.h>

#include <fstream>

#include "models/ina/ina_cluster.hpp"
#include "models/ina/register.hpp"
#include "sim_core/engine/random.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "test_support.hpp"
#include "tests/support/run_json.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mlsim;
using namespace mlsim::ina;
using namespace mlsim::ina::testing;
using nlohmann::json;

namespace {

const std::filesystem::path kTwoLevelSource = MLSIM_SOURCE_DIR;

// Two racks of three hosts under one spine, 100 Gbps host links and 300 Gbps uplinks
// (oversubscription 1), 500 ns per hop; one ATP job of 5 workers (hosts 0-2 in rack 0, 3-4 in
// rack 1; its PS on host 5, rack 1), one layer of 62 values (one 308-byte packet), forward and
// backward 1 ms, one iteration; one aggregator per switch; the program's switch leaf0.
json two_rack_job(const std::filesystem::path& dir, const std::string& levels) {
  std::ofstream(dir / "one_layer.txt")
      << "node1 -- Linear -- forward_compute_time=1.0, backward_compute_time=1.0, "
         "activation_size=4.0, parameter_size=248.0\n";
  json doc{{"name", "ina_two_level_by_hand"},
           {"include",
            {(kTwoLevelSource / "workloads/hardware/switches.json").string(),
             (kTwoLevelSource / "workloads/hardware/gpus.json").string()}},
           {"seed", 1},
           {"topology",
            {{"kind", "leaf_spine"},
             {"leaves", 2},
             {"hosts_per_leaf", 3},
             {"spines", 1},
             {"oversubscription", 1},
             {"host_link", {{"bandwidth", "100Gbps"}, {"latency", "500ns"}}},
             {"uplink_latency", "500ns"},
             {"hardware", {{"gpu", "V100-SXM2-32GB"}}}}},
           {"network", {{"backend", "flow"}}},
           {"system",
            {{"model", "ina"},
             {"policy", "atp"},
             {"data_path", "network"},
             {"switch_node", "leaf0"},
             {"levels", levels},
             {"switch", "tofino-32x100g-atp"},
             {"aggregator_memory", "248B"}}},
           {"workload",
            {{"profiled_on", "V100-SXM2-32GB"},
             {"jobs",
              {{{"model", "one_layer"},
                {"profile", "one_layer.txt"},
                {"workers", 5},
                {"iterations", 1}}}}}}};
  return doc;
}

}  // namespace

// Times: a transfer alone on its path ends sending at the start + 308 B at its slowest link,
// rounded up to the ns (24.64 ns at 100 Gbps, 8.21 ns at 300 Gbps), and arrives after the path's
// latencies (500 ns a hop); a switch's program adds its 400 ns pipeline; its egress port sends
// one message after another (network_path_test.cpp). Every worker's gradient leaves at 2 ms.
//
// One switch (leaf0 aggregates every worker): hosts 0-2 reach leaf0's program at 2,000,025 + 500
// + 400 = 2,000,925; hosts 3-4 over leaf1, the spine and leaf0 (three hops, 1,500 ns; 100 Gbps
// each, the uplinks carry both) at 2,000,025 + 1,500 + 400 = 2,001,925: complete. The aggregate to
// the PS (host 5, three hops): 2,001,950 + 1,500 = 2,003,450; its result back at the program at
// 2,003,475 + 1,500 + 400 = 2,005,375. Copies: hosts 0-2 at 2,005,400 + 500 = 2,005,900; host 3
// at 2,005,400 + 1,500 = 2,006,900; host 4's copy leaves leaf0's uplink port after host 3's has
// (8.213 ns -> starts at 2,005,384): 2,005,409 + 1,500 = 2,006,909, the job's end.
//
// Two levels (leaf1 aggregates hosts 3-4 first; leaf0 stays the root): hosts 0-2 at the root at
// 2,000,925 as before (3 of 5: incomplete); hosts 3-4 at leaf1's program at 2,000,025 + 500 +
// 400 = 2,000,925, complete for the rack: one partial up (two 300 Gbps hops) 2,000,934 + 1,000
// + 400 = 2,002,334 at the root, which completes. To the PS 2,002,359 + 1,500 = 2,003,859; the
// result at the root 2,003,884 + 1,500 + 400 = 2,005,784; hosts 0-2 at 2,005,809 + 500 =
// 2,006,309; one copy down to leaf1, 2,005,793 + 1,000 + 400 = 2,007,193, which releases its
// aggregator and sends hosts 3-4 theirs at 2,007,218 + 500 = 2,007,718, the job's end: 809 ns
// later than one switch (two more pipelines and uplink crossings for rack 1's result, against
// one fewer copy on the uplink), with one packet sent up instead of two gradients.
//
// Two levels rooted at the PS's ToR (system.levels "two_level_ps_tor", ATP's paper: leaf1 is the
// root, leaf0 the rack level): hosts 3-4 at leaf1's program at 2,000,925 (2 of 5); hosts 0-2 at
// leaf0's at 2,000,925, complete for the rack: one partial up leaf0's uplink (two 300 Gbps hops)
// 2,000,934 + 1,000 + 400 = 2,002,334 at the root, which completes. To the PS under the root (one
// hop): 2,002,359 + 500 = 2,002,859; the result at the root 2,002,884 + 500 + 400 = 2,003,784;
// hosts 3-4 at 2,003,809 + 500 = 2,004,309; one copy down leaf1's uplink to leaf0, 2,003,793 +
// 1,000 + 400 = 2,005,193, which releases its aggregator and sends hosts 0-2 theirs at 2,005,218
// + 500 = 2,005,718, the job's end: 2,000 ns earlier than the root at leaf0 (the aggregate to the
// PS and its result no longer cross the uplinks: four fewer 500 ns hops), 1,191 ns earlier than
// one switch.
TEST(InaTwoLevel, ATwoRackJobsTimeByHandThroughTheScenario) {
  const Registries registries = mlsim::test::registries_with(register_ina);
  const mlsim::testing::TempDir dir;
  const auto run = [&](const std::string& levels) {
    return mlsim::test::run_json(two_rack_job(dir.path(), levels), registries,
                                 dir.path() / "scenario.json");
  };
  const RunOutput one = run("one_switch");
  const RunOutput two = run("two_level");
  const RunOutput ps_tor = run("two_level_ps_tor");
  for (const RunOutput* r : {&one, &two, &ps_tor}) {
    EXPECT_EQ(r->results.metrics().at("jobs_finished"), 1);
    EXPECT_EQ(r->results.metrics().at("wrong_sums"), 0);
    EXPECT_EQ(r->results.metrics().at("fallback_packets"), 0);
    EXPECT_EQ(r->results.metrics().at("ps_fallback_bytes"), 0);  // the aggregate is complete
  }
  EXPECT_DOUBLE_EQ(one.results.details()["jobs"][0]["jct_s"].get<double>(),
                   Time::ns(2'006'909).seconds());
  EXPECT_DOUBLE_EQ(two.results.details()["jobs"][0]["jct_s"].get<double>(),
                   Time::ns(2'007'718).seconds());
  EXPECT_EQ(one.info.simulated_time, Time::ns(2'006'909));
  EXPECT_EQ(two.info.simulated_time, Time::ns(2'007'718));
  // One switch reports no levels; two levels: one rack switch, one partial sent up.
  EXPECT_EQ(one.results.metrics().count("upward_packets"), 0u);
  EXPECT_EQ(two.results.metrics().at("upward_packets"), 1);
  EXPECT_EQ(two.results.metrics().at("rack_switches"), 1);
  EXPECT_EQ(two.results.details()["levels"], "two_level");
  EXPECT_DOUBLE_EQ(ps_tor.results.details()["jobs"][0]["jct_s"].get<double>(),
                   Time::ns(2'005'718).seconds());
  EXPECT_EQ(ps_tor.info.simulated_time, Time::ns(2'005'718));
  EXPECT_EQ(ps_tor.results.metrics().at("upward_packets"), 1);  // leaf0's partial
  EXPECT_EQ(ps_tor.results.metrics().at("rack_switches"), 1);   // leaf1 (leaf0 is the program's)
  EXPECT_EQ(ps_tor.results.details()["levels"], "two_level_ps_tor");
}

namespace {

// Bytes each leaf sent up its one uplink to the spine in the by-hand job above, built directly
// so that the links' counters can be read.
struct UplinkBytes {
  std::int64_t leaf0 = 0, leaf1 = 0;
};

UplinkBytes two_rack_uplink_bytes(bool two_level, bool ps_tor) {
  LeafSpineSpec s;
  s.leaves = 2;
  s.hosts_per_leaf = 3;
  s.spines = 1;
  s.oversubscription = 1;
  s.host_link = LinkSpec{parse_bandwidth("100Gbps"), Time::ns(500)};
  s.uplink_latency = Time::ns(500);
  const Topology topology = build_topology(s);
  ClusterParams p = one_aggregator(PolicyKind::kAtp);
  p.data_path = DataPathKind::kNetwork;
  p.switch_node = "leaf0";
  p.two_level = two_level;
  p.root_at_ps_tor = ps_tor;
  p.switch_latency = Time::ns(400);
  p.jobs.push_back(job(one_layer(1.0, 1.0, 62), 5, 1));
  Engine engine;
  FluidNetwork flow(engine, topology, Sharing::kMaxMin);
  InaCluster cluster(engine, p, &flow, &topology);
  cluster.start();
  engine.run_until(Time::s(1));
  EXPECT_TRUE(cluster.all_ended());
  EXPECT_EQ(cluster.stats().wrong_sums, 0u);
  const auto uplink = [&](const char* leaf) {
    const NodeId from = *topology.find(leaf);
    const NodeId spine = *topology.find("spine0");
    for (const LinkId l : topology.out_links(from))
      if (topology.link(l).dst == spine) return flow.link_stats(l).bytes_carried.count;
    ADD_FAILURE() << "no uplink from " << leaf;
    return std::int64_t{0};
  };
  return {uplink("leaf0"), uplink("leaf1")};
}

}  // namespace

// Which uplinks carry the partial aggregates, one 308-byte packet each way per crossing:
// - one switch (leaf0): hosts 3-4's gradients up leaf1 (2), the PS's result up leaf1 (1); the
//   aggregate to the PS and hosts 3-4's copies up leaf0 (1 + 2): 924 B each way;
// - root leaf0: rack 1's partial and the PS's result up leaf1 (2); the aggregate to the PS and
//   the result's copy down to leaf1 up leaf0 (2): 616 B each;
// - root leaf1 (the PS's ToR): rack 0's partial up leaf0 (1); the result's copy down to leaf0 up
//   leaf1 (1): 308 B each, and the PS's traffic stays in rack 1.
TEST(InaTwoLevel, TheRootDecidesWhichUplinksCarryThePartials) {
  const UplinkBytes one = two_rack_uplink_bytes(false, false);
  const UplinkBytes leaf0 = two_rack_uplink_bytes(true, false);
  const UplinkBytes ps_tor = two_rack_uplink_bytes(true, true);
  EXPECT_EQ(one.leaf0, 3 * 308);
  EXPECT_EQ(one.leaf1, 3 * 308);
  EXPECT_EQ(leaf0.leaf0, 2 * 308);
  EXPECT_EQ(leaf0.leaf1, 2 * 308);
  EXPECT_EQ(ps_tor.leaf0, 308);
  EXPECT_EQ(ps_tor.leaf1, 308);
}

namespace {

// Racks of three hosts under one spine, 100 Gbps host links, 2:1 oversubscribed uplinks.
Topology racks_of_three(int hosts) {
  LeafSpineSpec s;
  s.leaves = (hosts + 2) / 3;
  s.hosts_per_leaf = 3;
  s.spines = 1;
  s.oversubscription = 2;
  s.host_link = LinkSpec{parse_bandwidth("100Gbps"), Time::ns(500)};
  s.uplink_latency = Time::ns(500);
  return build_topology(s);
}

// Random contended ATP or DSA workloads (2-4 jobs of 2-5 workers, one or two layers, stragglers,
// a few dozen aggregators per switch, a random ATP timeout), placed consecutively on racks of
// three, so every job of 3 or more workers spans racks and some span three.
ClusterParams two_level_workload(std::uint64_t seed, PolicyKind policy, int burst_values,
                                 bool ps_tor, HostSpeeds& speeds) {
  RandomStream rng(seed, "ina-two-level");
  ClusterParams p;
  p.policy = policy;
  p.burst_values = burst_values;
  p.seed = seed;
  p.data_path = DataPathKind::kNetwork;
  p.switch_node = "leaf0";
  p.two_level = true;
  p.root_at_ps_tor = ps_tor;
  p.atp_timeout = Time::us(200 + 200 * static_cast<std::int64_t>(rng.below(5)));
  p.dsa_priority = seed % 2 ? DsaPriorityKind::kTensor : DsaPriorityKind::kJob;
  const int jobs = add_random_jobs(rng, p, speeds);
  p.aggregator_memory = Bytes{(16 + static_cast<std::int64_t>(rng.below(64))) * 2048 * jobs};
  return p;
}

}  // namespace

// Parameters: the policy, the burst (values per event), the root at the PS's ToR (else leaf0,
// the program's switch).
class InaTwoLevelProperties : public ::testing::TestWithParam<std::tuple<PolicyKind, int, bool>> {};

TEST_P(InaTwoLevelProperties, ExactlyOnceSingleOwnerAndEveryJobEnds) {
  const auto [policy, burst, ps_tor] = GetParam();
  std::uint64_t contended_runs = 0, upward_runs = 0, rack_contended_runs = 0, evicting_runs = 0;
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    HostSpeeds speeds(256);
    const ClusterParams p = two_level_workload(seed, policy, burst, ps_tor, speeds);
    int hosts = 0;
    for (const JobSpec& j : p.jobs) hosts += j.workers + 1;
    const Topology topology = racks_of_three(hosts);
    Engine engine;
    FluidNetwork flow(engine, topology, Sharing::kMaxMin);
    ComputeOn platform(engine, speeds);
    InaCluster cluster(engine, p, &flow, &topology, &platform.compute);
    ASSERT_GE(cluster.rack_programs(), 1u);
    // One audit per pool: the program's switch's and every other switch's (indices are per
    // pool; with the root at the PS's ToR a switch is one job's root and another's rack).
    std::vector<OwnershipTracker> ownership(1 + cluster.rack_programs());
    cluster.policy().pool().set_observer([&](const PoolEvent& e) { ownership[0](e); });
    std::uint64_t rack_claims = 0;
    for (std::size_t r = 0; r < cluster.rack_programs(); ++r)
      cluster.rack_program(r).pool().set_observer([&, r](const PoolEvent& e) {
        if (e.kind == PoolEvent::kClaim) ++rack_claims;
        ownership[r + 1](e);
      });
    cluster.start();
    engine.run_until(Time::s(1000));
    const InaCounters& c = cluster.stats();
    EXPECT_TRUE(cluster.all_ended());
    EXPECT_EQ(cluster.failed_jobs(), 0u);  // lossless, no failures: every job finishes
    for (const OwnershipTracker& o : ownership) EXPECT_EQ(o.violations, 0);
    EXPECT_EQ(c.wrong_sums, 0u);
    EXPECT_EQ(c.duplicate_results, 0u);
    EXPECT_EQ(c.elements_delivered, cluster.expected_elements());
    std::uint64_t chunks = 0;
    for (std::size_t j = 0; j < p.jobs.size(); ++j)
      chunks += static_cast<std::uint64_t>(cluster.job(j).plan().units()) *
                static_cast<std::uint64_t>(cluster.job(j).workers() * cluster.job(j).iterations());
    EXPECT_EQ(c.results_received, chunks);
    const NetworkTotals n = flow.totals();
    EXPECT_EQ(n.transfers_failed, 0u);
    EXPECT_EQ(n.transfers_in_flight, 0u);
    EXPECT_EQ(n.bytes_delivered, n.bytes_started);
    if (c.collision_packets > 0 || c.preemptions > 0) ++contended_runs;
    if (c.upward_packets > 0) ++upward_runs;
    if (rack_claims > 0 && c.collision_packets > 0) ++rack_contended_runs;
    if (c.evicted_partial_packets > 0) ++evicting_runs;
  }
  // The runs must exercise what the properties are about: partials going up from rack
  // switches that aggregated, collisions, and (DSA) evictions across the levels.
  EXPECT_EQ(upward_runs, 10u);
  EXPECT_GE(rack_contended_runs, 5u);
  EXPECT_GE(contended_runs, 5u);
  if (policy == PolicyKind::kDsa) {
    EXPECT_GE(evicting_runs, 3u);
  }
}

INSTANTIATE_TEST_SUITE_P(AtpAndDsa, InaTwoLevelProperties,
                         ::testing::Combine(::testing::Values(PolicyKind::kAtp, PolicyKind::kDsa),
                                            ::testing::Values(1, 62 * 4), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(policy_name(std::get<0>(info.param))) + "_burst" +
                                  std::to_string(std::get<1>(info.param)) +
                                  (std::get<2>(info.param) ? "_ps_tor" : "_switch_node");
                         });

// The shipped two-rack scenario's two_level variant (DSA; rack 1's ToR aggregates its workers,
// leaf0 stays the root), shrunk as ShippedTwoRackScenarioRunsThroughItsLinkFailures shrinks it
// (2 iterations, bursts of 3968 values): through the uplink failures every job finishes with
// right sums; rack 1's switch sends partials up.
// The same for the `atp_two_level_ps_tor` variant (ATP, every job rooted at its PS's ToR: jobs
// 3-5 at leaf1, job 3's rack-0 worker aggregated at leaf0 and sent up).
TEST(InaTwoLevel, ShippedTwoRackVariantRunsThroughItsLinkFailures) {
  const Registries registries = mlsim::test::registries_with(register_ina);
  std::ifstream in(kTwoLevelSource / "workloads/scenarios/ina_dsa_two_racks.json");
  const json shipped = json::parse(in);
  ASSERT_EQ(shipped["variants"]["two_level"]["system.levels"], "two_level");
  const json& rooted = shipped["variants"]["atp_two_level_ps_tor"];
  ASSERT_EQ(rooted["system.levels"], "two_level_ps_tor");
  ASSERT_EQ(rooted["system.policy"], "atp");
  for (const bool ps_tor : {false, true}) {
    SCOPED_TRACE(ps_tor ? "atp_two_level_ps_tor" : "two_level");
    json doc = shipped;
    doc["system"]["levels"] = ps_tor ? "two_level_ps_tor" : "two_level";
    if (ps_tor) doc["system"]["policy"] = "atp";
    doc["system"]["burst_values"] = 3968;
    for (json& j : doc["workload"]["jobs"]) j["iterations"] = 2;
    const RunOutput run = mlsim::test::run_json(doc, registries);
    const auto& m = run.results.metrics();
    EXPECT_EQ(m.at("jobs_finished"), 6);
    EXPECT_EQ(m.at("jobs_failed"), 0);
    EXPECT_EQ(m.at("wrong_sums"), 0);
    EXPECT_EQ(m.at("duplicate_results"), 0);
    EXPECT_GT(m.at("upward_packets"), 0);
    EXPECT_EQ(m.at("rack_switches"), 1);  // leaf1: a rack level, or (ps_tor) jobs 3-5's root
  }
}
