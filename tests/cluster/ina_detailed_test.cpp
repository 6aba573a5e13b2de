// In-network aggregation in the cluster's detailed mode (models/ina/ina_fabric.hpp): jobs whose
// sync is SwitchML, ATP or DSA share the aggregators of the switch they aggregate at. Cases
// computed by hand (a SwitchML job and an ATP job sharing one ToR's register memory; two SwitchML
// jobs contending for one partition; a job cut off by a failed link reported failed) and
// properties over random job streams placed by the cluster scheduler.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "models/cluster/communication_mode.hpp"
#include "models/ina/atp_policy.hpp"
#include "sim_core/hardware/node_health.hpp"
#include "sim_core/network/host_access_links.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "tests/cluster/test_support.hpp"
#include "tests/support/platform_bench.hpp"

using namespace mlsim;
using namespace mlsim::cluster;
using namespace mlsim::cluster::testing;

namespace {

using Platform = test::PlatformBench;

// Host links of 1e6 B/s, no latency: a 1000-byte packet takes 1 ms on a link.
constexpr double kInaHostBandwidth = 1e6;

// Two leaves of four hosts under one spine: hosts 0..3 under leaf 0, 4..7 under leaf 1.
Topology ina_two_leaves() {
  return build_topology(LeafSpineSpec{
      2, 4, 1, 1.0, LinkSpec{Bandwidth{kInaHostBandwidth}, Time::zero()}, Time::zero()});
}

// Packets of 250 values and no header (1000 bytes, 1 ms per hop), no switch latency,
// packet-accurate, timeouts far beyond any round trip here (no retransmission).
ina::ClusterParams switch_params(std::int64_t memory, std::int64_t switchml_memory,
                                 int partitions) {
  ina::ClusterParams p;
  p.aggregator_memory = Bytes{memory};
  p.switchml_memory = Bytes{switchml_memory};
  p.switchml_partitions = partitions;
  p.atp_values_per_packet = 250;
  p.switchml_values_per_packet = 250;
  p.header_bytes = Bytes{0};
  p.switch_latency = Time::zero();
  p.burst_values = 1;
  p.atp_timeout = Time::s(1);
  p.switchml_timeout = Time::s(1);
  return p;
}

// A model of layers {forward s, backward s, parameters} on every host, aggregating with `policy`.
TrainingModel ina_model(const Topology& topology, ina::PolicyKind policy,
                        std::vector<std::tuple<double, double, std::int64_t>> layers,
                        const ina::ClusterParams& sw, ina::FabricModel& fabric,
                        training::SchedulerConfig config = {}) {
  TrainingModel m;
  m.name = std::string(ina::policy_name(policy));
  m.sync = m.name;
  m.scheduler = config.partition > 0 ? "bytescheduler" : "fifo";
  m.make_scheduler = training::training_policies().schedulers.get(m.scheduler, "").value;
  m.config = config;
  // As the scenario reader: ByteScheduler over INA orders the job's chunks once (kJob).
  if (config.partition > 0) m.ordering = training::Ordering::kJob;
  auto times = std::make_shared<ProfileSeconds>();
  DnnProfile profile;
  for (const auto& [f, b, p] : layers) {
    times->push_back({f, b});
    m.parameters.push_back(p);
    m.reference_iteration_s += f + b;
    LayerProfile l;
    l.forward_ms = f * 1e3;
    l.backward_ms = b * 1e3;
    l.parameters = Bytes{4 * p};
    profile.layers.push_back(l);
  }
  m.times.assign(topology.nodes().size(), nullptr);
  for (NodeId h : topology.hosts()) m.times[h] = times;
  ina::PlanOptions o;
  o.values_per_packet = policy == ina::PolicyKind::kSwitchMl ? sw.switchml_values_per_packet
                                                             : sw.atp_values_per_packet;
  o.burst_packets = std::max(1, sw.burst_values / o.values_per_packet);
  o.partition = config.partition;
  fabric.policy = policy;
  fabric.plan = std::make_shared<const ina::JobPlan>(ina::make_job_plan(profile, o));
  fabric.priority.by_layer.assign(layers.size(), 0);
  for (std::size_t l = 0; l < layers.size(); ++l)
    fabric.priority.by_layer[l] = static_cast<std::uint16_t>(layers.size() - l);
  return m;
}

// The detailed mode with an INA fabric over `p`'s network.
struct InaRun {
  InaRun(Platform& p, CommunicationParams params_in, std::uint64_t seed = 1)
      : params(std::move(params_in)),
        fabric(p.engine, p.network, p.topology, *params.ina, params.ina_models),
        mode(p.engine, p.network, p.compute, params, RandomStream(seed, "models")) {
    mode.set_sync_builder(
        [this](std::size_t m, training::SyncEvents& ev, std::vector<NodeId> workers) {
          return fabric.attach(m, ev, std::move(workers));
        });
  }
  CommunicationParams params;
  ina::InaFabric fabric;
  CommunicationMode mode;
};

// Ends of jobs started at 0 on `placements`, model j for job j, one iteration each.
std::vector<double> run_jobs(Platform& p, InaRun& run,
                             const std::vector<std::vector<NodeId>>& placements) {
  std::vector<double> ends(placements.size(), -1);
  for (std::size_t j = 0; j < placements.size(); ++j) {
    JobSpec job;
    job.id = j;
    job.model = static_cast<int>(j);
    job.iterations = 1;
    EXPECT_TRUE(run.mode.start(
        job, placements[j], 0, [&ends, &p, j] { ends[j] = p.engine.now().seconds(); },
        [](JobRunner::Failure) { FAIL() << "no failure here"; }));
  }
  p.engine.run();
  EXPECT_EQ(run.mode.running(), 0u);
  return ends;
}

}  // namespace

