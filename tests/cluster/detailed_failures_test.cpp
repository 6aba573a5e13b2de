// Failures in the cluster model's detailed mode (docs/cluster.md, "Failures in the detailed
// mode"): a node failure kills the simulated jobs on the node (JobRunner::kill), a job whose
// transfers find no route fails (GradientSync's failure report), and both are requeued or
// dropped by the job-level mode's failure policy. Cases computed by hand, then properties under
// random node, switch and link failures.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <random>

#include "models/cluster/communication_mode.hpp"
#include "sim_core/hardware/node_health.hpp"
#include "sim_core/network/host_access_links.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "tests/cluster/test_support.hpp"
#include "tests/support/platform_bench.hpp"

using namespace mlsim;
using namespace mlsim::cluster;
using namespace mlsim::cluster::testing;

namespace {

constexpr double kHostBandwidth = 4e6;  // bytes/s: one million fp32 parameters per second
constexpr std::int64_t M = 1'000'000;

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

// `layers` (forward, backward, parameters, activation bytes) as a pipeline model: the even split
// into `stages` when `planner` is kEven, else the planner's stages.
TrainingModel failures_pipeline_model(
    const Topology& topology, const std::string& scheduler, const std::string& sync,
    const std::vector<std::tuple<double, double, std::int64_t, std::int64_t>>& layers,
    StagePlanner planner, std::size_t stages, training::PipelineSchedule::Kind schedule,
    std::size_t micro_batches, training::SchedulerConfig config) {
  std::vector<std::tuple<double, double, std::int64_t>> compute;
  for (const auto& [f, b, p, a] : layers) compute.emplace_back(f, b, p);
  TrainingModel m = model(topology, scheduler, sync, compute, config);
  for (const auto& [f, b, p, a] : layers) {
    m.reference_layer_s.push_back(f + b);
    m.activation_bytes.push_back(a);
  }
  m.name += std::string("_") + stage_planner_name(planner);
  m.pipeline.stages = planner == StagePlanner::kEven ? stages : 0;
  m.pipeline.schedule = schedule;
  m.pipeline.micro_batches = micro_batches;
  m.pipeline.planner = planner;
  return m;
}

// Two leaves of two hosts under one spine, each leaf's one uplink at the hosts' 4e6 B/s.
Topology two_leaves() {
  return build_topology(
      LeafSpineSpec{2, 2, 1, 2.0, LinkSpec{Bandwidth{kHostBandwidth}, Time::zero()}, Time::zero()});
}

// A cluster run in the detailed mode with the platform's failure plumbing: LinkConditions and
// NodeHealth as the runner wires them (a node failure takes its links down first, then the
// cluster hears of it; a link change releases the jobs held after a communication failure).
struct FailureRun {
  // `models` empty: one model of one layer (forward 1 s, backward 1 s, 1M parameters, FIFO
  // ring); else built on the run's topology.
  FailureRun(Topology t, ClusterParams c, std::unique_ptr<JobSource> source,
             std::function<std::vector<TrainingModel>(const Topology&)> models = {},
             std::uint64_t seed = 1)
      : p(std::move(t)), links(p.topology, p.network), health(p.topology.nodes().size()) {
    if (models)
      params.models = models(p.topology);
    else
      params.models.push_back(model(p.topology, "fifo", "ring", {{1.0, 1.0, M}}));
    mode = std::make_unique<CommunicationMode>(p.engine, p.network, p.compute, params,
                                               RandomStream(seed, "models"));
    mode->set_links(&links);  // the pipeline planners read the links as they are
    sim = std::make_unique<ClusterSimulation>(p.engine, std::move(c), std::move(source), 1, &health,
                                              p.topology.hosts());
    sim->set_runner(mode.get());
    links.on_change([this](auto) { sim->on_links_changed(); });
    sim->set_observer([this](const JobRecord& r) { records.push_back(r); });
    mode->set_observer([this](const TrainingRecord& r) { trained.push_back(r); });
  }
  FailureRun(Topology t, ClusterParams c, std::vector<JobSpec> jobs)
      : FailureRun(std::move(t), std::move(c), list_source(std::move(jobs))) {}
  FailureRun(const FailureRun&) = delete;
  FailureRun& operator=(const FailureRun&) = delete;

