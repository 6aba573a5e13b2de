// Megatron jobs in the cluster model's detailed mode (communication_mode.hpp: a model's
// `megatron`): each job's iteration graph runs on a workload::GraphExecutor on the hosts its
// placement gave it, its data-parallel collectives and pipeline messages through the run's one
// network. Cases by hand (two jobs sharing a leaf uplink), a cross-check against the
// llm_training model running the same configuration alone, the stall watchdog, kills, and the
// scenario keys' errors at their JSON paths.
#include <gtest/gtest.h>

#include <optional>

#include <tuple>

#include "models/cluster/cluster_model.hpp"
#include "models/cluster/communication_mode.hpp"
#include "models/cluster/register.hpp"
#include "models/llm_training/graph_report.hpp"
#include "models/llm_training/megatron_core_job.hpp"
#include "models/llm_training/register.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "tests/cluster/test_support.hpp"
#include "tests/support/platform_bench.hpp"
#include "tests/support/run_json.hpp"

using namespace mlsim;
using namespace mlsim::cluster;
using mlsim::cluster::testing::megatron_test_model;
using nlohmann::json;

namespace {

constexpr double kMegatronLink = 4e6;  // bytes/s per host link

// Two leaves of two hosts (one GPU each) under one spine at 2:1: each leaf's one uplink carries
// the hosts' own 4e6 B/s. Hosts 0, 1 on leaf 0; 2, 3 on leaf 1.
struct MegatronBench {
  explicit MegatronBench(double link = kMegatronLink, int gpus_per_host = 1)
      : p(build_topology(
            LeafSpineSpec{2, 2, 1, 2.0, LinkSpec{Bandwidth{link}, Time::zero()}, Time::zero()})),
        links(p.topology, p.network) {
    mlsim::cluster::testing::set_megatron_test_hosts(p.hardware, p.topology, gpus_per_host);
  }
  test::PlatformBench p;
  LinkConditions links;
};

struct Ended {
  double at = -1;
  int done = 0, failed = 0;
  JobRunner::Failure why = JobRunner::Failure::kNoRoute;
};

// Starts one job per placement at 0 (hosts of the leaf-spine by index, one GPU each) and runs.
std::vector<Ended> run_megatron(MegatronBench& b, CommunicationMode& mode,
                                const std::vector<std::vector<int>>& placements, int gpus_each,
                                std::optional<double> kill_at = std::nullopt) {
  std::vector<Ended> ends(placements.size());
  for (std::size_t j = 0; j < placements.size(); ++j) {
    JobSpec job;
    job.id = j;
    job.model = 0;
    job.gpus = static_cast<int>(placements[j].size()) * gpus_each;
    job.iterations = 1;
    mode.admit(job);
    EXPECT_EQ(job.gpus_per_node, gpus_each);
    std::vector<NodeId> hosts;
    for (int h : placements[j]) hosts.push_back(b.p.topology.hosts()[static_cast<std::size_t>(h)]);
    const std::vector<int> gpus(hosts.size(), gpus_each);
    Ended& e = ends[j];
    EXPECT_TRUE(mode.start(
        job, hosts, gpus, 0,
        [&e, &b] {
          ++e.done;
          e.at = b.p.engine.now().seconds();
        },
        [&e, &b](JobRunner::Failure why) {
          ++e.failed;
          e.why = why;
          e.at = b.p.engine.now().seconds();
        }));
  }
  if (kill_at) {
    b.p.engine.run_until(Time::from_seconds(*kill_at));
    for (std::size_t j = 0; j < placements.size(); ++j) mode.kill(j);
  }
  b.p.engine.run();
  EXPECT_EQ(mode.running(), 0u);
  EXPECT_EQ(b.p.network.totals().transfers_in_flight, 0u);
  EXPECT_EQ(b.p.compute.in_progress(), 0u);
  return ends;
}

TEST(MegatronJobs, TwoJobsSharingAnUplinkTakeTheHandWorkedTimes) {
  // TP 1, PP 1, DP 2, one micro-batch: forward 1 s, backward 2 s, then a ring all-reduce of
  // 4 MB over the job's two hosts: 2 (W - 1) = 2 steps of 4 MB / W = 2 MB from each host, at
  // 4e6 B/s 0.5 s each. Alone (or two jobs within one leaf each: {0, 1}, {2, 3}): 3 + 1 = 4 s.
  // On {0, 2} and {1, 3} both jobs' steps cross both leaf uplinks in the same direction at the
  // same time (identical jobs in lock-step): 2e6 B/s each, 1 s a step, 3 + 2 = 5 s. The
  // difference, 1 s, is the gradient over the shared uplink's bandwidth: 4e6 / 4e6.
  auto ends_of = [](const std::vector<std::vector<int>>& placements) {
    MegatronBench b;
    CommunicationParams params;
    params.models.push_back(megatron_test_model(1, 1, 2, 1, 1.0, 2.0, 4'000'000));
    CommunicationMode mode(b.p.engine, b.p.network, b.p.compute, params,
                           RandomStream(1, "test.models"));
    mode.set_links(&b.links);
    std::vector<TrainingRecord> records;
    mode.set_observer([&records](const TrainingRecord& r) { records.push_back(r); });
    const std::vector<Ended> ends = run_megatron(b, mode, placements, 1);
    std::vector<double> at;
    for (std::size_t j = 0; j < ends.size(); ++j) {
      EXPECT_EQ(ends[j].done, 1);
      EXPECT_EQ(ends[j].failed, 0);
      at.push_back(ends[j].at);
    }
    EXPECT_EQ(records.size(), placements.size());
    for (const TrainingRecord& r : records) {
      EXPECT_TRUE(r.megatron);
      EXPECT_TRUE(r.graph_done);
      EXPECT_EQ(r.outcome, TrainingRecord::Outcome::kFinished);
      EXPECT_EQ(r.graph_network_collectives, 1u);  // the DP all-reduce, nothing else crosses
      EXPECT_DOUBLE_EQ(r.compute_only_s, 3.0);
    }
    // The network carried each job's ring: 2 steps x 2 hosts x 2 MB.
    EXPECT_EQ(b.p.network.totals().bytes_delivered.count,
              static_cast<std::int64_t>(placements.size()) * 8'000'000);
    Results out;
    mode.report(out);
    EXPECT_EQ(out.metrics().at("detailed_megatron_jobs"), static_cast<double>(placements.size()));
    return at;
  };
  EXPECT_EQ(ends_of({{0, 2}}), (std::vector<double>{4.0}));
  EXPECT_EQ(ends_of({{0, 1}, {2, 3}}), (std::vector<double>{4.0, 4.0}));
  EXPECT_EQ(ends_of({{0, 2}, {1, 3}}), (std::vector<double>{5.0, 5.0}));
}

TEST(MegatronJobs, AStalledJobIsReportedFailedAsStalledAndAKilledOneEndsSilently) {
  // The same job on links of 1 B/s: its 2 MB ring steps would take 2e6 s. Compute ends at 3 s;
  // nothing finishes afterwards, so a 10 s stall timeout ends it at 13 s as stalled, its
  // transfers cancelled.
  {
    MegatronBench b(1.0);
    CommunicationParams params;
    params.models.push_back(megatron_test_model(1, 1, 2, 1, 1.0, 2.0, 4'000'000));
    params.stall_timeout = Time::s(10);
    CommunicationMode mode(b.p.engine, b.p.network, b.p.compute, params,
                           RandomStream(1, "test.models"));
    mode.set_links(&b.links);
    const std::vector<Ended> ends = run_megatron(b, mode, {{0, 2}}, 1);
    EXPECT_EQ(ends[0].done, 0);
    ASSERT_EQ(ends[0].failed, 1);
    EXPECT_EQ(ends[0].why, JobRunner::Failure::kStalled);
    EXPECT_DOUBLE_EQ(ends[0].at, 13.0);
    Results out;
    mode.report(out);
    EXPECT_EQ(out.metrics().at("detailed_jobs_stalled"), 1);
    EXPECT_EQ(out.metrics().at("detailed_jobs_failed"), 1);
    EXPECT_EQ(out.details().at("stalled_jobs").size(), 1u);
  }
  // Killed at 3.25 s (its all-reduce in flight): neither callback runs, nothing is left.
  {
    MegatronBench b;
    CommunicationParams params;
    params.models.push_back(megatron_test_model(1, 1, 2, 1, 1.0, 2.0, 4'000'000));
    CommunicationMode mode(b.p.engine, b.p.network, b.p.compute, params,
                           RandomStream(1, "test.models"));
    mode.set_links(&b.links);
    const std::vector<Ended> ends = run_megatron(b, mode, {{0, 2}}, 1, 3.25);
    EXPECT_EQ(ends[0].done + ends[0].failed, 0);
    EXPECT_EQ(b.p.network.totals().transfers_failed, 2u);  // the first ring step's two transfers
  }
  // A host link cut under the all-reduce: its transfer finds no route and the job fails once.
  {
    MegatronBench b;
    CommunicationParams params;
    params.models.push_back(megatron_test_model(1, 1, 2, 1, 1.0, 2.0, 4'000'000));
    CommunicationMode mode(b.p.engine, b.p.network, b.p.compute, params,
                           RandomStream(1, "test.models"));
    mode.set_links(&b.links);
    const NodeId host2 = b.p.topology.hosts()[2];
    b.p.engine.schedule_at(Time::from_seconds(3.25), [&b, host2] {
      for (LinkId l = 0; l < b.p.topology.links().size(); ++l)
        if (b.p.topology.link(l).src == host2 || b.p.topology.link(l).dst == host2)
          b.links.set_link_up(l, false);
    });
    const std::vector<Ended> ends = run_megatron(b, mode, {{0, 2}}, 1);
    EXPECT_EQ(ends[0].done, 0);
    ASSERT_EQ(ends[0].failed, 1);
    EXPECT_EQ(ends[0].why, JobRunner::Failure::kNoRoute);
    EXPECT_DOUBLE_EQ(ends[0].at, 3.25);
  }
}

TEST(MegatronJobs, TheWorkEstimateCountsTheirGraphNodesAndSkipsJobsNoModelFits) {
  // Only a Megatron model of 4 GPUs (TP 1, PP 2, DP 2; its iteration 2 x 3 s of compute): a
  // 4-GPU job of 12 s runs 2 iterations of its graph; a 3-GPU job spanning hosts (not a whole
  // number of 2-GPU replicas) has no model (timed as in the job-level mode) and adds nothing,
  // rather than an unbounded term.
  ModelParams p;
  auto comm = std::make_shared<CommunicationParams>();
  comm->models.push_back(megatron_test_model(1, 2, 2, 2, 1.0, 2.0, 6'000, 1'000));
  const double nodes = comm->models[0].megatron->nodes_per_iteration(4);
  // Per rank and iteration: 2 forwards, 2 backwards, 4 message ends (stage 0 sends 2
  // activations and receives 2 gradients, stage 1 the reverse), 1 DP all-reduce; 4 ranks.
  EXPECT_EQ(nodes, 4 * 9);
  p.communication = comm;
  p.make_source = [](std::uint64_t) {
    return mlsim::cluster::testing::list_source(
        {mlsim::cluster::testing::job(0, 4, 12), mlsim::cluster::testing::job(0, 3, 5)});
  };
  WorkEstimate estimate;
  estimate_work(p, 1, 4, estimate);
  EXPECT_EQ(estimate.total_events(), 2 * nodes);
  EXPECT_EQ(estimate.total_transfers(), 0);
}

// ---- Through the whole loader and runner: the llm_training model as the reference ----------

json small_gpt() {
  return json::parse(R"({"name": "test GPT", "architecture": "gpt", "layers": 4, "hidden": 512,
                         "heads": 8, "ffn": 2048, "vocab": 4096, "sequence": 256})");
}