// One ToR (leaf 0) with 3000 bytes of aggregator memory: SwitchML gets 2000 (one slot of 250
// values with its shadow copy, one partition), ATP the other 1000 (one aggregator). Both jobs:
// one layer (forward 1 s, backward 1 s, 500 values = 2 packets of 1000 B), one iteration.
//
// SwitchML job S on hosts 0, 1 (a window of one slot): at 2 s both workers send chunk 0; it
// reaches the switch at 2.001, completes, and the result is back on both at 2.002; chunk 1 (same
// slot, other copy) leaves then and is back at 2.004: S ends at 2.004.
//
// ATP job A on hosts 2, 3 (PS on host 2): both workers send chunks 0 and 1 back to back (2.000-
// 2.001, 2.001-2.002). Chunk 0 claims the one aggregator at 2.001, completes, and its partial goes
// to the PS (switch -> host 2, 2.001-2.002). Chunk 1 arrives at 2.002 and collides (the
// aggregator waits for the PS's result): both workers' packets fall back to the PS (queued on the
// switch's port to host 2: 2.002-2.003, 2.003-2.004). The PS's result 0 leaves host 2 at 2.002,
// reaches the switch at 2.003, frees the aggregator and is multicast: host 3 at 2.004; host 2's
// port is busy with the second fallback until 2.004, so host 2 gets it at 2.005. The PS has both
// fallbacks at 2.004; result 1 reaches the switch at 2.005 and both workers at 2.006: A ends at
// 2.006.
//
// With the whole 3000 bytes to ATP (no SwitchML model in the run) its pool has 3 aggregators and
// chunks 0 and 1 hash to different ones (checked): both complete in the switch; partials reach
// the PS at 2.002 and 2.003, its results the switch at 2.003 and 2.004 and the workers at 2.004
// and 2.005: A ends at 2.005, 1 ms earlier than beside SwitchML.
TEST(InaDetailedMode, SwitchMlAndAtpJobsShareOneSwitchsAggregators) {
  {
    Platform p(ina_two_leaves());
    CommunicationParams params;
    params.ina = switch_params(3000, 2000, 1);
    params.ina_models.resize(2);
    params.models.push_back(ina_model(p.topology, ina::PolicyKind::kSwitchMl, {{1, 1, 500}},
                                      *params.ina, params.ina_models[0]));
    params.models.push_back(ina_model(p.topology, ina::PolicyKind::kAtp, {{1, 1, 500}}, *params.ina,
                                      params.ina_models[1]));
    InaRun run(p, params);
    EXPECT_EQ(run.fabric.switchml_slots_per_job(), 1u);
    EXPECT_EQ(run.fabric.shared_units(), 1u);
    const std::vector<double> ends = run_jobs(p, run, {{0, 1}, {2, 3}});
    ASSERT_EQ(ends.size(), 2u);
    EXPECT_NEAR(ends[0], 2.004, 1e-9);
    EXPECT_NEAR(ends[1], 2.006, 1e-9);
    EXPECT_EQ(run.fabric.switches(), 1u);  // both aggregate at leaf 0
    const ina::InaCounters& c = run.fabric.counters();
    EXPECT_EQ(c.collision_packets, 2u);
    EXPECT_EQ(c.fallback_packets, 2u);
    EXPECT_EQ(c.retransmitted_packets, 0u);
    EXPECT_EQ(c.wrong_sums, 0u);
    EXPECT_EQ(c.duplicate_results, 0u);
    EXPECT_EQ(c.elements_delivered, 2 * 500 + 2 * 500);  // every worker, every value, once
  }
  {
    Platform p(ina_two_leaves());
    CommunicationParams params;
    params.ina = switch_params(3000, 0, 1);
    params.ina_models.resize(1);
    params.models.push_back(ina_model(p.topology, ina::PolicyKind::kAtp, {{1, 1, 500}}, *params.ina,
                                      params.ina_models[0]));
    InaRun run(p, params);
    EXPECT_EQ(run.fabric.shared_units(), 3u);
    // The fabric's jobs are numbered from 0; chunks 0 and 1 of job 0 take distinct aggregators.
    ina::InaCounters unused;
    struct NoPorts final : ina::SwitchPorts {
      explicit NoPorts(ina::InaCounters& c) : c_(c) {}
      Time now() const override { return Time::zero(); }
      int workers_of(std::uint16_t) const override { return 2; }
      void to_ps(const ina::Packet&) override {}
      void multicast(const ina::Packet&) override {}
      void to_worker(const ina::Packet&, std::uint16_t) override {}
      ina::InaCounters& counters() override { return c_; }
      ina::InaCounters& c_;
    } ports(unused);
    ina::AtpPolicy atp(ports, 3);
    ASSERT_NE(atp.index_of(0, 0), atp.index_of(0, 1));
    const std::vector<double> ends = run_jobs(p, run, {{2, 3}});
    EXPECT_NEAR(ends[0], 2.005, 1e-9);
    EXPECT_EQ(run.fabric.counters().collision_packets, 0u);
  }
}