  void fail_node(NodeId n, double at, double repair_after = -1) {
    p.engine.schedule_at(Time::from_seconds(at), [this, n] {
      links.set_node_up(n, false);
      health.set_up(n, false);
    });
    if (repair_after >= 0)
      p.engine.schedule_at(Time::from_seconds(at + repair_after), [this, n] {
        links.set_node_up(n, true);
        health.set_up(n, true);
      });
  }
  void fail_host_link(NodeId host, double at, double repair_after = -1) {
    const AccessLinks a = host_access_links(p.topology, host, "test host");
    p.engine.schedule_at(Time::from_seconds(at), [this, a] {
      links.set_link_up(std::vector<LinkId>{a.up, a.down}, false);
    });
    if (repair_after >= 0)
      p.engine.schedule_at(Time::from_seconds(at + repair_after), [this, a] {
        links.set_link_up(std::vector<LinkId>{a.up, a.down}, true);
      });
  }
  Results run() {
    sim->start();
    p.engine.run();
    Results out;
    sim->report(out);
    return out;
  }

  test::PlatformBench p;
  LinkConditions links;
  NodeHealth health;
  CommunicationParams params;
  std::unique_ptr<CommunicationMode> mode;
  std::unique_ptr<ClusterSimulation> sim;
  std::vector<JobRecord> records;
  std::vector<TrainingRecord> trained;
};

}  // namespace

// One 3-GPU job on hosts of 2 GPUs (one iteration: forward 1 s, backward 1 s, 1M parameters,
// FIFO ring). FCFS places it on hosts 0 and 1 (the most free GPUs, lower index first): F [0,1],
// B [1,2], then the ring all-reduce of 4 MB in 2 steps of 2 MB at 4e6 B/s, 0.5 s each: alone it
// ends at 3 s.
// Host 1 fails at 2.25 s, mid-step 1: the runner kills the attempt (its two 2 MB transfers are
// cancelled, 1 MB of each through), the cluster requeues it and places it at once on the free
// hosts with the most GPUs, 0 and 2 (1 is down), across the uplinks: alone again, so it runs
// 3 s and ends at 2.25 + 3 = 5.25 s. Lost: 3 GPUs x 2.25 s. The network delivered only the
// second attempt's 2 transfers x 2 steps x 2 MB = 8 MB; the first attempt's 4 MB failed there
// (cancelled).
TEST(DetailedFailures, ANodeFailureKillsTheJobAndTheClusterRequeuesIt) {
  FailureRun r(two_leaves(), one_type(4, 2, Policy::kFcfs), {job(0, 3, 2)});
  r.fail_node(1, 2.25);
  const Results out = r.run();
  ASSERT_EQ(r.records.size(), 1u);
  EXPECT_TRUE(r.records[0].finished);
  EXPECT_EQ(r.records[0].restarts, 1);
  EXPECT_DOUBLE_EQ(r.records[0].start.seconds(), 2.25);
  EXPECT_DOUBLE_EQ(r.records[0].end.seconds(), 5.25);
  ASSERT_EQ(r.records[0].slices.size(), 2u);
  EXPECT_EQ(r.records[0].slices[0].node, 0);
  EXPECT_EQ(r.records[0].slices[1].node, 2);
  ASSERT_EQ(r.trained.size(), 2u);
  EXPECT_EQ(r.trained[0].outcome, TrainingRecord::Outcome::kKilled);
  EXPECT_DOUBLE_EQ(r.trained[0].end.seconds(), 2.25);
  EXPECT_EQ(r.trained[0].bytes_sent, 4 * M);
  EXPECT_EQ(r.trained[0].bytes_delivered, 0);
  EXPECT_EQ(r.trained[1].outcome, TrainingRecord::Outcome::kFinished);
  EXPECT_EQ(r.p.network.totals().bytes_delivered.count, 8 * M);
  EXPECT_EQ(r.p.network.totals().bytes_failed.count, 4 * M);
  EXPECT_EQ(r.p.network.totals().transfers_in_flight, 0u);
  EXPECT_EQ(r.mode->running(), 0u);
  EXPECT_EQ(out.metrics().at("detailed_jobs_killed"), 1);
  EXPECT_EQ(out.metrics().at("detailed_jobs_simulated"), 1);
  EXPECT_EQ(out.metrics().at("job_restarts"), 1);
  EXPECT_DOUBLE_EQ(out.metrics().at("lost_gpu_hours"), 3 * 2.25 / 3600);
}