// Two leaves of two hosts of 2 A100s (NVSwitch), 2 spines, 100 Gbps links.
json megatron_platform(json doc) {
  doc["include"] = {"../hardware/gpus.json"};
  doc["seed"] = 1;
  doc["topology"] = json::parse(R"({"kind": "leaf_spine", "leaves": 2, "hosts_per_leaf": 2,
      "spines": 2, "oversubscription": 1, "host_link": {"bandwidth": "100Gbps", "latency": "1us"},
      "uplink_latency": "1us", "hardware": {"gpu": "A100-SXM4-80GB", "gpus_per_host": 2}})");
  doc["compute"] = json::parse(
      R"({"providers": ["roofline"], "roofline": "../hardware/roofline_calibration.json"})");
  doc["network"] = {{"backend", "flow"}};
  doc["run"] = {{"time_limit", "none"}};
  return doc;
}

json megatron_cluster(const json& megatron, const json& jobs) {
  json doc = megatron_platform({{"name", "megatron_cluster"}});
  doc["system"] = {{"model", "cluster"},
                   {"detail", "communication"},
                   {"policy", "fcfs"},
                   {"reference_gpu", "A100-SXM4-80GB"}};
  doc["workload"]["jobs"] = {{"source", "list"}, {"list", jobs}};
  doc["workload"]["training"]["models"] = json::array({{{"name", "gpt"}, {"megatron", megatron}}});
  return doc;
}