// ByteScheduler over ATP with two workers that drift apart (the livelock of ByteScheduler over
// one aggregation switch, docs/cluster.md). An ATP job on hosts 0, 1 (leaf 0; PS host 0), three
// layers of 250 values (one 1000-byte packet, one chunk each: partition 250, credit 250, one
// chunk in flight per worker), forward 0.1 s a layer on both; backward 1 ms a layer on host 0,
// 0.1 s on host 1. 100 aggregators (no collision, checked). A chunk's aggregate reaches the
// workers 4 ms after the later of its two packets leaves (ToR, PS, ToR, workers: 1 ms a hop).
//   Backward ends layer 2, 1, 0 at 0.301, 0.302, 0.303 s on host 0 and 0.4, 0.5, 0.6 s on host 1.
//   One order for the job (the scenario default, `scheduling` "job"): each layer starts on both
//   hosts once host 1 produced it: layer 2 at 0.4 (back 0.404), layer 1 at 0.5 (back 0.504),
//   layer 0 at 0.6, back at 0.604: the job ends; no timeout.
//   Host 0 pacing, host 1 sending as produced ("rank0"): host 0 sends layer 2 at 0.301, host 1 at
//   0.4: back at 0.404, and host 0's credit goes to its highest-priority queued chunk, layer 0;
//   host 1 sends layer 1 at 0.5 and layer 0 at 0.6; layer 0 is back at 0.604, host 0 sends layer
//   1, back at 0.608: the job ends.
//   Every worker scheduling ("every_worker"): as "rank0" until 0.404; host 1's credit goes to
//   layer 1 at 0.5, and each worker then holds its credit for a chunk that waits on one the
//   other has queued behind its own credit; ATP's timeouts (1 s here) resend only those two
//   chunks (host 0's layer 0, sent 0.404: at 1.404 and 2.404; host 1's layer 1, sent 0.5: at 1.5
//   and 2.5). The stall watchdog (system.stall_timeout, 2 s here) first looks at 2 s: the last
//   progress is host 1's backward end at 0.6, so it looks again at 2.6 and ends the job as
//   stalled (reported, dropped by the cluster).
TEST(InaDetailedMode, ByteSchedulerOverAtpWithDriftingWorkersFinishesUnlessEveryWorkerSchedules) {
  for (const training::Ordering ordering : {training::Ordering::kJob, training::Ordering::kRankZero,
                                            training::Ordering::kEveryWorker}) {
    SCOPED_TRACE(static_cast<int>(ordering));
    Platform p(ina_two_leaves());
    CommunicationParams params;
    params.stall_timeout = Time::s(2);
    params.ina = switch_params(100 * 1000, 0, 1);
    params.ina_models.resize(1);
    params.models.push_back(ina_model(p.topology, ina::PolicyKind::kAtp,
                                      {{0.1, 0.001, 250}, {0.1, 0.001, 250}, {0.1, 0.001, 250}},
                                      *params.ina, params.ina_models[0], {250, 250}));
    params.models[0].ordering = ordering;
    params.models[0].times[1] = std::make_shared<ProfileSeconds>(
        ProfileSeconds(3, LayerSeconds{0.1, 0.1}));  // host 1: the slow backward
    InaRun run(p, params);
    double end = -1, stalled_at = -1;
    JobSpec job;
    job.id = 0;
    job.model = 0;
    job.iterations = 1;
    ASSERT_TRUE(run.mode.start(
        job, std::vector<NodeId>{0, 1}, 0, [&] { end = p.engine.now().seconds(); },
        [&](JobRunner::Failure why) {
          EXPECT_EQ(why, JobRunner::Failure::kStalled);
          stalled_at = p.engine.now().seconds();
        }));
    p.engine.run_until(Time::s(20));
    const ina::InaCounters& c = run.fabric.counters();
    EXPECT_EQ(c.collision_packets, 0u);
    EXPECT_EQ(run.mode.running(), 0u);
    Results out;
    run.mode.report(out);
    if (ordering != training::Ordering::kEveryWorker) {
      EXPECT_NEAR(end, ordering == training::Ordering::kJob ? 0.604 : 0.608, 1e-9);
      EXPECT_EQ(stalled_at, -1);
      EXPECT_EQ(c.timeouts, 0u);
      EXPECT_EQ(c.elements_delivered, 2 * 3 * 250);
      EXPECT_EQ(out.metrics().at("detailed_jobs_stalled"), 0);
      EXPECT_FALSE(out.details().contains("stalled_jobs"));
    } else {
      EXPECT_EQ(end, -1);
      EXPECT_NEAR(stalled_at, 2.6, 1e-9);
      EXPECT_EQ(c.elements_delivered, 2 * 250);  // layer 2 only
      EXPECT_EQ(c.timeouts, 4u);
      EXPECT_EQ(out.metrics().at("detailed_jobs_failed"), 1);
      EXPECT_EQ(out.metrics().at("detailed_jobs_stalled"), 1);
      ASSERT_TRUE(out.details().contains("stalled_jobs"));
      EXPECT_NEAR(out.details()["stalled_jobs"][0]["last_progress_s"].get<double>(), 0.6, 1e-9);
    }
  }
}