// The same failure with on_failure "drop": the job is reported dropped, once, at 2.25 s.
TEST(DetailedFailures, ANodeFailureDropsTheJobUnderTheDropPolicy) {
  ClusterParams c = one_type(4, 2, Policy::kFcfs);
  c.requeue_on_failure = false;
  FailureRun r(two_leaves(), c, {job(0, 3, 2)});
  r.fail_node(1, 2.25);
  const Results out = r.run();
  ASSERT_EQ(r.records.size(), 1u);
  EXPECT_FALSE(r.records[0].finished);
  EXPECT_EQ(r.records[0].drop_reason, "its node failed");
  EXPECT_EQ(out.metrics().at("jobs_dropped"), 1);
  EXPECT_EQ(out.metrics().at("detailed_jobs_killed"), 1);
  EXPECT_EQ(r.p.network.totals().transfers_in_flight, 0u);
  EXPECT_EQ(r.mode->running(), 0u);
}

// Host 1's own link (not the node) goes down at 2.25 s, mid-step 1, and comes back at 4 s. The
// two transfers of step 1 both cross it (0 -> 1 arrives over it, 1 -> 0 leaves over it) and
// find no route: the ring's collective reports its first failed transfer, the strategy reports
// the job failed, and the runner frees it and tells the cluster (an event at 2.25 s). The
// cluster requeues it held: the pool still sees host 1 up, so without the hold it would place
// the job on hosts 0 and 1 again at once and fail again at the same instant. At 4 s the link
// change releases it; FCFS places it on hosts 0 and 1 again: 4 + 3 = 7 s.
TEST(DetailedFailures, AFailedTransferFailsTheJobWhichWaitsForTheLinksToChange) {
  FailureRun r(two_leaves(), one_type(4, 2, Policy::kFcfs), {job(0, 3, 2)});
  r.fail_host_link(1, 2.25, 1.75);
  const Results out = r.run();
  ASSERT_EQ(r.records.size(), 1u);
  EXPECT_TRUE(r.records[0].finished);
  EXPECT_EQ(r.records[0].restarts, 1);
  EXPECT_DOUBLE_EQ(r.records[0].start.seconds(), 4);
  EXPECT_DOUBLE_EQ(r.records[0].end.seconds(), 7);
  EXPECT_EQ(r.records[0].slices[1].node, 1);
  ASSERT_EQ(r.trained.size(), 2u);
  EXPECT_EQ(r.trained[0].outcome, TrainingRecord::Outcome::kFailed);
  EXPECT_DOUBLE_EQ(r.trained[0].end.seconds(), 2.25);
  EXPECT_EQ(out.metrics().at("detailed_jobs_failed"), 1);
  EXPECT_EQ(out.metrics().at("detailed_jobs_killed"), 0);
  EXPECT_DOUBLE_EQ(out.metrics().at("lost_gpu_hours"), 3 * 2.25 / 3600);
  EXPECT_EQ(r.p.network.totals().transfers_in_flight, 0u);
}