// The llm_training model alone on `platform`: `layout` (and `dp`, when given) of small_gpt(),
// communication through the network, two iterations.
json megatron_alone(json platform, const json& layout, std::optional<int> dp = std::nullopt) {
  platform["system"] = layout;
  if (dp) platform["system"]["dp"] = *dp;
  platform["system"]["model"] = "llm_training";
  platform["system"]["communication"] = "network";
  platform["system"]["iterations"] = 2;
  platform["workload"]["model"] = small_gpt();
  return platform;
}

Registries both_models() {
  return test::registries_with([](ModelRegistry& r) {
    register_cluster(r);
    register_llm_training(r);
  });
}

TEST(MegatronJobs, AloneItTakesTheLlmTrainingModelsIterationTime) {
  // TP 2 (a host), PP 2, DP 2 on the four hosts, 4 micro-batches of one sequence, 2
  // iterations; the cluster places the job on hosts 0-3 in order (every host equally free), as
  // llm_training places GPU g on host g / 2. Same topology, backend, kernels and collectives:
  // the same times to the nanosecond (the cluster job starts at 0 with no start-up). On the
  // graph, and on the default core (the training core) of both models.
  for (const char* core : {"graph", "auto"}) {
    SCOPED_TRACE(core);
    json layout = json::parse(
        R"({"tp": 2, "pp": 2, "dp": 2, "micro_batch": 1, "global_batch": 8, "recompute": true})");
    layout["core"] = core;
    json mg = layout;
    mg["model"] = small_gpt();
    const Registries r = both_models();
    const RunOutput cluster = test::run_json(
        megatron_cluster(
            mg,
            json::array({{{"submit", "0s"}, {"gpus", 8}, {"model", "gpt"}, {"iterations", 2}}})),
        r);
    const json llm = megatron_alone(megatron_platform({{"name", "megatron_alone"}}), layout);
    const RunOutput alone = test::run_json(llm, r);
    const auto& c = cluster.results.metrics();
    const auto& a = alone.results.metrics();
    ASSERT_EQ(a.at("completed"), 1);
    ASSERT_EQ(c.at("jobs_finished"), 1);
    EXPECT_EQ(c.at("detailed_megatron_jobs"), 1);
    const double iteration = a.at("iteration_time_s");
    EXPECT_GT(iteration, 0);
    EXPECT_NEAR(c.at("makespan_s") / 2, iteration, 1e-9 * iteration);
    // Its DP all-reduces and PP messages crossed the network, as llm_training's did.
    EXPECT_EQ(c.at("megatron_network_collectives"), a.at("network_collectives"));
    EXPECT_GT(a.at("network_collectives"), 0);

    // On two hosts' worth of GPUs less bandwidth (25 Gbps) both slow down alike.
    json slow_cluster = megatron_cluster(
        mg, json::array({{{"submit", "0s"}, {"gpus", 8}, {"model", "gpt"}, {"iterations", 2}}}));
    slow_cluster["topology"]["host_link"]["bandwidth"] = "25Gbps";
    json slow_llm = llm;
    slow_llm["topology"]["host_link"]["bandwidth"] = "25Gbps";
    const double slow = test::run_json(slow_llm, r).results.metrics().at("iteration_time_s");
    EXPECT_GT(slow, iteration);
    EXPECT_NEAR(test::run_json(slow_cluster, r).results.metrics().at("makespan_s") / 2, slow,
                1e-9 * slow);
    EXPECT_EQ(alone.results.details().at("core"),
              std::string(core) == "graph" ? "graph" : "training");
  }
}

TEST(MegatronJobs, AJobOfAnotherSizeRescalesDpAndKeepsTheGlobalBatch) {
  // TP 2, PP 2, configured DP 2, micro-batches of 1 sequence, global batch 16 (Megatron-LM's
  // --global-batch-size; num micro-batches = global / (micro_batch x dp)). A job of g GPUs runs
  // dp = g / 4: g = 8 gives dp 2 and 16 / 2 = 8 micro-batches a replica; 16 gives dp 4 and 4;
  // 4 gives dp 1 and 16; 64 gives dp 16 and 1. 6 is not whole replicas; 12 (dp 3) and 128
  // (dp 32) do not split 16 sequences.
  auto mg = std::make_shared<MegatronModel>();
  mg->params.layout.tp = 2;
  mg->params.layout.pp = 2;
  mg->params.layout.dp = 2;
  mg->params.micro_batch = 1;
  mg->params.global_batch = 16;
  for (const auto& [g, dp, m] :
       std::vector<std::tuple<int, int, int>>{{8, 2, 8}, {16, 4, 4}, {4, 1, 16}, {64, 16, 1}}) {
    SCOPED_TRACE(g);
    EXPECT_EQ(mg->misfit(g), "");
    EXPECT_EQ(mg->layout_for(g).dp, dp);
    EXPECT_EQ(mg->layout_for(g).micro_batches, m);
    EXPECT_EQ(mg->layout_for(g).tp, 2);
    EXPECT_EQ(mg->layout_for(g).pp, 2);
  }
  for (int g : {2, 6, 10}) EXPECT_NE(mg->misfit(g).find("not a whole number"), std::string::npos);
  for (int g : {12, 128}) EXPECT_NE(mg->misfit(g).find("does not split"), std::string::npos);
  // Micro-batches of 2 sequences: 16 GPUs (dp 4) take 16 / 8 = 2; 32 (dp 8) take 1; 64 (dp 16)
  // would need 32 sequences.
  mg->params.micro_batch = 2;
  EXPECT_EQ(mg->layout_for(16).micro_batches, 2);
  EXPECT_EQ(mg->layout_for(32).micro_batches, 1);
  EXPECT_NE(mg->misfit(64).find("does not split"), std::string::npos);
}