// Two-level aggregation (ATP's rack-local first level, ina_fabric.hpp) by hand: two leaves of two
// hosts under one spine, every link 1e6 B/s (uplinks: 2 hosts x 1e6 / oversubscription 2), no
// latency; an ATP job on hosts 0, 1 (leaf 0, the root: its PS is host 0) and 2, 3 (leaf 1), one
// layer of 250 values (one 1000-byte packet, 1 ms on any link), forward 1 s, backward 1 s.
//
// One switch (the default): at 2 s hosts 2 and 3 send to leaf 0; both cross leaf 1's uplink,
// sharing it (0.5e6 B/s each), and reach leaf 0 at 2.002 (hosts 0, 1 at 2.001). The aggregate
// reaches the PS at 2.003, its result leaf 0 at 2.004; the multicast reaches hosts 0, 1 at 2.005
// and, two packets through leaf 0's uplink, hosts 2 and 3 by 2.006. Each uplink direction carries
// 2 x 1000 bytes.
//
// Two levels: hosts 2, 3 reach leaf 1 at 2.001, which completes its rack's aggregator and sends
// one partial up (1 ms, the uplink path at 1e6): leaf 0 at 2.002, where it meets hosts 0 and 1's
// gradients; PS at 2.003, result at leaf 0 at 2.004, hosts 0, 1 and leaf 1 at 2.005, hosts 2, 3
// at 2.006. The same end (the rack's partial waits for its slower worker as the root did) with
// one packet up and one down: 1000 bytes each way on the uplink, half the cross-rack bytes.
TEST(InaDetailedMode, TwoLevelAggregationSendsOnePartialPerRackUpAndOneResultDown) {
  for (const bool two_level : {false, true}) {
    SCOPED_TRACE(two_level ? "two levels" : "one switch");
    Platform p(build_topology(LeafSpineSpec{
        2, 2, 1, 2.0, LinkSpec{Bandwidth{kInaHostBandwidth}, Time::zero()}, Time::zero()}));
    CommunicationParams params;
    params.ina = switch_params(3000, 0, 1);
    params.ina->two_level = two_level;
    params.ina_models.resize(1);
    params.models.push_back(ina_model(p.topology, ina::PolicyKind::kAtp, {{1, 1, 250}}, *params.ina,
                                      params.ina_models[0]));
    InaRun run(p, params);
    std::map<NodeId, int> claims;  // per switch
    run.fabric.set_pool_observer([&](NodeId sw, int, const PoolEvent& e) {
      if (e.kind == PoolEvent::kClaim) ++claims[sw];
    });
    const std::vector<double> ends = run_jobs(p, run, {{0, 1, 2, 3}});
    EXPECT_NEAR(ends[0], 2.006, 1e-9);
    const NodeId leaf0 = run.fabric.switch_of(0), leaf1 = run.fabric.switch_of(2);
    Bytes up, down;
    for (LinkId l = 0; l < p.topology.links().size(); ++l) {
      const Link& link = p.topology.link(l);
      if (link.src == leaf1 && p.topology.node(link.dst).kind == NodeKind::kSwitch)
        up = p.network.link_stats(l).bytes_carried;
      if (link.dst == leaf1 && p.topology.node(link.src).kind == NodeKind::kSwitch)
        down = p.network.link_stats(l).bytes_carried;
    }
    EXPECT_EQ(up.count, two_level ? 1000 : 2000);
    EXPECT_EQ(down.count, two_level ? 1000 : 2000);
    Results out;
    run.fabric.report(out);
    EXPECT_EQ(out.metrics().at("ina_cross_rack_bytes"), two_level ? 2000 : 4000);
    EXPECT_EQ(out.metrics().at("ina_upward_packets"), two_level ? 1 : 0);
    EXPECT_EQ(run.fabric.switches(), two_level ? 2u : 1u);
    EXPECT_EQ(claims[leaf0], 1);  // one aggregator per chunk per switch
    EXPECT_EQ(claims[leaf1], two_level ? 1 : 0);
    const ina::InaCounters& c = run.fabric.counters();
    EXPECT_EQ(c.aggregated_packets, two_level ? 5u : 4u);  // 4 gradients (+ 1 partial at leaf 0)
    EXPECT_EQ(c.ps_fallback_bytes, 0u);
    EXPECT_EQ(c.wrong_sums, 0u);
    EXPECT_EQ(c.duplicate_results, 0u);
    EXPECT_EQ(c.elements_delivered, 4 * 250);
  }
}