// Never repaired: the job stays held and the run ends with it unfinished (reported as such,
// never finished nor dropped).
TEST(DetailedFailures, AJobHeldForeverIsReportedUnfinished) {
  FailureRun r(two_leaves(), one_type(4, 2, Policy::kFcfs), {job(0, 3, 2)});
  r.fail_host_link(1, 2.25);
  const Results out = r.run();
  EXPECT_TRUE(r.records.empty());
  EXPECT_EQ(out.metrics().at("jobs_unfinished"), 1);
  EXPECT_EQ(r.sim->queued(), 1u);
  EXPECT_EQ(r.mode->running(), 0u);
}

// A collective whose transfer fails reports it once (sim_core/collectives), and only for a
// failure in the network, not for its own cancellation: the runner alone, job on hosts 0 and 2
// (across the spine), the spine fails at 2.25 s: no route between the leaves, `failed` runs
// once at 2.25 s and `done` never.
TEST(DetailedFailures, TheRunnerReportsAFailedCollectiveOnce) {
  test::PlatformBench p(two_leaves());
  LinkConditions links(p.topology, p.network);
  CommunicationParams params;
  params.models.push_back(model(p.topology, "fifo", "ring", {{1.0, 1.0, M}}));
  CommunicationMode mode(p.engine, p.network, p.compute, params, RandomStream(1, "test"));
  JobSpec job;
  job.work = Time::s(2);
  mode.admit(job);
  int failed = 0;
  double failed_at = -1;
  const std::vector<NodeId> hosts{0, 2};
  ASSERT_TRUE(mode.start(
      job, hosts, 0, [] { FAIL() << "cannot finish"; },
      [&](JobRunner::Failure why) {
        EXPECT_EQ(why, JobRunner::Failure::kNoRoute);
        ++failed;
        failed_at = p.engine.now().seconds();
      }));
  // The one spine: the switch linked to no host.
  std::optional<NodeId> spine;
  for (NodeId n = 0; n < p.topology.nodes().size(); ++n) {
    bool near_host = false;
    for (NodeId h : p.topology.hosts())
      near_host = near_host || h == n || !links_between(p.topology, n, h).empty();
    if (!near_host) spine = n;
  }
  ASSERT_TRUE(spine.has_value());
  p.engine.schedule_at(Time::from_seconds(2.25), [&] { links.set_node_up(*spine, false); });
  p.engine.run();
  EXPECT_EQ(failed, 1);
  EXPECT_DOUBLE_EQ(failed_at, 2.25);
  EXPECT_EQ(mode.running(), 0u);
  EXPECT_EQ(p.network.totals().transfers_in_flight, 0u);
  Results out;
  mode.report(out);
  EXPECT_EQ(out.metrics().at("detailed_jobs_failed"), 1);
}