TEST(MegatronJobs, TraceJobsOfOtherSizesDrawItWithTheirOwnDpAndIterations) {
  // TP 1, PP 1, configured DP 2 with 2 micro-batches: global batch 4 (test_support). Forward
  // 1 s, backward 2 s a micro-batch; 4 MB of gradients. Trace jobs of 12 s (work on the
  // reference GPU) naming no model:
  //  - 2 GPUs: dp 2, M 2, 6 s of compute an iteration: 12 / 6 = 2 iterations;
  //  - 4 GPUs: dp 4, M 1, 3 s: 4 iterations;
  //  - 3 GPUs: whole replicas (tp pp = 1), but dp 3 does not split 4 sequences: no model,
  //    timed as in the job-level mode (model stays -1).
  MegatronBench b;
  CommunicationParams params;
  params.models.push_back(megatron_test_model(1, 1, 2, 2, 1.0, 2.0, 4'000'000));
  CommunicationMode mode(b.p.engine, b.p.network, b.p.compute, params,
                         RandomStream(1, "test.models"));
  mode.set_links(&b.links);
  auto admitted = [&](int gpus) {
    JobSpec job = mlsim::cluster::testing::job(0, gpus, 12);
    mode.admit(job);
    return job;
  };
  const JobSpec two = admitted(2), four = admitted(4), three = admitted(3);
  EXPECT_EQ(two.model, 0);
  EXPECT_EQ(two.iterations, 2u);
  EXPECT_EQ(four.model, 0);
  EXPECT_EQ(four.iterations, 4u);
  EXPECT_EQ(four.gpus_per_node, 1);
  EXPECT_EQ(three.model, -1);
  // The 4-GPU job, one iteration, on the four hosts {0, 1, 2, 3}: 1 micro-batch, 3 s of
  // compute, then the ring all-reduce of 4 MB over 4 hosts: 2 (4 - 1) = 6 steps of 1 MB from
  // each host; the ring 0 -> 1 -> 2 -> 3 -> 0 sends one flow over each leaf's uplink (1 -> 2,
  // 3 -> 0) and one over each host link each way, 4e6 B/s each: 0.25 s a step, 1.5 s. 4.5 s in
  // all; the network delivers 6 x 4 x 1 MB = 24 MB.
  JobSpec job = four;
  job.id = 7;
  job.iterations = 1;
  std::vector<NodeId> hosts(b.p.topology.hosts().begin(), b.p.topology.hosts().end());
  const std::vector<int> gpus(4, 1);
  double ended = -1;
  std::vector<TrainingRecord> records;
  mode.set_observer([&records](const TrainingRecord& r) { records.push_back(r); });
  ASSERT_TRUE(mode.start(
      job, hosts, gpus, 0, [&] { ended = b.p.engine.now().seconds(); },
      [](JobRunner::Failure) { ADD_FAILURE() << "failed"; }));
  b.p.engine.run();
  EXPECT_NEAR(ended, 4.5, 1e-9);
  EXPECT_EQ(b.p.network.totals().bytes_delivered.count, 24'000'000);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_DOUBLE_EQ(records[0].compute_only_s, 3.0);
  EXPECT_EQ(records[0].graph_network_collectives, 1u);
}

TEST(MegatronJobs, OnAnotherSizeAloneItTakesTheLlmTrainingModelsIterationTimeAtThatDp) {
  // The model of AloneItTakesTheLlmTrainingModelsIterationTime (TP 2, PP 2, configured DP 2)
  // with a global batch of 16 sequences, on two leaves of four 2-A100 hosts. A job of 8 GPUs
  // runs dp 2 with 16 / 2 = 8 micro-batches a replica, one of 16 GPUs dp 4 with 4: each the
  // llm_training model's iteration at that dp and global batch (its reader derives the same
  // micro-batches), on the same hosts (the cluster places every host equally free in order).
  const json layout = json::parse(
      R"({"tp": 2, "pp": 2, "dp": 2, "micro_batch": 1, "global_batch": 16, "recompute": true})");
  json mg = layout;
  mg["model"] = small_gpt();
  const Registries r = both_models();
  auto eight_hosts = [](json doc) {
    doc["topology"]["hosts_per_leaf"] = 4;
    return doc;
  };
  for (const int g : {8, 16}) {
    SCOPED_TRACE(g);
    const RunOutput cluster = test::run_json(
        eight_hosts(megatron_cluster(
            mg,
            json::array({{{"submit", "0s"}, {"gpus", g}, {"model", "gpt"}, {"iterations", 2}}}))),
        r);
    const json llm =
        megatron_alone(eight_hosts(megatron_platform({{"name", "megatron_alone"}})), layout, g / 4);
    const RunOutput alone = test::run_json(llm, r);
    const auto& c = cluster.results.metrics();
    const auto& a = alone.results.metrics();
    ASSERT_EQ(c.at("jobs_finished"), 1);
    EXPECT_EQ(c.at("detailed_megatron_jobs"), 1);
    const double iteration = a.at("iteration_time_s");
    EXPECT_GT(iteration, 0);
    EXPECT_NEAR(c.at("makespan_s") / 2, iteration, 1e-9 * iteration);
    EXPECT_EQ(c.at("megatron_network_collectives"), a.at("network_collectives"));
    // llm_training's own count of micro-batches: 16 / (1 x dp).
    EXPECT_EQ(alone.results.details().at("layout").at("micro_batches_per_pipeline"), 64 / g);
  }
}

#ifdef MLSIM_HAVE_CHAKRA
TEST(MegatronJobs, AChakraTraceJobTakesTheHandDerivedTimePerIteration) {
  // The shipped example trace (workloads/traces/chakra_example: 2 stages x 2 replicas, one
  // micro-batch; 4.6 ms an iteration by hand on 4 one-GPU hosts of a star at 1 GB/s,
  // ChakraTrace.ShippedExampleTraceTakesTheHandDerivedTime) as a cluster job of 4 GPUs, one rank
  // a host, 2 iterations: the trace runs twice, 9.2 ms, as the chakra_trace model's 4.6 ms x 2.
  json doc;
  doc["name"] = "chakra_cluster";
  doc["include"] = {"../hardware/gpus.json"};
  doc["seed"] = 1;
  doc["topology"] = json::parse(R"({"kind": "star", "hosts": 4,
      "link": {"bandwidth": "8Gbps", "latency": "0s"},
      "hardware": {"gpu": "V100-SXM2-32GB", "gpus_per_host": 1}})");
  doc["network"] = {{"backend", "flow"}};
  doc["run"] = {{"time_limit", "none"}};
  doc["system"] = {{"model", "cluster"},
                   {"detail", "communication"},
                   {"policy", "fcfs"},
                   {"reference_gpu", "V100-SXM2-32GB"}};
  doc["workload"]["jobs"] = json::parse(R"({"source": "list", "list": [
      {"submit": "0s", "gpus": 4, "model": "trace", "iterations": 2}]})");
  doc["workload"]["training"]["models"] = json::parse(R"([{"name": "trace", "chakra": {
      "trace": "../traces/chakra_example/trace", "ranks": 4,
      "comm_groups": "../traces/chakra_example/groups.json"}}])");
  const Registries r = both_models();
  const RunOutput out = test::run_json(doc, r);
  const auto& m = out.results.metrics();
  EXPECT_EQ(m.at("jobs_finished"), 1);
  EXPECT_EQ(m.at("detailed_chakra_jobs"), 1);
  EXPECT_NEAR(m.at("makespan_s"), 2 * 4600e-6, 1e-12);
  // Per iteration 4 messages and 2 two-rank all-reduces, all between hosts.
  EXPECT_EQ(m.at("megatron_network_collectives"), 2 * 6);
  // Keys at their paths: the job's GPUs must be the trace's ranks; no communication mode.
  json bad = doc;
  bad["workload"]["jobs"]["list"][0]["gpus"] = 3;
  EXPECT_NE(test::prepare_error(bad, r).find("workload.jobs.list[0].gpus: model 'trace' is a "
                                             "Chakra trace of 4 ranks"),
            std::string::npos);
  bad = doc;
  bad["workload"]["training"]["models"][0]["chakra"]["communication"] = "closed_form";
  EXPECT_NE(test::prepare_error(bad, r).find("workload.training.models[0].chakra.communication"),
            std::string::npos);
  bad = doc;
  bad["workload"]["training"]["models"][0]["chakra"]["trace"] = "../traces/chakra_example/none";
  EXPECT_NE(test::prepare_error(bad, r).find("workload.training.models[0].chakra.trace"),
            std::string::npos);
}
#endif