// DSA's preemption at a rack's switch under two-level aggregation, by hand: two leaves of four
// hosts, host links 1e6 B/s, uplinks 1e6 B/s (oversubscription 4), no latency; one aggregator
// per switch; one-layer jobs of one 1000-byte packet (1 ms on any path).
// Job L (priority 1) on hosts 0 (root leaf 0, its PS), 4 and 5 (leaf 1); host 5's backward takes
// 1.002 s. Job H (priority 5) on hosts 6, 7 (all under leaf 1), backward 1.0005 s.
//   2.001  L's host 0 claims leaf 0's aggregator, host 4 leaf 1's ({4}).
//   2.0015 H's two packets reach leaf 1: the first preempts L's incomplete aggregator; its
//          partial {4} (marked evicted) goes up to leaf 0 [inferred: not to the PS], and H
//          claims and completes it. H: PS (host 6) 2.0025, leaf 1 2.0035, hosts 2.0045.
//   2.0025 the evicted partial reaches leaf 0 and joins host 0's gradient there.
//   2.003  host 5's packet collides at leaf 1 (H's aggregator waits for its result; lower
//          priority: no preemption) and goes up: leaf 0 at 2.004, which completes L's chunk.
//          PS 2.005, leaf 0 2.006, host 0 and leaf 1 2.007, hosts 4, 5 2.008: L ends at 2.008.
// No selective retransmission: the evicted partial was aggregated at the root and never reached
// the PS. With one switch per job (L's workers all send to leaf 0, H alone at leaf 1) nothing is
// preempted; host 5's packet completes L at leaf 0 at 2.003, PS 2.004, leaf 0 2.005, host 0
// 2.006, and the two results for hosts 4, 5 leave one after the other on leaf 0's uplink:
// 2.007. H ends at 2.0045 either way.
TEST(InaDetailedMode, DsaPreemptsAtARacksSwitchAndTheRootRecoversTheEvictedPartial) {
  for (const bool two_level : {false, true}) {
    SCOPED_TRACE(two_level ? "two levels" : "one switch");
    Platform p(build_topology(LeafSpineSpec{
        2, 4, 1, 4.0, LinkSpec{Bandwidth{kInaHostBandwidth}, Time::zero()}, Time::zero()}));
    CommunicationParams params;
    params.ina = switch_params(1000, 0, 1);
    params.ina->two_level = two_level;
    params.ina_models.resize(2);
    params.models.push_back(ina_model(p.topology, ina::PolicyKind::kDsa, {{1, 1, 250}}, *params.ina,
                                      params.ina_models[0]));
    params.models.push_back(ina_model(p.topology, ina::PolicyKind::kDsa, {{1, 1.0005, 250}},
                                      *params.ina, params.ina_models[1]));
    params.models[0].times[5] = std::make_shared<ProfileSeconds>(ProfileSeconds{{1, 1.002}});
    params.ina_models[0].priority.by_layer = {1};
    params.ina_models[1].priority.by_layer = {5};
    InaRun run(p, params);
    ASSERT_EQ(run.fabric.shared_units(), 1u);
    const std::vector<double> ends = run_jobs(p, run, {{0, 4, 5}, {6, 7}});
    EXPECT_NEAR(ends[0], two_level ? 2.008 : 2.007, 1e-9);
    EXPECT_NEAR(ends[1], 2.0045, 1e-9);
    const ina::InaCounters& c = run.fabric.counters();
    EXPECT_EQ(c.preemptions, two_level ? 1u : 0u);
    EXPECT_EQ(c.evicted_partial_packets, two_level ? 1u : 0u);
    EXPECT_EQ(c.collision_packets, two_level ? 2u : 0u);
    EXPECT_EQ(c.upward_packets, two_level ? 2u : 0u);  // the evicted partial, host 5's packet
    EXPECT_EQ(c.resend_requests, 0u);
    EXPECT_EQ(c.retransmitted_packets, 0u);
    EXPECT_EQ(c.ps_fallback_bytes, 0u);  // the root completed L's chunk
    EXPECT_EQ(c.wrong_sums, 0u);
    EXPECT_EQ(c.duplicate_results, 0u);
    EXPECT_EQ(c.elements_delivered, 3 * 250 + 2 * 250);
  }
}