// Random job streams under random failures of hosts, switches (leaves cut their hosts off,
// spines reroute) and host links, every one repaired, with both failure policies; data-parallel
// jobs and pipeline jobs (the even split, and stages and replicas chosen by the dp, pipedream and
// exact planners; ring, ps and tree within stages), and Megatron jobs on the execution graph and
// on the training core (megatron.core "training"):
//   - every job is reported exactly once: finished, or dropped with a reason (requeue: every
//     job that fits the pool finishes);
//   - every attempt the runner ended unfinished is counted once (killed or failed), and the
//     finished attempt of a job applied every update exactly once per iteration (a pipeline
//     worker its own stage's layers once per round) and delivered exactly what its strategy
//     implies (a pipeline: each stage's gradient per round among its replicas, and every
//     micro-batch's activation and gradient across every boundary);
//   - the network delivered exactly what the attempts' strategies delivered, has nothing in
//     flight, and no job is left running.
// A finished Megatron attempt's per-phase exposure (llm_training's definition, graph_report.hpp,
// docs/llm_training.md "Exposure, defined") adds up: every rank's compute and exposed time per
// phase (none to compute itself) make its time since the attempt started; so, per iteration,
// the critical rank's figures make the attempt's time (it ends with its last rank) and the
// per-rank means the ranks' mean time; none is negative.
namespace {
void expect_exposure_adds_up(const TrainingRecord& t) {
  ASSERT_EQ(t.ranks.size(), t.hosts.size());
  const auto iterations = static_cast<double>(t.iterations);
  Time last;
  double mean_span = 0;
  for (std::size_t k = 0; k < t.ranks.size(); ++k) {
    const workload::RankReport& rank = t.ranks[k];
    EXPECT_TRUE(rank.done) << k;
    EXPECT_EQ(rank.exposed_s[0], 0) << k;
    double sum = rank.compute_s;
    for (double e : rank.exposed_s) {
      EXPECT_GE(e, 0) << k;
      sum += e;
    }
    const double span = (rank.finished - t.start).seconds();
    EXPECT_NEAR(sum, span, 1e-9 * span) << "rank " << k;
    last = std::max(last, rank.finished);
    mean_span += span / static_cast<double>(t.ranks.size()) / iterations;
  }
  EXPECT_EQ(last, t.end);
  double mean = 0, critical = 0;
  for (const auto& [name, seconds] : t.exposure.figures) {
    EXPECT_GE(seconds, 0) << name;
    (name.rfind("critical_rank_", 0) == 0 ? critical : mean) += seconds;
  }
  EXPECT_EQ(t.exposure.figures.size(), 8u);
  const double iteration = (t.end - t.start).seconds() / iterations;
  EXPECT_NEAR(critical, iteration, 1e-9 * iteration);
  EXPECT_NEAR(mean, mean_span, 1e-9 * mean_span);
}
}  // namespace