TEST(MegatronJobs, ScenarioKeysAreCheckedAtTheirPaths) {
  json mg = json::parse(R"({"tp": 2, "pp": 2, "dp": 2, "micro_batch": 1, "global_batch": 8})");
  mg["model"] = small_gpt();
  const json one_job =
      json::array({{{"submit", "0s"}, {"gpus", 8}, {"model", "gpt"}, {"iterations", 1}}});
  const Registries r = both_models();
  auto error = [&](const json& doc) { return test::prepare_error(doc, r); };
  EXPECT_EQ(error(megatron_cluster(mg, one_job)), "no error");
  auto with = [&](const std::string& key, const json& value) {
    json m = mg;
    m[key] = value;
    return megatron_cluster(m, one_job);
  };
  auto expect = [&](const json& doc, const std::string& path, const std::string& words) {
    const std::string e = error(doc);
    EXPECT_NE(e.find(path), std::string::npos) << e;
    EXPECT_NE(e.find(words), std::string::npos) << e;
  };
  const std::string at = "workload.training.models[0].megatron";
  expect(with("bogus", 1), at, "bogus");
  expect(with("communication", "closed_form"), at + ".communication", "network");
  expect(with("iterations", 3), at + ".iterations", "iterations");
  expect(with("tp", 3), at + ".tp", "divide");
  expect(with("tp", 4), at + ".tp", "no host has 4 GPUs");
  expect(with("pp", 3), at + ".pp", "stages");
  expect(with("global_batch", 7), at + ".global_batch", "micro-batches");
  expect(with("dp_sync", "bogus"), at + ".dp_sync", "bogus");
  {
    json m = mg;
    m["model"]["heads"] = 7;
    expect(megatron_cluster(m, one_job), at + ".model.heads", "heads");
  }
  {  // A profiled model's keys beside megatron are unknown keys.
    json doc = megatron_cluster(mg, one_job);
    doc["workload"]["training"]["models"][0]["sync"] = "ring";
    expect(doc, "workload.training.models[0]", "sync");
  }
  const std::string job = "workload.jobs.list[0]";
  // Another size runs dp = gpus / (tp pp) with the global batch kept: 4 GPUs (dp 1, 8
  // micro-batches) and 16 (dp 4, 2) are fine; 6 is not whole replicas of 4 GPUs, and 12
  // (dp 3) does not split 8 sequences.
  auto of_gpus = [&](int gpus) {
    return megatron_cluster(
        mg, json::array({{{"submit", "0s"}, {"gpus", gpus}, {"model", "gpt"}, {"iterations", 1}}}));
  };
  EXPECT_EQ(error(of_gpus(4)), "no error");
  EXPECT_EQ(error(of_gpus(16)), "no error");
  expect(of_gpus(6), job + ".gpus", "tp x pp = 4 GPUs a replica: 6 GPUs");
  expect(of_gpus(12), job + ".gpus", "global batch of 8 sequences does not split");
  expect(megatron_cluster(mg, json::array({{{"submit", "0s"},
                                            {"gpus", 8},
                                            {"model", "gpt"},
                                            {"iterations", 1},
                                            {"stages", 2}}})),
         job + ".stages", "megatron.pp");
  {  // Operators no provider prices (the default compute section has no roofline).
    json doc = megatron_cluster(mg, one_job);
    doc.erase("compute");
    expect(doc, "compute", "");
  }
}

// ---- On the training core (megatron.core "training": MegatronCoreJob) --------------------