// Two SwitchML jobs under one ToR with one partition: the second holds its GPUs and waits for
// the partition (its start is held), which the first frees when it ends at 2.004; the second
// then computes (forward 1 s, backward 1 s) and streams its two chunks as above: 4.008. Placed
// under different ToRs (each switch has its own partition) both end at 2.004.
TEST(InaDetailedMode, SwitchMlJobsWaitForAPartitionOfTheirSwitch) {
  for (const bool same_switch : {true, false}) {
    SCOPED_TRACE(same_switch ? "one ToR" : "two ToRs");
    Platform p(ina_two_leaves());
    CommunicationParams params;
    params.ina = switch_params(2000, 0, 1);
    params.ina_models.resize(2);
    for (int j = 0; j < 2; ++j)
      params.models.push_back(ina_model(p.topology, ina::PolicyKind::kSwitchMl, {{1, 1, 500}},
                                        *params.ina, params.ina_models[j]));
    InaRun run(p, params);
    std::vector<std::set<std::uint16_t>> holders;
    const std::vector<NodeId> second =
        same_switch ? std::vector<NodeId>{2, 3} : std::vector<NodeId>{4, 5};
    const std::vector<double> ends = run_jobs(p, run, {{0, 1}, second});
    EXPECT_NEAR(ends[0], 2.004, 1e-9);
    EXPECT_NEAR(ends[1], same_switch ? 4.008 : 2.004, 1e-9);
    Results out;
    run.fabric.report(out);
    EXPECT_EQ(out.metrics().at("ina_jobs_waited_for_partition"), same_switch ? 1 : 0);
    EXPECT_NEAR(out.metrics().at("ina_partition_wait_s"), same_switch ? 2.004 : 0, 1e-9);
  }
}

// A DSA job on hosts 0 and 4 (across the spine, aggregating at leaf 0) whose host 4 loses its
// link at 1.5 s: its first packet at 2 s finds no route; the strategy reports the job failed
// once (GradientSync::set_on_failed), the runner frees it, and the fabric frees what it held.
TEST(InaDetailedMode, AJobCutOffFromItsSwitchIsReportedFailed) {
  Platform p(ina_two_leaves());
  LinkConditions links(p.topology, p.network);
  CommunicationParams params;
  params.ina = switch_params(3000, 0, 1);
  params.ina_models.resize(1);
  params.models.push_back(ina_model(p.topology, ina::PolicyKind::kDsa, {{1, 1, 500}}, *params.ina,
                                    params.ina_models[0]));
  InaRun run(p, params);
  const AccessLinks a = host_access_links(p.topology, 4, "test host");
  p.engine.schedule_at(Time::from_seconds(1.5), [&] {
    links.set_link_up(std::vector<LinkId>{a.up, a.down}, false);
  });
  JobSpec job;
  job.model = 0;
  job.iterations = 1;
  int failed = 0;
  double failed_at = -1;
  const std::vector<NodeId> hosts{0, 4};
  ASSERT_TRUE(run.mode.start(
      job, hosts, 0, [] { FAIL() << "cannot finish"; },
      [&](JobRunner::Failure why) {
        EXPECT_EQ(why, JobRunner::Failure::kNoRoute);
        ++failed;
        failed_at = p.engine.now().seconds();
      }));
  p.engine.run();
  EXPECT_EQ(failed, 1);
  EXPECT_NEAR(failed_at, 2.0, 1e-9);  // its first packet fails at once (no route)
  EXPECT_EQ(run.mode.running(), 0u);
  Results out;
  run.mode.report(out);
  EXPECT_EQ(out.metrics().at("detailed_jobs_failed"), 1);
}