TEST(DetailedFailures, EveryJobFinishesOrIsReportedOnceUnderRandomFailures) {
  std::mt19937_64 rng(11);
  auto integer = [&](std::int64_t a, std::int64_t b) {
    return std::uniform_int_distribution<std::int64_t>(a, b)(rng);
  };
  auto uniform = [&](double a, double b) { return std::uniform_real_distribution<>(a, b)(rng); };
  std::uint64_t killed_total = 0, failed_total = 0;
  std::size_t pipelines_finished = 0, replicated_stages = 0;
  std::size_t megatron_finished = 0, megatron_ended_unfinished = 0;
  std::size_t core_finished = 0, core_ended_unfinished = 0;  // of them, on the training core
  for (int trial = 0; trial < 12; ++trial) {
    SCOPED_TRACE(::testing::Message() << "trial " << trial);
    ClusterParams c = one_type(6, 2, trial % 2 ? Policy::kEasyBackfill : Policy::kFcfs);
    c.estimate_factor = 1.5;
    c.requeue_on_failure = trial % 3 != 2;
    if (trial % 4 == 1) c.racks = {0, 0, 0, 1, 1, 1};
    PoissonOptions o;
    o.jobs = 20;
    o.mean_interarrival = Time::s(0.3);
    o.mean_duration = Time::s(1.5);
    o.gpus = {1, 3, 4, 6, 13};
    auto models = [&](const Topology& topology) {
      std::vector<TrainingModel> out;
      for (const char* sync : {"ring", "ps"})
        for (const char* scheduler : {"fifo", "bytescheduler"}) {
          std::vector<std::tuple<double, double, std::int64_t>> layers;
          for (std::int64_t l = integer(1, 3); l > 0; --l)
            layers.emplace_back(uniform(0.01, 0.2), uniform(0.01, 0.2), integer(1, M));
          const training::SchedulerConfig config =
              std::string(scheduler) == "fifo"
                  ? training::SchedulerConfig{}
                  : training::SchedulerConfig{integer(1, M), integer(1, 3 * M)};
          out.push_back(model(topology, scheduler, sync, layers, config));
        }
      // Pipeline jobs: the even split, and planners choosing replicated stages.
      using Kind = training::PipelineSchedule::Kind;
      const std::vector<std::tuple<const char*, const char*, StagePlanner, std::size_t, Kind>>
          pipelines = {{"fifo", "ring", StagePlanner::kEven, 2, Kind::kOneFOneB},
                       {"fifo", "ps", StagePlanner::kDp, 0, Kind::kGPipe},
                       {"bytescheduler", "ring", StagePlanner::kPipeDream, 0, Kind::kOneFOneB},
                       {"fifo", "tree", StagePlanner::kExact, 0, Kind::kOneFOneB}};
      for (const auto& [scheduler, sync, planner, stages, kind] : pipelines) {
        std::vector<std::tuple<double, double, std::int64_t, std::int64_t>> layers;
        for (std::int64_t l = integer(2, 4); l > 0; --l)
          layers.emplace_back(uniform(0.01, 0.2), uniform(0.01, 0.2), integer(1, M),
                              integer(1, 400'000));
        const training::SchedulerConfig config =
            std::string(scheduler) == "fifo"
                ? training::SchedulerConfig{}
                : training::SchedulerConfig{integer(1, M), integer(1, 3 * M)};
        out.push_back(failures_pipeline_model(topology, scheduler, sync, layers, planner, stages,
                                              kind, static_cast<std::size_t>(integer(1, 2)),
                                              config));
      }
      // Megatron jobs of 4 (TP 1, PP 2, DP 2) and 6 GPUs (TP 2, PP 1, DP 3).
      out.push_back(megatron_test_model(1, 2, 2, static_cast<int>(integer(1, 3)),
                                        uniform(0.01, 0.1), uniform(0.01, 0.2),
                                        6 * integer(1, 300'000), integer(1, 200'000)));
      out.push_back(megatron_test_model(2, 1, 3, static_cast<int>(integer(1, 2)),
                                        uniform(0.01, 0.1), uniform(0.01, 0.2),
                                        6 * integer(1, 300'000), integer(1, 200'000)));
      // The same two on the training core (megatron.core "training").
      const std::size_t n = out.size();
      out.push_back(on_training_core(out[n - 2]));
      out.push_back(on_training_core(out[n - 1]));
      return out;
    };
    FailureRun r(build_topology(LeafSpineSpec{
                     2, 3, 2, 1.5, LinkSpec{Bandwidth{kHostBandwidth}, Time::us(5)}, Time::us(5)}),
                 c,
                 std::make_unique<PoissonJobSource>(
                     o, RandomStream(static_cast<std::uint64_t>(trial), "jobs")),
                 models, static_cast<std::uint64_t>(trial));
    set_megatron_test_hosts(r.p.hardware, r.p.topology, 2);
    const std::vector<NodeId> hosts = r.p.topology.hosts();
    std::vector<NodeId> switches;
    for (NodeId n = 0; n < r.p.topology.nodes().size(); ++n)
      if (std::find(hosts.begin(), hosts.end(), n) == hosts.end()) switches.push_back(n);
    for (int f = static_cast<int>(integer(3, 8)); f > 0; --f) {
      const double at = uniform(0, 12), repair = uniform(0.1, 3);
      switch (integer(0, 2)) {
        case 0:
          r.fail_node(hosts[static_cast<std::size_t>(integer(0, 5))], at, repair);
          break;
        case 1:
          r.fail_node(switches[static_cast<std::size_t>(
                          integer(0, static_cast<std::int64_t>(switches.size()) - 1))],
                      at, repair);
          break;
        default:
          r.fail_host_link(hosts[static_cast<std::size_t>(integer(0, 5))], at, repair);
      }
    }
    const Results out = r.run();
    ASSERT_EQ(r.records.size(), o.jobs);
    std::vector<int> seen(o.jobs, 0);
    for (const JobRecord& j : r.records) {
      ++seen[j.spec.id];
      if (j.spec.gpus > 12) {
        EXPECT_FALSE(j.finished);
      } else if (c.requeue_on_failure) {
        EXPECT_TRUE(j.finished) << j.drop_reason;
      }
      if (!j.finished) {
        EXPECT_FALSE(j.drop_reason.empty());
      }
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<long>(o.jobs));
    std::int64_t delivered = 0;
    std::uint64_t killed = 0, failed = 0;
    std::map<std::uint64_t, int> finished_attempts;
    std::size_t megatron_records = 0;
    for (const TrainingRecord& t : r.trained) {
      delivered += t.bytes_delivered + t.activation_bytes_delivered + t.graph_bytes_delivered;
      if (t.outcome == TrainingRecord::Outcome::kKilled) ++killed;
      if (t.outcome == TrainingRecord::Outcome::kFailed) ++failed;
      const bool on_core = r.params.models[static_cast<std::size_t>(t.model)].megatron &&
                           r.params.models[static_cast<std::size_t>(t.model)].megatron->core ==
                               llm_training::Core::kTraining;
      if (t.megatron && t.outcome != TrainingRecord::Outcome::kFinished) {
        ++megatron_ended_unfinished;
        core_ended_unfinished += on_core ? 1 : 0;
        EXPECT_FALSE(t.graph_done);
      }
      if (t.outcome != TrainingRecord::Outcome::kFinished) continue;
      ++finished_attempts[t.id];
      const TrainingModel& m = r.params.models[static_cast<std::size_t>(t.model)];
      if (t.megatron) {
        // A finished Megatron attempt: its whole graph, every message and collective its
        // layout implies, exactly their bytes through the network.
        ++megatron_finished;
        core_finished += on_core ? 1 : 0;
        ASSERT_NE(m.megatron, nullptr);
        // dp from the job's GPUs (tp on each host): MegatronModel::layout_for.
        const int job_gpus = std::accumulate(t.gpus.begin(), t.gpus.end(), 0);
        const llm_training::ParallelLayout l = m.megatron->layout_for(job_gpus);
        EXPECT_TRUE(t.graph_done);
        ASSERT_EQ(t.hosts.size(), static_cast<std::size_t>(l.pp * l.dp));
        const MegatronTestCounts per = megatron_test_counts(*m.megatron, job_gpus);
        EXPECT_EQ(t.graph_messages, per.messages * t.iterations);
        // On either core (the core counts the graph's TP and DP collectives since 2026-12-07).
        EXPECT_EQ(t.graph_collectives, per.collectives * t.iterations);
        EXPECT_EQ(t.graph_network_collectives, per.network * t.iterations);
        EXPECT_EQ(t.graph_bytes_delivered,
                  megatron_test_bytes_per_iteration(*m.megatron, job_gpus) *
                      static_cast<std::int64_t>(t.iterations));
        expect_exposure_adds_up(t);
        ++megatron_records;
        continue;
      }
      // Bytes a strategy moves per round among `n` workers (colocated servers for ps).
      const auto per_round = [&](std::int64_t n, std::int64_t bytes) {
        return n < 2 ? 0 : (m.sync == "ps" ? 2 * n : 2 * (n - 1)) * bytes;
      };
      const auto iterations = static_cast<std::int64_t>(t.iterations);
      if (t.stage_first_layer.empty()) {
        for (const auto& worker : t.updates)
          for (std::size_t u : worker) EXPECT_EQ(u, t.iterations);
        EXPECT_EQ(
            t.bytes_delivered,
            per_round(static_cast<std::int64_t>(t.hosts.size()), t.gradient_bytes) * iterations);
        continue;
      }
      // A pipeline attempt: every replica of stage s ran N / r_s micro-batches an iteration
      // (N = M x the replicas' least common multiple) and applied its own layers' update once
      // per backward (1F1B) or once per iteration (GPipe), the other layers' never; the stage's
      // strategy moved its gradient once per round among the replicas; the activations and
      // their gradients crossed every boundary once per micro-batch each way.
      ++pipelines_finished;
      const std::size_t stages = t.stage_first_layer.size() - 1;
      ASSERT_EQ(t.replicas.size(), stages);
      std::size_t lcm = 1, used = 0;
      for (std::size_t q : t.replicas) {
        lcm = std::lcm(lcm, q);
        used += q;
        replicated_stages += q > 1 ? 1 : 0;
      }
      ASSERT_EQ(t.hosts.size(), used);
      const std::size_t n = t.micro_batches * lcm;
      const double scale = static_cast<double>(used) / static_cast<double>(n);
      std::int64_t gradient = 0, activations = 0;
      std::size_t w = 0;
      for (std::size_t s = 0; s < stages; ++s) {
        const std::size_t rounds = t.gpipe ? 1 : n / t.replicas[s];
        std::int64_t stage_bytes = 0;
        for (std::size_t l = t.stage_first_layer[s]; l < t.stage_first_layer[s + 1]; ++l)
          stage_bytes += m.parameters[l] * m.bytes_per_parameter;
        gradient += per_round(static_cast<std::int64_t>(t.replicas[s]), stage_bytes) *
                    static_cast<std::int64_t>(rounds) * iterations;
        if (s + 1 < stages)
          activations +=
              2 * static_cast<std::int64_t>(n) * iterations *
              std::llround(static_cast<double>(m.activation_bytes[t.stage_first_layer[s + 1] - 1]) *
                           scale);
        for (std::size_t q = 0; q < t.replicas[s]; ++q, ++w)
          for (std::size_t l = 0; l < m.parameters.size(); ++l) {
            const bool own = l >= t.stage_first_layer[s] && l < t.stage_first_layer[s + 1];
            EXPECT_EQ(t.updates[w][l], own ? rounds * t.iterations : 0u);
          }
      }
      EXPECT_EQ(t.bytes_delivered, gradient);
      EXPECT_EQ(t.activation_bytes_delivered, activations);
    }
    // A job spanning hosts that finished did so in exactly one simulated attempt.
    for (const JobRecord& j : r.records)
      if (j.finished && j.slices.size() > 1) {
        EXPECT_EQ(finished_attempts[j.spec.id], 1) << "job " << j.spec.id;
      }
    for (const auto& [id, n] : finished_attempts) EXPECT_EQ(n, 1) << "job " << id;
    EXPECT_EQ(out.metrics().at("detailed_jobs_killed"), static_cast<double>(killed));
    EXPECT_EQ(out.metrics().at("detailed_jobs_failed"), static_cast<double>(failed));
    EXPECT_LE(static_cast<double>(killed + failed), out.metrics().at("job_restarts"));
    EXPECT_EQ(r.p.network.totals().bytes_delivered.count, delivered);
    EXPECT_EQ(r.p.network.totals().transfers_in_flight, 0u);
    EXPECT_EQ(r.mode->running(), 0u);
    // One exposure record per finished Megatron attempt (details.megatron_jobs).
    EXPECT_EQ(out.details().at("megatron_jobs").size(), megatron_records);
    killed_total += killed;
    failed_total += failed;
  }
  // The failures did hit simulated jobs, both ways (else the properties above say little), and
  // pipeline jobs, some with replicated stages, finished among them.
  EXPECT_GT(killed_total, 0u);
  EXPECT_GT(failed_total, 0u);
  EXPECT_GT(pipelines_finished, 0u);
  EXPECT_GT(replicated_stages, 0u);
  // Megatron jobs finished, and failures ended some of their attempts (killed or failed).
  EXPECT_GT(megatron_finished, 0u);
  EXPECT_GT(megatron_ended_unfinished, 0u);
  // Also on the training core.
  EXPECT_GT(core_finished, 0u);
  EXPECT_GT(core_ended_unfinished, 0u);
}