// The hand-worked cases of TwoJobsSharingAnUplinkTakeTheHandWorkedTimes and
// AStalledJobIsReportedFailedAsStalledAndAKilledOneEndsSilently with the model's jobs on the
// training core: the same times (4 s alone or within a leaf, 5 s sharing both uplinks: 3 s of
// compute, then 2 ring steps of 2 MB at 4e6 B/s or half of it), the same bytes, the same one
// network collective (the DP all-reduce), the same 3 s of compute; a job on 1 B/s links stalled
// at 3 + 10 s, one killed at 3.25 s ending silently with its ring's two transfers cancelled, one
// whose host link is cut at 3.25 s failed once then, for want of a route.
TEST(MegatronJobs, OnTheTrainingCoreTheHandWorkedCasesTakeTheSameTimes) {
  const TrainingModel model = mlsim::cluster::testing::on_training_core(
      megatron_test_model(1, 1, 2, 1, 1.0, 2.0, 4'000'000));
  ASSERT_EQ(model.megatron->core, llm_training::Core::kTraining);
  auto ends_of = [&](const std::vector<std::vector<int>>& placements) {
    MegatronBench b;
    CommunicationParams params;
    params.models.push_back(model);
    CommunicationMode mode(b.p.engine, b.p.network, b.p.compute, params,
                           RandomStream(1, "test.models"));
    mode.set_links(&b.links);
    std::vector<TrainingRecord> records;
    mode.set_observer([&records](const TrainingRecord& r) { records.push_back(r); });
    const std::vector<Ended> ends = run_megatron(b, mode, placements, 1);
    std::vector<double> at;
    for (const Ended& e : ends) {
      EXPECT_EQ(e.done, 1);
      EXPECT_EQ(e.failed, 0);
      at.push_back(e.at);
    }
    EXPECT_EQ(records.size(), placements.size());
    for (const TrainingRecord& r : records) {
      EXPECT_TRUE(r.megatron);
      EXPECT_TRUE(r.graph_done);
      EXPECT_EQ(r.graph_network_collectives, 1u);
      EXPECT_EQ(r.graph_messages, 0u);
      EXPECT_EQ(r.graph_bytes_delivered, 8'000'000);
      EXPECT_DOUBLE_EQ(r.compute_only_s, 3.0);
    }
    EXPECT_EQ(b.p.network.totals().bytes_delivered.count,
              static_cast<std::int64_t>(placements.size()) * 8'000'000);
    Results out;
    mode.report(out);
    EXPECT_EQ(out.metrics().at("detailed_megatron_jobs"), static_cast<double>(placements.size()));
    EXPECT_EQ(out.metrics().at("megatron_bytes_delivered"),
              static_cast<double>(placements.size()) * 8e6);
    return at;
  };
  EXPECT_EQ(ends_of({{0, 2}}), (std::vector<double>{4.0}));
  EXPECT_EQ(ends_of({{0, 1}, {2, 3}}), (std::vector<double>{4.0, 4.0}));
  EXPECT_EQ(ends_of({{0, 2}, {1, 3}}), (std::vector<double>{5.0, 5.0}));

  {  // Stalled.
    MegatronBench b(1.0);
    CommunicationParams params;
    params.models.push_back(model);
    params.stall_timeout = Time::s(10);
    CommunicationMode mode(b.p.engine, b.p.network, b.p.compute, params,
                           RandomStream(1, "test.models"));
    mode.set_links(&b.links);
    const std::vector<Ended> ends = run_megatron(b, mode, {{0, 2}}, 1);
    EXPECT_EQ(ends[0].done, 0);
    ASSERT_EQ(ends[0].failed, 1);
    EXPECT_EQ(ends[0].why, JobRunner::Failure::kStalled);
    EXPECT_DOUBLE_EQ(ends[0].at, 13.0);
    Results out;
    mode.report(out);
    EXPECT_EQ(out.metrics().at("detailed_jobs_stalled"), 1);
    ASSERT_EQ(out.details().at("stalled_jobs").size(), 1u);
    EXPECT_EQ(out.details().at("stalled_jobs")[0].at("core"), "training");
  }
  {  // Killed.
    MegatronBench b;
    CommunicationParams params;
    params.models.push_back(model);
    CommunicationMode mode(b.p.engine, b.p.network, b.p.compute, params,
                           RandomStream(1, "test.models"));
    mode.set_links(&b.links);
    const std::vector<Ended> ends = run_megatron(b, mode, {{0, 2}}, 1, 3.25);
    EXPECT_EQ(ends[0].done + ends[0].failed, 0);
    EXPECT_EQ(b.p.network.totals().transfers_failed, 2u);
  }
  {  // No route.
    MegatronBench b;
    CommunicationParams params;
    params.models.push_back(model);
    CommunicationMode mode(b.p.engine, b.p.network, b.p.compute, params,
                           RandomStream(1, "test.models"));
    mode.set_links(&b.links);
    const NodeId host2 = b.p.topology.hosts()[2];
    b.p.engine.schedule_at(Time::from_seconds(3.25), [&b, host2] {
      for (LinkId l = 0; l < b.p.topology.links().size(); ++l)
        if (b.p.topology.link(l).src == host2 || b.p.topology.link(l).dst == host2)
          b.links.set_link_up(l, false);
    });
    const std::vector<Ended> ends = run_megatron(b, mode, {{0, 2}}, 1);
    EXPECT_EQ(ends[0].done, 0);
    ASSERT_EQ(ends[0].failed, 1);
    EXPECT_EQ(ends[0].why, JobRunner::Failure::kNoRoute);
    EXPECT_DOUBLE_EQ(ends[0].at, 3.25);
  }
}

// Through the loader: one Megatron job alone (the model of AloneItTakesTheLlmTrainingModels-
// IterationTime: TP 2, PP 2, DP 2, 4 micro-batches, recomputation, roofline-priced small GPT, 2
// iterations) on the leaf-spine with one spine (no ECMP choice: docs/training.md, "ECMP
// labels"), by the all-reduce and by the distributed optimizer. On the training core the job
// takes the graph's time (to the nanosecond: both cores' iteration is the same sum of the same
// durations, tests/llm_training/core_cross_check_test.cpp) and moves the same bytes through the
// same number of network collectives.
TEST(MegatronJobs, OnTheTrainingCoreAJobAloneTakesTheGraphsTime) {
  const Registries r = both_models();
  for (const bool collapse : {true, false})
    for (const char* sync : {"all_reduce", "reduce_scatter_all_gather"}) {
      SCOPED_TRACE(std::string(sync) + (collapse ? " collapsed" : " not collapsed"));
      // `core` empty: the default ("auto"), which takes the training core here.
      auto run = [&](const std::string& core) {
        json mg = json::parse(R"({"tp": 2, "pp": 2, "dp": 2, "micro_batch": 1, "global_batch": 8,
                                  "recompute": true})");
        mg["model"] = small_gpt();
        mg["dp_sync"] = sync;
        mg["collapse_tensor_parallel"] = collapse;
        if (!core.empty()) mg["core"] = core;
        json doc = megatron_cluster(
            mg,
            json::array({{{"submit", "0s"}, {"gpus", 8}, {"model", "gpt"}, {"iterations", 2}}}));
        doc["topology"]["spines"] = 1;
        return test::run_json(doc, r).results;
      };
      const Results graph_run = run("graph"), core_run = run("training"), auto_run = run("");
      const auto &graph = graph_run.metrics(), &core = core_run.metrics();
      ASSERT_EQ(core.at("jobs_finished"), 1);
      EXPECT_EQ(core.at("detailed_megatron_jobs"), 1);
      EXPECT_GT(graph.at("makespan_s"), 0);
      EXPECT_EQ(core.at("makespan_s"), graph.at("makespan_s"));
      EXPECT_EQ(core.at("megatron_bytes_delivered"), graph.at("megatron_bytes_delivered"));
      EXPECT_EQ(core.at("megatron_network_collectives"), graph.at("megatron_network_collectives"));
      // Its compute: the busiest worker's kernels, each rounded to the nanosecond as run.
      EXPECT_NEAR(core.at("communication_slowdown_mean"), graph.at("communication_slowdown_mean"),
                  1e-9);
      // Which core ran, per model and per job; the default took the core and gave its figures.
      EXPECT_EQ(graph_run.details().at("training_models")[0].at("core"), "graph");
      EXPECT_EQ(core_run.details().at("training_models")[0].at("core"), "training");
      const json& chosen = auto_run.details().at("training_models")[0];
      EXPECT_EQ(chosen.at("core"), "training");
      EXPECT_EQ(chosen.at("core_requested"), "auto");
      EXPECT_FALSE(chosen.contains("core_fallback"));
      EXPECT_EQ(auto_run.details().at("megatron_jobs")[0].at("core"), "training");
      EXPECT_EQ(auto_run.metrics(), core);
    }
}