// Random job streams of SwitchML beside ATP (even trials) or DSA (odd) models, placed by FCFS or
// EASY on two leaves, with tiny pools and layers computed in microseconds (so that chunks of
// several layers are in the switch at once) so that jobs collide, preempt and wait for
// partitions, and
// (every third trial) random host-link failures, all repaired:
//   - no aggregator is ever claimed while held (the pools' own check), and by the pools' events
//     no aggregator is held by two jobs: a claim always finds it free, a release is by its holder;
//   - every job is reported once: finished, or dropped after failing (drop policy);
//   - every finished job's workers each received every value of its gradient exactly once per
//     iteration (values delivered = values x workers x iterations, no duplicate result, no wrong
//     sum: each sum is every worker exactly once) and applied every update once per iteration;
//   - no job is left running.
// Every stream runs twice: with one aggregation switch per job, and with two-level aggregation
// (ATP/DSA jobs spanning both leaves aggregate at each leaf, then at their root): then no
// aggregator of any switch is held by two jobs, and a value aggregated at a rack's switch and
// again at the root would show as a wrong sum.
TEST(InaDetailedMode, NoAggregatorIsSharedAndEveryGradientValueIsAggregatedOnce) {
  std::mt19937_64 rng(11);
  auto integer = [&](std::int64_t a, std::int64_t b) {
    return std::uniform_int_distribution<std::int64_t>(a, b)(rng);
  };
  auto uniform = [&](double a, double b) { return std::uniform_real_distribution<>(a, b)(rng); };
  int collisions = 0, waits = 0, preemptions = 0, failures = 0;
  std::uint64_t upward = 0, two_level_collisions = 0, two_level_preemptions = 0;
  for (int run_index = 0; run_index < 18; ++run_index) {
    const int trial = run_index % 9;
    const bool two_level = run_index >= 9;
    SCOPED_TRACE(::testing::Message() << "trial " << trial << (two_level ? " two-level" : ""));
    Platform p(build_topology(
        LeafSpineSpec{2, 3, 2, 1.5, LinkSpec{Bandwidth{12.5e9}, Time::us(1)}, Time::us(1)}));
    LinkConditions links(p.topology, p.network);
    NodeHealth health(p.topology.nodes().size());
    CommunicationParams params;
    // SwitchML: slots of 128 values with their shadow copy (1024 bytes), one or two per
    // partition; the shared pool 1 to 8 aggregators of 62 values (248 bytes).
    const int partitions = 1 + trial % 2;
    const std::int64_t switchml_memory = 1024 * partitions * integer(1, 2);
    params.ina = switch_params(switchml_memory + 248 * integer(1, 8), switchml_memory, partitions);
    params.ina->atp_values_per_packet = 62;
    params.ina->switchml_values_per_packet = 128;
    params.ina->header_bytes = Bytes{60};
    params.ina->atp_timeout = Time::ms(1);
    params.ina->switchml_timeout = Time::ms(10);
    params.ina->switch_latency = Time::ns(400);
    params.ina->two_level = two_level;
    const ina::PolicyKind shared = trial % 2 ? ina::PolicyKind::kDsa : ina::PolicyKind::kAtp;
    params.ina_models.resize(3);
    for (int m = 0; m < 3; ++m) {
      std::vector<std::tuple<double, double, std::int64_t>> layers;
      for (std::int64_t l = integer(2, 4); l > 0; --l)
        layers.emplace_back(uniform(1e-6, 2e-5), uniform(1e-6, 2e-5),
                            integer(0, 3) > 0 ? integer(1, 3000) : 0);
      const ina::PolicyKind policy = m == 0 ? ina::PolicyKind::kSwitchMl : shared;
      const training::SchedulerConfig config =
          m == 2 ? training::SchedulerConfig{integer(100, 2000), integer(100, 6000)}
                 : training::SchedulerConfig{};
      params.models.push_back(
          ina_model(p.topology, policy, layers, *params.ina, params.ina_models[m], config));
      // DSA: models ranked 1..3 (16 layer levels each), as the scenario reader ranks them.
      for (std::uint16_t& pr : params.ina_models[m].priority.by_layer)
        pr = static_cast<std::uint16_t>(pr + 16 * (m + 1));
    }
    InaRun run(p, params, static_cast<std::uint64_t>(trial));
    std::map<std::tuple<NodeId, int, std::size_t>, std::uint16_t> held;
    run.fabric.set_pool_observer([&](NodeId sw, int pool, const PoolEvent& e) {
      const auto key = std::make_tuple(sw, pool, e.index);
      if (e.kind == PoolEvent::kClaim) {
        EXPECT_EQ(held.count(key), 0u) << "claimed while held";
        held[key] = e.job;
      } else {
        ASSERT_EQ(held.count(key), 1u) << "released while free";
        EXPECT_EQ(held[key], e.job) << "released by another job";
        held.erase(key);
      }
    });
    cluster::ClusterParams c = one_type(6, 2, trial % 2 ? Policy::kEasyBackfill : Policy::kFcfs);
    c.estimate_factor = 1.5;
    c.requeue_on_failure = false;
    PoissonOptions o;
    o.jobs = 12;
    o.mean_interarrival = Time::us(100);
    o.mean_duration = Time::us(500);
    o.gpus = {2, 3, 4, 6};
    ClusterSimulation sim(p.engine, c,
                          std::make_unique<PoissonJobSource>(o, RandomStream(trial, "jobs")), 1,
                          &health, p.topology.hosts());
    sim.set_runner(&run.mode);
    links.on_change([&sim](auto) { sim.on_links_changed(); });
    if (trial % 3 == 2) {
      for (int f = 0; f < 3; ++f) {
        const AccessLinks a = host_access_links(
            p.topology, p.topology.hosts()[static_cast<std::size_t>(integer(0, 5))], "test host");
        const double at = uniform(0.0, 2e-3);
        p.engine.schedule_at(Time::from_seconds(at), [&links, a] {
          links.set_link_up(std::vector<LinkId>{a.up, a.down}, false);
        });
        p.engine.schedule_at(Time::from_seconds(at + 5e-4), [&links, a] {
          links.set_link_up(std::vector<LinkId>{a.up, a.down}, true);
        });
      }
    }
    std::vector<JobRecord> records;
    std::vector<TrainingRecord> trained;
    sim.set_observer([&](const JobRecord& r) { records.push_back(r); });
    run.mode.set_observer([&](const TrainingRecord& r) { trained.push_back(r); });
    sim.start();
    p.engine.run();
    ASSERT_EQ(records.size(), o.jobs);
    std::vector<int> seen(o.jobs, 0);
    for (const JobRecord& r : records) ++seen[r.spec.id];
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<long>(o.jobs));
    for (const TrainingRecord& t : trained) {
      if (t.outcome != TrainingRecord::Outcome::kFinished) {
        ++failures;
        continue;
      }
      SCOPED_TRACE(::testing::Message() << "job " << t.id << " model " << t.model);
      for (const auto& worker : t.updates)
        for (std::size_t u : worker) EXPECT_EQ(u, t.iterations);
      // Values each worker received, every iteration: the gradient (4 bytes a value) once.
      EXPECT_EQ(t.bytes_delivered, t.gradient_bytes * static_cast<std::int64_t>(t.hosts.size()) *
                                       static_cast<std::int64_t>(t.iterations));
    }
    const ina::InaCounters& k = run.fabric.counters();
    EXPECT_EQ(k.wrong_sums, 0u);
    EXPECT_EQ(k.duplicate_results, 0u);
    EXPECT_TRUE(held.empty()) << "aggregators held after every job ended";
    EXPECT_EQ(run.mode.running(), 0u);
    Results out;
    run.fabric.report(out);
    collisions += static_cast<int>(k.collision_packets);
    preemptions += static_cast<int>(k.preemptions);
    waits += static_cast<int>(out.metrics().at("ina_jobs_waited_for_partition"));
    if (two_level) {
      upward += k.upward_packets;
      two_level_collisions += k.collision_packets;
      two_level_preemptions += k.preemptions;
    } else {
      EXPECT_EQ(k.upward_packets, 0u);
    }
  }
  // The streams exercised what they are for.
  EXPECT_GT(collisions, 0);
  EXPECT_GT(preemptions, 0);
  EXPECT_GT(waits, 0);
  EXPECT_GT(failures, 0);
  EXPECT_GT(upward, 0u);  // jobs did span both leaves
  EXPECT_GT(two_level_collisions, 0u);
  EXPECT_GT(two_level_preemptions, 0u);
}