// ---- Per-phase exposure (details.megatron_jobs; llm_training's graph_report.hpp) ------------

// A star of four one-GPU hosts at 1 GB/s, no latency: MegatronOnTheCore.ExposedPipelineAndData-
// TimesByHand's fabric.
struct StarBench {
  StarBench()
      : p(build_topology(StarSpec{4, LinkSpec{Bandwidth{1e9}, Time::zero()}})),
        links(p.topology, p.network) {
    mlsim::cluster::testing::set_megatron_test_hosts(p.hardware, p.topology, 1);
  }
  test::PlatformBench p;
  LinkConditions links;
};

// The exposure the llm_training model reports for `model`'s job alone on a fresh star from 0
// (its graph and GraphExecutor, or its MegatronCoreJob; report_exposure over the ranks, as
// llm_training's run reports it).
std::map<std::string, double> exposure_alone(const TrainingModel& model, int gpus) {
  StarBench b;
  const MegatronModel& mg = *model.megatron;
  llm_training::ParallelLayout layout = mg.layout_for(gpus);
  layout.iterations = 1;
  const std::vector<NodeId> hosts = b.p.topology.hosts();
  std::vector<workload::RankReport> ranks;
  if (mg.core == llm_training::Core::kTraining) {
    llm_training::MegatronCoreOptions options;
    options.costs = mg.params.executor.costs;
    options.links = &b.links;
    llm_training::MegatronCoreJob job(b.p.engine, b.p.network, b.p.compute, layout, mg.kernels,
                                      hosts, options, [] { ADD_FAILURE() << "no route"; });
    job.start();
    b.p.engine.run();
    EXPECT_TRUE(job.finished());
    ranks = job.rank_reports();
  } else {
    llm_training::MegatronSource source(layout, mg.kernels);
    workload::ExecutorOptions options = mg.params.executor;
    for (NodeId h : hosts) options.hosts.push_back({h, 1});
    workload::GraphExecutor executor(b.p.engine, b.p.network, b.p.compute, b.links, source, options,
                                     "alone");
    executor.start();
    b.p.engine.run();
    EXPECT_TRUE(executor.done());
    ranks = executor.reports();
  }
  Results out;
  llm_training::report_exposure(ranks, llm_training::MegatronSource::phase_names(), 1, out);
  return out.metrics();
}

TEST(MegatronJobs, EachJobReportsItsExposureByHandOnBothCores) {
  // MegatronOnTheCore.ExposedPipelineAndDataTimesByHand's job as a cluster job started at
  // 0.5 s: PP 2 x DP 2, TP 1, 2 micro-batches, forward 1 ms and backward 2 ms, 1 MB
  // activations (1 ms a message), 2 MB of gradients per stage (a two-host ring: 2 steps of 1 MB,
  // 2 ms), no launch or protocol cost, the star's links disjoint. Rank (d, s) on host d + 2 s.
  // Times from the job's start: stage 0 F0 [0,1], blocking send [1,2], F1 [2,3], its send
  // waits for stage 1's receive posted with B0's gradient at 5, [5,6], B0 [6,8], B1's gradient
  // arrives at 10, B1 [10,12], DP ring [12,14]; stage 1 F0 [2,3], B0 [3,5], F1 [6,7], B1 [7,9],
  // its send [9,10], DP ring [10,12]. Each gap goes to the phase of the node before the kernel
  // that ends it, the tail to the last node's: stage 0 exposed PP 1 + 3 + 2 = 6 ms, DP 2 ms;
  // stage 1 PP 2 + 1 = 3 ms, DP 3 ms; compute 6 ms each. Per rank: means compute 6 ms, TP 0, PP
  // 4.5 ms, DP 2.5 ms; the critical rank is rank 0 (the first of the two ending at 14 ms):
  // compute 6, PP 6, DP 2 ms; the job's iteration 14 ms. Figures relative to the job's start:
  // a rank's time counted from 0 instead would add 500 ms to its first gap.
  const double ms = 1e-3;
  const TrainingModel graph_model =
      megatron_test_model(1, 2, 2, 2, 1 * ms, 2 * ms, 2'000'000, 1'000'000);
  for (const TrainingModel& model :
       {graph_model, mlsim::cluster::testing::on_training_core(graph_model)}) {
    const bool on_core = model.megatron->core == llm_training::Core::kTraining;
    SCOPED_TRACE(on_core ? "training core" : "graph");
    StarBench b;
    CommunicationParams params;
    params.models.push_back(model);
    CommunicationMode mode(b.p.engine, b.p.network, b.p.compute, params,
                           RandomStream(1, "test.models"));
    mode.set_links(&b.links);
    std::vector<TrainingRecord> records;
    mode.set_observer([&records](const TrainingRecord& r) { records.push_back(r); });
    JobSpec job;
    job.id = 3;
    job.model = 0;
    job.gpus = 4;
    job.iterations = 1;
    mode.admit(job);
    const std::vector<NodeId> hosts = b.p.topology.hosts();
    const std::vector<int> gpus(4, 1);
    int done = 0;
    b.p.engine.schedule_at(Time::from_seconds(0.5), [&] {
      EXPECT_TRUE(mode.start(
          job, hosts, gpus, 0, [&done] { ++done; },
          [](JobRunner::Failure) { ADD_FAILURE() << "failed"; }));
    });
    b.p.engine.run();
    ASSERT_EQ(done, 1);
    EXPECT_EQ(b.p.engine.now(), Time::from_seconds(0.5) + Time::ms(14));
    Results out;
    mode.report(out);
    const json& jobs = out.details().at("megatron_jobs");
    ASSERT_EQ(jobs.size(), 1u);
    const json& r = jobs[0];
    EXPECT_EQ(r.at("job"), 3);
    EXPECT_EQ(r.at("core"), on_core ? "training" : "graph");
    EXPECT_EQ(r.at("pp"), 2);
    EXPECT_EQ(r.at("dp"), 2);
    EXPECT_EQ(r.at("micro_batches"), 2);
    EXPECT_EQ(r.at("critical_rank"), 0);
    EXPECT_NEAR(r.at("start_s").get<double>(), 0.5, 1e-12);
    EXPECT_NEAR(r.at("iteration_s").get<double>(), 14 * ms, 1e-12);
    EXPECT_NEAR(r.at("compute_s").get<double>(), 6 * ms, 1e-12);
    EXPECT_NEAR(r.at("exposed_tp_s").get<double>(), 0, 1e-12);
    EXPECT_NEAR(r.at("exposed_pp_s").get<double>(), 4.5 * ms, 1e-12);
    EXPECT_NEAR(r.at("exposed_dp_s").get<double>(), 2.5 * ms, 1e-12);
    EXPECT_NEAR(r.at("critical_rank_compute_s").get<double>(), 6 * ms, 1e-12);
    EXPECT_NEAR(r.at("critical_rank_exposed_tp_s").get<double>(), 0, 1e-12);
    EXPECT_NEAR(r.at("critical_rank_exposed_pp_s").get<double>(), 6 * ms, 1e-12);
    EXPECT_NEAR(r.at("critical_rank_exposed_dp_s").get<double>(), 2 * ms, 1e-12);
    // The means over the run's one Megatron job are its figures.
    const auto& m = out.metrics();
    EXPECT_NEAR(m.at("megatron_exposed_pp_mean_s"), 4.5 * ms, 1e-12);
    EXPECT_NEAR(m.at("megatron_critical_rank_exposed_dp_mean_s"), 2 * ms, 1e-12);
    EXPECT_NEAR(m.at("megatron_compute_mean_s"), 6 * ms, 1e-12);
    EXPECT_NEAR(m.at("megatron_iteration_mean_s"), 14 * ms, 1e-12);
    // The same figures as the llm_training model gives the job alone from 0, to the last bit
    // (the same nanosecond intervals summed in the same order).
    for (const auto& [name, value] : exposure_alone(model, 4)) {
      SCOPED_TRACE(name);
      ASSERT_TRUE(r.contains(name));
      EXPECT_EQ(r.at(name).get<double>(), value);
    }
    // Every rank's stage figures, counted from the job's start.
    ASSERT_EQ(records.size(), 1u);
    ASSERT_EQ(records[0].ranks.size(), 4u);
    for (std::size_t k = 0; k < 4; ++k) {
      const workload::RankReport& rank = records[0].ranks[k];
      const bool first_stage = k < 2;
      EXPECT_EQ(rank.finished - records[0].start, Time::ms(first_stage ? 14 : 12)) << k;
      EXPECT_NEAR(rank.exposed_s[0], 0, 1e-12) << k;
      EXPECT_NEAR(rank.exposed_s[2], (first_stage ? 6 : 3) * ms, 1e-12) << k;
      EXPECT_NEAR(rank.exposed_s[3], (first_stage ? 2 : 3) * ms, 1e-12) << k;
    }
  }
}

// Through the loader, against the llm_training model run alone (the cross-check's job of
// AloneItTakesTheLlmTrainingModelsIterationTime: a roofline-priced GPT of 4 layers, TP 2, PP 2,
// DP 2, 4 micro-batches, recomputation, 2 iterations, on the leaf-spine of four 2-A100 hosts),
// on both cores, by the all-reduce and by the distributed optimizer: the cluster job, submitted
// at 2 s, reports llm_training's compute, exposed TP / PP / DP and critical rank's figures
// exactly.
TEST(MegatronJobs, AloneItReportsTheLlmTrainingModelsExposureOnBothCores) {
  const Registries r = both_models();
  for (const char* core : {"graph", "training"})
    for (const char* sync : {"all_reduce", "reduce_scatter_all_gather"}) {
      SCOPED_TRACE(std::string(core) + " " + sync);
      json layout = json::parse(
          R"({"tp": 2, "pp": 2, "dp": 2, "micro_batch": 1, "global_batch": 8, "recompute": true})");
      layout["dp_sync"] = sync;
      json mg = layout;
      mg["model"] = small_gpt();
      mg["core"] = core;
      const RunOutput cluster = test::run_json(
          megatron_cluster(
              mg,
              json::array({{{"submit", "2s"}, {"gpus", 8}, {"model", "gpt"}, {"iterations", 2}}})),
          r);
      json llm = megatron_alone(megatron_platform({{"name", "megatron_alone"}}), layout);
      llm["system"]["core"] = core;
      const RunOutput alone = test::run_json(llm, r);
      const auto& a = alone.results.metrics();
      ASSERT_EQ(a.at("completed"), 1);
      const json& jobs = cluster.results.details().at("megatron_jobs");
      ASSERT_EQ(jobs.size(), 1u);
      const json& job = jobs[0];
      EXPECT_EQ(job.at("core"), core);
      EXPECT_EQ(job.at("iterations"), 2);
      EXPECT_NEAR(job.at("start_s").get<double>(), 2, 1e-12);
      EXPECT_NEAR(job.at("iteration_s").get<double>(), a.at("iteration_time_s"),
                  1e-9 * a.at("iteration_time_s"));
      EXPECT_EQ(job.at("critical_rank"), alone.results.details().at("critical_rank"));
      int figures = 0;
      for (const auto& [name, value] : a) {
        if (name != "compute_s" && name.rfind("exposed_", 0) != 0 &&
            name.rfind("critical_rank_", 0) != 0)
          continue;
        SCOPED_TRACE(name);
        ++figures;
        ASSERT_TRUE(job.contains(name));
        EXPECT_EQ(job.at(name).get<double>(), value);
        const auto& c = cluster.results.metrics();
        EXPECT_EQ(c.at("megatron_" + name.substr(0, name.size() - 2) + "_mean_s"), value);
      }
      EXPECT_EQ(figures, 8);  // compute and 3 phases, mean and critical rank
      EXPECT_GT(a.at("exposed_pp_s"), 0);
      EXPECT_GT(a.at("exposed_dp_s"), 0);
      EXPECT_GT(a.at("exposed_tp_s"), 0);
    }
}

TEST(MegatronJobs, TheCoreKeyIsCheckedAtItsPath) {
  json mg = json::parse(R"({"tp": 2, "pp": 2, "dp": 2, "micro_batch": 1, "global_batch": 8})");
  mg["model"] = small_gpt();
  const json one_job =
      json::array({{{"submit", "0s"}, {"gpus", 8}, {"model", "gpt"}, {"iterations", 1}}});
  const Registries r = both_models();
  const std::string at = "workload.training.models[0].megatron.core";
  for (const char* core : {"graph", "training", "auto"}) {
    json m = mg;
    m["core"] = core;
    EXPECT_EQ(test::prepare_error(megatron_cluster(m, one_job), r), "no error") << core;
  }
  json m = mg;
  m["core"] = "tree";
  std::string e = test::prepare_error(megatron_cluster(m, one_job), r);
  EXPECT_NE(e.find(at), std::string::npos) << e;
  EXPECT_NE(e.find("tree"), std::string::npos) << e;
  // TP not collapsed runs on the core too (since 2026-12-07; it was refused here), each GPU a
  // worker (OnTheTrainingCoreAJobAloneTakesTheGraphsTime).
  m["core"] = "training";
  m["collapse_tensor_parallel"] = false;
  EXPECT_EQ(test::prepare_error(megatron_cluster(m, one_job), r), "no error");
}

}  // namespace
