// Reading the cluster model's scenario sections and traces: errors name the JSON path (and the
// trace line), the committed Philly excerpt runs under every policy, and the full Philly trace
// when ../shared/data is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "models/cluster/cluster_model.hpp"
#include "models/cluster/register.hpp"
#include "models/pipeline/pipeline_costs.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/hardware/dnn_profile.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "test_support.hpp"
#include "tests/support/run_json.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mlsim;
using namespace mlsim::cluster;
using namespace mlsim::cluster::testing;
using nlohmann::json;

namespace {

const std::filesystem::path kSource = MLSIM_SOURCE_DIR;
const std::filesystem::path kShared = MLSIM_SHARED_DATA_DIR;

// `doc["pool"]` (test only) lists node groups {gpu, count, gpus_per_node}: a star of that many
// hosts whose hardware is what topology.hardware would give them, in order.
ModelParams parse(json doc, const std::filesystem::path& dir = kSource / "workloads/scenarios") {
  static const HardwareCatalog catalog = shipped_catalog();
  int hosts = 0;
  for (const json& g : doc["pool"]) hosts += g["count"].get<int>();
  const Topology topology =
      build_topology(StarSpec{hosts, LinkSpec{Bandwidth{1.25e10}, Time::us(1)}});
  NodeHardware node_hardware(topology.nodes().size());
  std::size_t h = 0;
  for (const json& g : doc["pool"])
    for (int n = 0; n < g["count"].get<int>(); ++n)
      node_hardware.set_host(topology.hosts()[h++],
                             HostHardware{.gpu = &catalog.gpu(g["gpu"].get<std::string>(), "pool"),
                                          .gpus = g["gpus_per_node"].get<int>(),
                                          .nic = nullptr,
                                          .intra_node = {}});
  JsonReader system(doc["system"], "system");
  JsonReader workload(doc["workload"], "workload");
  ModelParams p = read_cluster_params(system, workload, catalog, topology, node_hardware, dir);
  system.finish();
  workload.finish();
  return p;
}

json base() {
  return json::parse(R"({
    "pool": [{"gpu": "V100-SXM2-32GB", "count": 2, "gpus_per_node": 8},
             {"gpu": "A100-SXM4-40GB", "count": 1, "gpus_per_node": 4}],
    "system": {"policy": "easy_backfill", "reference_gpu": "V100-SXM2-32GB"},
    "workload": {"jobs": {"source": "poisson", "jobs": 50, "mean_interarrival": "60s",
                          "mean_duration": "1h", "gpus": [1, 2, 4]}}})");
}

std::string error_of(json doc) {
  try {
    parse(std::move(doc));
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

std::filesystem::path write_temp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return path;
}

RunResult run_params(const ModelParams& p, std::uint64_t seed = 1) {
  return run(p.cluster, p.make_source(seed), seed);
}

}  // namespace

TEST(ClusterScenario, PoliciesPresetTheOptionsAndSpeedsComeFromTheCatalog) {
  ModelParams p = parse(base());
  EXPECT_EQ(p.cluster.policy, Policy::kEasyBackfill);
  EXPECT_EQ(p.cluster.order, Order::kSubmit);
  EXPECT_FALSE(p.cluster.flexible_types);
  ASSERT_EQ(p.cluster.types.size(), 2u);
  // The pool from the hosts' hardware: hosts 0-1 one group of 2 V100 nodes, host 2 an A100 node.
  ASSERT_EQ(p.cluster.groups.size(), 2u);
  EXPECT_EQ(p.cluster.groups[0].type, 0);
  EXPECT_EQ(p.cluster.groups[0].nodes, 2);
  EXPECT_EQ(p.cluster.groups[0].gpus_per_node, 8);
  EXPECT_EQ(p.cluster.groups[1].type, 1);
  EXPECT_EQ(p.cluster.groups[1].nodes, 1);
  EXPECT_EQ(p.cluster.groups[1].gpus_per_node, 4);
  EXPECT_DOUBLE_EQ(p.cluster.types[0].time_factor, 1.0);
  EXPECT_DOUBLE_EQ(p.cluster.types[1].time_factor, 15.7 / 19.5);  // catalog FP32 peaks
  json d = base();
  d["system"]["policy"] = "sing";
  d["system"]["speed_dtype"] = "fp16";
  p = parse(d);
  EXPECT_EQ(p.cluster.order, Order::kFairShare);
  EXPECT_TRUE(p.cluster.flexible_types);
  EXPECT_TRUE(p.cluster.preinitialised);
  EXPECT_DOUBLE_EQ(p.cluster.types[1].time_factor, 125.0 / 312.0);
  d["system"]["flexible_types"] = false;  // an ablation
  EXPECT_FALSE(parse(d).cluster.flexible_types);
}

TEST(ClusterScenario, ErrorsNameThePath) {
  const auto expect_path = [](json d, const std::string& path) {
    const std::string e = error_of(std::move(d));
    EXPECT_NE(e.find(path), std::string::npos) << e;
  };
  json d = base();
  d["system"]["policy"] = "slurm";
  expect_path(d, "system.policy");
  d = base();
  // The pool moved to the topology's hosts; the old key says where.
  d["system"]["nodes"] = json::parse(R"([{"gpu": "V100-SXM2-32GB", "count": 2}])");
  expect_path(d, "system.nodes: moved: the node pool is the topology's hosts");
  expect_path(d, "topology.hardware");
  d = base();
  d["system"]["reference_gpu"] = "K80";
  expect_path(d, "system.reference_gpu");
  d = base();
  d["system"]["estimate_factor"] = 0.5;
  expect_path(d, "system.estimate_factor");
  d = base();
  // Failures moved to the events section; the old keys say so.
  d["system"]["failures"] = json::parse(R"([{"node": 0, "at": "1h", "repair": "1h"}])");
  expect_path(d, "system.failures: moved");
  d = base();
  d["system"]["node_mtbf"] = "720h";
  expect_path(d, "system.node_mtbf: moved");
  d = base();
  d["system"]["startup_warm"] = "1min";
  expect_path(d, "system.startup_warm");  // slower than the (0 s) cold start
  d = base();
  d["workload"]["jobs"]["source"] = "swf";
  expect_path(d, "workload.jobs.source");
  d = base();
  d["workload"]["jobs"]["gpus"] = json::array();
  expect_path(d, "workload.jobs.gpus");
  d = base();
  d["workload"]["jobs"] = json::parse(R"({"source": "trace", "file": "nope.csv"})");
  expect_path(d, "workload.jobs.file");
}

TEST(ClusterScenario, TraceErrorsNameTheFileAndLine) {
  json d = base();
  const auto trace = [&](const std::string& name, const std::string& text) {
    d["workload"]["jobs"] = {{"source", "trace"},
                             {"file", write_temp(name, text).string()},
                             {"gpu_type_column", "type"}};
    return error_of(d);
  };
  std::string e = trace("cluster_unsorted.csv",
                        "timestamp,duration,num_gpus,type\n"
                        "2017-10-02 00:00:10,5,1,any\n2017-10-02 00:00:05,5,1,any\n");
  EXPECT_NE(e.find("workload.jobs.file"), std::string::npos) << e;
  EXPECT_NE(e.find("cluster_unsorted.csv:3"), std::string::npos) << e;
  EXPECT_NE(e.find("sorted"), std::string::npos) << e;
  e = trace("cluster_bad_gpus.csv",
            "timestamp,duration,num_gpus,type\n2017-10-02 00:00:10,5,0,any\n");
  EXPECT_NE(e.find("cluster_bad_gpus.csv:2"), std::string::npos) << e;
  e = trace("cluster_bad_type.csv",
            "timestamp,duration,num_gpus,type\n2017-10-02 00:00:10,5,1,V100-SXM2-32GB|TPU\n");
  EXPECT_NE(e.find("'TPU'"), std::string::npos) << e;
  e = trace("cluster_no_column.csv", "timestamp,duration,gpus,type\n");
  EXPECT_NE(e.find("num_gpus"), std::string::npos) << e;
}

TEST(ClusterScenario, TraceColumnsGiveUsersAndTypes) {
  json d = base();
  d["workload"]["jobs"] = {{"source", "trace"},
                           {"file", write_temp("cluster_typed.csv",
                                               "t,duration,num_gpus,user,type\n"
                                               "100,10,4,alice,A100-SXM4-40GB\n"
                                               "100,10,4,bob,V100-SXM2-32GB|A100-SXM4-40GB\n"
                                               "130,20,1,alice,\n")
                                        .string()},
                           {"submit_column", "t"},
                           {"submit_format", "seconds"},
                           {"user_column", "user"},
                           {"gpu_type_column", "type"}};
  const ModelParams p = parse(d);
  auto source = p.make_source(1);
  EXPECT_EQ(source->total(), 3u);
  const JobSpec a = *source->next();
  EXPECT_EQ(a.submit, Time::zero());  // offsets from the first job
  EXPECT_EQ(a.types, 0b10u);
  EXPECT_EQ(a.user, 0);
  const JobSpec b = *source->next();
  EXPECT_EQ(b.types, 0b11u);
  EXPECT_EQ(b.user, 1);
  const JobSpec c = *source->next();
  EXPECT_EQ(c.submit, Time::s(30));
  EXPECT_EQ(c.types, 0u);
  EXPECT_EQ(c.user, 0);
  EXPECT_FALSE(source->next());
  EXPECT_EQ(source->users().names(), (std::vector<std::string>{"alice", "bob"}));
}

TEST(ClusterScenario, CommittedPhillyExcerptRunsUnderEveryPolicy) {
  std::ifstream in(kSource / "workloads/scenarios/cluster_sing.json");
  const json scenario = json::parse(in);
  const Registries registries = mlsim::test::registries_with(register_cluster);
  std::map<std::string, double> wait;
  for (const std::string policy : {"fcfs", "easy_backfill", "sing"}) {
    json d = scenario;
    d["system"]["policy"] = policy;
    const RunOutput r = mlsim::test::run_json(d, registries);
    const auto& m = r.results.metrics();
    EXPECT_EQ(m.at("jobs_submitted"), 1353) << policy;
    EXPECT_EQ(m.at("jobs_finished") + m.at("jobs_dropped"), 1353) << policy;
    EXPECT_EQ(m.at("reservations_missed"), 0) << policy;
    wait[policy] = m.at("queue_delay_mean_s");
  }
  EXPECT_LT(wait["easy_backfill"], wait["fcfs"]);
}

TEST(ClusterScenario, FullPhillyTraceWeekRuns) {
  const auto file = kShared / "cluster_traces/philly/philly.csv";
  if (!std::filesystem::exists(file))
    GTEST_SKIP() << "shared data not found (" << file.string()
                 << "); this test reads the full trace";
  // The shared trace is not sorted by submit time: sort one week of it into a temporary file.
  std::ifstream in(file);
  std::string header, line;
  std::getline(in, header);
  std::vector<std::string> rows;
  while (std::getline(in, line))
    if (line.compare(0, 10, "2017-10-09") >= 0 && line.compare(0, 10, "2017-10-16") < 0)
      rows.push_back(line);
  std::stable_sort(rows.begin(), rows.end(), [](const std::string& a, const std::string& b) {
    return a.compare(0, 19, b, 0, 19) < 0;
  });
  std::string text = header + "\n";
  for (const auto& r : rows) text += r + "\n";
  json d = base();
  d["pool"] = json::parse(R"([{"gpu": "V100-SXM2-32GB", "count": 40, "gpus_per_node": 8}])");
  d["workload"]["jobs"] = {{"source", "trace"},
                           {"file", write_temp("cluster_philly_week.csv", text).string()},
                           {"user_column", "cluster"}};
  const RunResult r = run_params(parse(d));
  const auto m = r.metrics();
  EXPECT_EQ(m.at("jobs_submitted"), static_cast<double>(rows.size()));
  EXPECT_EQ(m.at("jobs_finished") + m.at("jobs_dropped"), static_cast<double>(rows.size()));
  EXPECT_EQ(m.at("reservations_missed"), 0);
  EXPECT_GT(m.at("users"), 1);
}

// A cluster scenario on `topology` fed with `csv` (columns submit, duration, gpus, and a GPU type
// column "type" when the header has one), for runs through the runner.
json trace_scenario(json topology, const mlsim::testing::TempDir& dir, const std::string& csv) {
  json doc = json::parse(R"({
    "name": "cluster_small",
    "include": ["../hardware/gpus.json"],
    "network": {"backend": "analytic"},
    "system": {"model": "cluster", "policy": "fcfs", "reference_gpu": "V100-SXM2-32GB"},
    "workload": {"jobs": {"source": "trace", "submit_format": "seconds",
                          "submit_column": "submit", "duration_column": "duration",
                          "gpus_column": "gpus"}}})");
  doc["topology"] = std::move(topology);
  doc["workload"]["jobs"]["file"] = dir.write("jobs.csv", csv).string();
  if (csv.starts_with("submit,duration,gpus,type"))
    doc["workload"]["jobs"]["gpu_type_column"] = "type";
  return doc;
}

// The events section through the runner: pool node i is topology host i.
TEST(ClusterScenario, NodeFailuresComeFromTheEventsSection) {
  // One node of 2 GPUs (host h0); a 2-GPU job of 100 s from 0. h0 fails at 40 s for 30 s: the job
  // restarts at 70 s and ends at 170 s; 2 x 40 GPU-seconds are lost.
  const Registries registries = mlsim::test::registries_with(register_cluster);
  mlsim::testing::TempDir dir;
  json doc = trace_scenario(json::parse(R"({"kind": "star", "hosts": 1,
      "link": {"bandwidth": "1Gbps", "latency": "1us"},
      "hardware": {"gpu": "V100-SXM2-32GB", "gpus_per_host": 2}})"),
                            dir, "submit,duration,gpus\n0,100,2\n");
  doc["events"] =
      json::parse(R"({"list": [{"at": "40s", "node": "h0", "up": false, "repair_after": "30s"}]})");
  const RunOutput r = mlsim::test::run_json(doc, registries);
  EXPECT_DOUBLE_EQ(r.results.metrics().at("node_failures"), 1);
  EXPECT_DOUBLE_EQ(r.results.metrics().at("job_restarts"), 1);
  EXPECT_DOUBLE_EQ(r.results.metrics().at("lost_gpu_hours"), 80.0 / 3600);
  EXPECT_DOUBLE_EQ(r.results.metrics().at("makespan_s"), 170);
  // Host speeds are not modelled by this model.
  json speed = doc;
  speed["events"] = json::parse(R"({"list": [{"host": 0, "speed": 0.5}]})");
  EXPECT_NE(mlsim::test::prepare_error(speed, registries).find("events: the cluster model"),
            std::string::npos);
}

// A profiled model's pipeline cuts carry what the pipeline model's cuts carry, from the profile's
// edges (pipeline::layer_costs): on ResNet-50 the cut after layer 29 inside a residual block
// carries the block's input too, 513.8 MB per profiled batch where the layer's own output is
// 102.8 MB (docs/pipeline.md, "The antichain DAG"); the planners' sizes are the same cuts.
TEST(ClusterScenario, AProfiledModelsCutsCountEveryActivationCrossingThem) {
  json d = base();
  d["system"]["detail"] = "communication";
  d["workload"]["training"] = json::parse(R"({"models": [
    {"name": "r50", "profile": "../dnn/pipedream/resnet50/graph.txt",
     "profiled_on": "V100-SXM2-32GB", "scheduler": "fifo", "sync": "ring"}]})");
  const ModelParams p = parse(d);
  ASSERT_TRUE(p.communication);
  const TrainingModel& m = p.communication->models.at(0);
  const std::vector<pipeline::LayerCost> expected = pipeline::layer_costs(
      read_pipedream_graph((kSource / "workloads/dnn/pipedream/resnet50/graph.txt").string()));
  ASSERT_EQ(m.boundary_bytes.size(), expected.size());
  const std::vector<pipeline::LayerCost> sizes = planner_layer_sizes(m);
  for (std::size_t l = 0; l < expected.size(); ++l) {
    EXPECT_EQ(m.boundary_bytes[l], expected[l].cut_bytes()) << l;
    EXPECT_EQ(sizes[l].cut_bytes(), expected[l].cut_bytes()) << l;
  }
  EXPECT_NEAR(m.boundary_bytes[28] / 1e6, 513.8, 0.05);
  EXPECT_NEAR(static_cast<double>(m.activation_bytes[28]) / 1e6, 102.8, 0.05);
}

// A heterogeneous pool is one topology: host h0 a V100 node, h1 an A100 node (2 GPUs each,
// topology.hardware). Two 2-GPU jobs of 100 s (on the reference V100) at time 0, pinned by the
// trace to one type each: the V100 job takes 100 s, the A100 job 100 x 15.7 / 19.5 = 80.51282 s
// (the FP32 peaks, datasheets in workloads/hardware/gpus.json). Mean JCT (100 + 80.51282) / 2 =
// 90.25641 s, makespan 100 s. Without the group every host is a V100 and the A100 job cannot run.
TEST(ClusterScenario, HeterogeneousPoolIsOneTopology) {
  const Registries registries = mlsim::test::registries_with(register_cluster);
  mlsim::testing::TempDir dir;
  json doc = trace_scenario(json::parse(R"({"kind": "star", "hosts": 2,
      "link": {"bandwidth": "1Gbps", "latency": "1us"},
      "hardware": {"gpu": "V100-SXM2-32GB", "gpus_per_host": 2,
                   "groups": [{"hosts": [1], "gpu": "A100-SXM4-40GB"}]}})"),
                            dir,
                            "submit,duration,gpus,type\n0,100,2,V100-SXM2-32GB\n"
                            "0,100,2,A100-SXM4-40GB\n");
  const RunOutput r = mlsim::test::run_json(doc, registries);
  const auto& m = r.results.metrics();
  EXPECT_DOUBLE_EQ(m.at("jobs_finished"), 2);
  EXPECT_DOUBLE_EQ(m.at("installed_gpus"), 4);
  EXPECT_NEAR(m.at("jct_mean_s"), (100 + 100 * 15.7 / 19.5) / 2, 1e-9);
  EXPECT_NEAR(m.at("jct_mean_s"), 90.25641, 1e-5);
  EXPECT_NEAR(m.at("makespan_s"), 100, 1e-9);
  doc["topology"]["hardware"].erase("groups");
  EXPECT_NE(mlsim::test::prepare_error(doc, registries).find("A100-SXM4-40GB"), std::string::npos)
      << mlsim::test::prepare_error(doc, registries);
}

// The detailed mode (system.detail "communication") through the runner: the shipped Philly
// fat-tree scenario, cut to its first 30 jobs, in both modes; errors name the JSON path; the
// work estimate refuses a run above the event budget before it starts.
TEST(ClusterScenario, DetailedModeRunsTheShippedExcerptAndRejectsBadInput) {
  std::ifstream in(kSource / "workloads/scenarios/cluster_philly_fat_tree.json");
  json scenario = json::parse(in);
  scenario["workload"]["jobs"]["limit"] = 30;
  const Registries registries = mlsim::test::registries_with(register_cluster);
  const std::filesystem::path file = kSource / "workloads/scenarios/cluster_philly_fat_tree.json";
  std::map<std::string, std::map<std::string, double>> m;
  for (const std::string detail : {"job", "communication"}) {
    json d = scenario;
    d["system"]["detail"] = detail;
    m[detail] = mlsim::test::run_json(d, registries, file).results.metrics();
    EXPECT_EQ(m[detail].at("jobs_finished"), 30) << detail;
  }
  EXPECT_EQ(m["job"].count("detailed_jobs_simulated"), 0u);
  EXPECT_GT(m["communication"].at("detailed_jobs_simulated"), 0);
  EXPECT_EQ(m["communication"].at("gradient_bytes_sent"),
            m["communication"].at("gradient_bytes_delivered"));
  // Communication only adds time to the simulated jobs' compute.
  EXPECT_GE(m["communication"].at("communication_slowdown_mean"), 1.0);
  // Same scenario and seed, same results.
  json again = scenario;
  again["system"]["detail"] = "communication";
  EXPECT_EQ(mlsim::test::run_json(again, registries, file).results.metrics(), m["communication"]);

  const auto expect_error = [&](const json& d, const std::string& text) {
    const std::string e = mlsim::test::prepare_error(d, registries, file);
    EXPECT_NE(e.find(text), std::string::npos) << e;
  };
  json d = scenario;
  d["workload"].erase("training");
  expect_error(d, "workload.training");
  d = scenario;
  d["workload"]["training"]["models"][1]["sync"] = "carrier_pigeon";
  expect_error(d, "workload.training.models[1].sync");
  d = scenario;
  d["workload"]["training"]["models"][0]["colour"] = "blue";
  expect_error(d, "workload.training.models[0].colour");
  d = scenario;
  d["workload"]["training"]["models"][0]["partition"] = 1000;  // fifo has no partition
  expect_error(d, "workload.training.models[0].partition");
  d = scenario;
  d["workload"]["training"]["models"][2]["name"] = "vgg16_ring_fifo";
  expect_error(d, "workload.training.models[2].name");
  d = scenario;
  d["system"]["detail"] = "packets";
  expect_error(d, "system.detail");
  d = scenario;
  d["system"]["placement"] = "random";
  expect_error(d, "system.placement");
  d = scenario;
  d["events"] = json::parse(R"({"list": [{"host": 0, "speed": 0.5}]})");
  expect_error(d, "events: the cluster model does not model host speed changes");
  // A job list: submit order, known models, iterations only with a model.
  d = scenario;
  d["workload"]["jobs"] = json::parse(R"({"source": "list", "list": [
      {"submit": "0s", "gpus": 8, "model": "gnmt_ps_fifo", "iterations": 3},
      {"submit": "1s", "gpus": 8, "model": "alexnet", "duration": "1s"}]})");
  expect_error(d, "workload.jobs.list[1].model: unknown model 'alexnet'");
  d["workload"]["jobs"]["list"][1] =
      json::parse(R"({"submit": "0.5s", "gpus": 8, "iterations": 3})");
  expect_error(d, "workload.jobs.list[1].iterations: needs the job's model");
  d["workload"]["jobs"]["list"][1] = json::parse(
      R"({"submit": "0s", "gpus": 8, "duration": "1s", "user": "a", "gpu_type": "V100-SXM2-32GB"})");
  EXPECT_EQ(mlsim::test::prepare_error(d, registries, file), "no error");
  d["workload"]["jobs"]["list"][1]["submit"] = "-1s";
  expect_error(d, "workload.jobs.list[1].submit");
  // Budget: the full six hours ask for millions of events; a budget of 1000 refuses them.
  const LoadedScenario s =
      load_scenario_text(scenario.dump(), ScenarioRequest{file, {}, {}}, registries);
  RunBudget budget;
  budget.max_events = 1000;
  try {
    PreparedRun prepared(s, registries, budget);
    ADD_FAILURE() << "no budget error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("workload.jobs"), std::string::npos) << e.what();
  }
}

// system.ina.levels: "one_switch" (the default) or "two_level"; anything else names its path.
TEST(ClusterScenario, InaLevelsAreCheckedWithTheirPath) {
  const std::filesystem::path file = kSource / "workloads/scenarios/cluster_ina_two_racks.json";
  std::ifstream in(file);
  const json scenario = json::parse(in);
  const Registries registries = mlsim::test::registries_with(register_cluster);
  for (const std::string levels : {"one_switch", "two_level"}) {
    json d = scenario;
    d["system"]["ina"]["levels"] = levels;
    EXPECT_EQ(mlsim::test::prepare_error(d, registries, file), "no error") << levels;
  }
  json d = scenario;
  d["system"]["ina"]["levels"] = "three";
  const std::string e = mlsim::test::prepare_error(d, registries, file);
  EXPECT_NE(e.find("system.ina.levels"), std::string::npos) << e;
}

// ByteScheduler's partition and credit when a model names none [code: bytedance/byteps,
// bytescheduler/common/bytecore.py ByteCore.__init__: BYTESCHEDULER_PARTITION 1000000 and
// BYTESCHEDULER_CREDIT 4000000 parameters whatever the architecture; docs/scheduling.md: "for
// allreduce architecture ... e.g., 8000000" and "16000000"]. In-network aggregation takes the
// PS ones: ATP's end host is BytePS with its PS-lite push/pull replaced (in-ATP/ATP-BytePS,
// README), so a worker pushes and pulls through the switch as through a PS. Ordering: one order
// for the job over INA, every worker's own otherwise.
TEST(ClusterScenario, ByteSchedulerDefaultsArePsOnesOverInaAndAllReduceOnesOverRing) {
  json doc = json::parse(R"({
    "pool": [{"gpu": "V100-SXM2-32GB", "count": 4, "gpus_per_node": 1}],
    "system": {"policy": "fcfs", "reference_gpu": "V100-SXM2-32GB", "detail": "communication"},
    "workload": {"jobs": {"source": "poisson", "jobs": 4, "mean_interarrival": "1s",
                          "mean_duration": "10s", "gpus": [2]},
                 "training": {"models": []}}})");
  // ATP and DSA models do not share a run (one shared-pool program per switch): one each.
  for (const std::string ina : {"atp", "dsa"}) {
    SCOPED_TRACE(ina);
    json d = doc;
    for (const std::string& sync : {std::string("ps"), std::string("ring"), ina})
      d["workload"]["training"]["models"].push_back(
          {{"name", sync},
           {"profile", "../dnn/pipedream/alexnet/graph.txt"},
           {"profiled_on", "V100-SXM2-32GB"},
           {"scheduler", "bytescheduler"},
           {"sync", sync}});
    const ModelParams p = parse(d);
    ASSERT_EQ(p.communication->models.size(), 3u);
    const auto& m = p.communication->models;
    constexpr std::int64_t kM = 1'000'000;
    for (std::size_t i : {0u, 2u}) {  // ps, and in-network aggregation
      EXPECT_EQ(m[i].config.partition, 1 * kM) << m[i].name;
      EXPECT_EQ(m[i].config.credit, 4 * kM) << m[i].name;
    }
    EXPECT_EQ(m[1].config.partition, 8 * kM);  // ring
    EXPECT_EQ(m[1].config.credit, 16 * kM);
    EXPECT_EQ(m[0].ordering, training::Ordering::kEveryWorker);
    EXPECT_EQ(m[1].ordering, training::Ordering::kEveryWorker);
    EXPECT_EQ(m[2].ordering, training::Ordering::kJob);
  }
}

// A listed job names its model and iterations; the same list runs in both modes. Two 8-GPU
// jobs on 4-GPU hosts each span two hosts.
TEST(ClusterScenario, ListedJobsNameTheirModelAndIterations) {
  std::ifstream in(kSource / "workloads/scenarios/cluster_philly_fat_tree.json");
  json d = json::parse(in);
  const Registries registries = mlsim::test::registries_with(register_cluster);
  const std::filesystem::path file = kSource / "workloads/scenarios/cluster_philly_fat_tree.json";
  d["workload"]["jobs"] = json::parse(R"({"source": "list", "list": [
      {"submit": "0s", "gpus": 8, "model": "resnet50_ring_bytescheduler", "iterations": 3},
      {"submit": "0.5s", "gpus": 8, "model": "vgg16_ps_bytescheduler", "iterations": 2},
      {"submit": "1s", "gpus": 1, "duration": "10s"}]})");
  const auto m = mlsim::test::run_json(d, registries, file).results.metrics();
  EXPECT_EQ(m.at("jobs_finished"), 3);
  EXPECT_EQ(m.at("detailed_jobs_simulated"), 2);
  EXPECT_EQ(m.at("detailed_jobs_one_host"), 1);
  EXPECT_EQ(m.at("detailed_iterations"), 5);
}

// The ByteScheduler-over-ATP livelock (docs/cluster.md, "ByteScheduler over ATP"), on the first
// 30 jobs of the shipped two-rack scenario, ATP on one switch, both models under ByteScheduler.
// With one order for the job (`scheduling` "job", the default) every job finishes within a
// bounded number of events (5.45 M measured on 2026-12-05, 5.44 M with the host links at 1.5 us
// on 2026-12-07; the budget stops the run past 8 M).
// With every worker scheduling its own credit a ResNet-50 job of 8 hosts (job 23) deadlocks
// (two jobs did while the scenario's host links were at 500 ns; at 1.5 us, since 2026-12-07,
// one: which chunks' results arrive first moves with the latency, and with it which jobs' send
// orders drift into the deadlock). The stall watchdog
// (5 s here) ends them, the cluster drops and reports them, and the run ends.
TEST(ClusterScenario, ByteSchedulerOverAtpOnOneSwitchFinishesWithinBoundedEvents) {
  const std::filesystem::path file = kSource / "workloads/scenarios/cluster_ina_two_racks.json";
  std::ifstream in(file);
  json scenario = json::parse(in);
  scenario["workload"]["jobs"]["limit"] = 30;
  scenario["system"]["stall_timeout"] = "5s";
  for (json& m : scenario["workload"]["training"]["models"]) {
    m["sync"] = "atp";
    m["scheduler"] = "bytescheduler";
  }
  const Registries registries = mlsim::test::registries_with(register_cluster);
  RunBudget budget;
  budget.max_events = 8'000'000;
  for (const std::string scheduling : {"job", "every_worker"}) {
    SCOPED_TRACE(scheduling);
    json d = scenario;
    for (json& m : d["workload"]["training"]["models"]) m["scheduling"] = scheduling;
    const LoadedScenario s =
        load_scenario_text(d.dump(), ScenarioRequest{file, {}, {}}, registries);
    const RunOutput out = run_scenario(s, registries, {}, budget);
    const auto& m = out.results.metrics();
    EXPECT_EQ(m.at("jobs_unfinished"), 0);
    if (scheduling == "job") {
      EXPECT_EQ(m.at("jobs_finished"), 30);
      EXPECT_EQ(m.at("detailed_jobs_stalled"), 0);
    } else {
      EXPECT_EQ(m.at("detailed_jobs_stalled"), 1);  // 2 at 500 ns per host link
      EXPECT_EQ(m.at("jobs_dropped"), 1);
      ASSERT_EQ(out.results.details().at("stalled_jobs").size(), 1u);
      EXPECT_EQ(out.results.details().at("stalled_jobs")[0].at("job"), 23);
    }
  }
  // The key is checked: only over INA with ByteScheduler, and a known value.
  json d = scenario;
  d["workload"]["training"]["models"][0]["scheduling"] = "sometimes";
  EXPECT_NE(mlsim::test::prepare_error(d, registries, file)
                .find("workload.training.models[0].scheduling"),
            std::string::npos);
  d = scenario;
  d["workload"]["training"]["models"][0]["scheduler"] = "fifo";
  d["workload"]["training"]["models"][0]["scheduling"] = "job";
  EXPECT_NE(mlsim::test::prepare_error(d, registries, file)
                .find("workload.training.models[0].scheduling"),
            std::string::npos);
}

// The shipped all-reduce variants of the two-rack scenario (ring, tree, RAT: the training core's
// three registered all-reduces), on its first 40 jobs. With one GPU per host, a job's hosts are
// its GPUs whatever the variant, and each job draws its model at arrival, so the three run the
// same jobs with the same workers. Each of the three moves 2 (W - 1) x the gradient per
// iteration over the network (ring: 2 (W - 1) steps of W messages of 1/W of it; tree: W - 1
// transfers of the whole gradient up, W - 1 down; RAT: the same count, to each rack's aggregator
// and across the racks' tree), so the bytes delivered agree exactly while the times differ: the
// tree's root and RAT's aggregators carry whole gradients where the ring spreads them, so
// neither finishes its simulated jobs faster than the ring.
TEST(ClusterScenario, ShippedTreeAndRatVariantsMoveTheRingsBytesMoreSlowly) {
  const std::filesystem::path file = kSource / "workloads/scenarios/cluster_ina_two_racks.json";
  const Registries registries = mlsim::test::registries_with(register_cluster);
  std::map<std::string, std::map<std::string, double>> m;
  for (const std::string variant : {"ring", "tree", "rat"}) {
    const LoadedScenario s = load_scenario(
        ScenarioRequest{file, variant, {{"workload.jobs.limit", 40, "workload.jobs.limit"}}},
        registries);
    m[variant] = run_scenario(s, registries, {}, {}).results.metrics();
    EXPECT_EQ(m[variant].at("jobs_finished"), 40) << variant;
    EXPECT_EQ(m[variant].at("detailed_jobs_failed"), 0) << variant;
    EXPECT_EQ(m[variant].at("gradient_bytes_sent"), m[variant].at("gradient_bytes_delivered"));
  }
  EXPECT_GT(m["ring"].at("detailed_jobs_simulated"), 0);
  for (const std::string variant : {"tree", "rat"}) {
    SCOPED_TRACE(variant);
    EXPECT_EQ(m[variant].at("detailed_jobs_simulated"), m["ring"].at("detailed_jobs_simulated"));
    EXPECT_EQ(m[variant].at("detailed_iterations"), m["ring"].at("detailed_iterations"));
    EXPECT_EQ(m[variant].at("gradient_bytes_delivered"), m["ring"].at("gradient_bytes_delivered"));
    EXPECT_GE(m[variant].at("communication_slowdown_mean"),
              m["ring"].at("communication_slowdown_mean"));
  }
}

// Pipeline jobs in the shipped fat-tree scenario: a model given a `pipeline`, listed jobs that
// run it as a pipeline or (stages 1) data-parallel, and the keys checked by their path.
TEST(ClusterScenario, ListedPipelineJobsRunBesideDataParallelOnesAndTheirKeysAreChecked) {
  const std::filesystem::path file = kSource / "workloads/scenarios/cluster_philly_fat_tree.json";
  std::ifstream in(file);
  json d = json::parse(in);
  const Registries registries = mlsim::test::registries_with(register_cluster);
  d["workload"]["training"]["models"][0]["pipeline"] =
      json::parse(R"({"stages": 2, "schedule": "gpipe", "micro_batches": 4})");
  d["workload"]["jobs"] = json::parse(R"({"source": "list", "list": [
      {"submit": "0s", "gpus": 8, "model": "vgg16_ring_fifo", "iterations": 2},
      {"submit": "0s", "gpus": 16, "model": "vgg16_ring_fifo", "iterations": 1, "stages": 1},
      {"submit": "0.5s", "gpus": 16, "model": "resnet50_ring_bytescheduler", "iterations": 1}]})");
  const auto m = mlsim::test::run_json(d, registries, file).results.metrics();
  EXPECT_EQ(m.at("jobs_finished"), 3);
  EXPECT_EQ(m.at("detailed_jobs_simulated"), 3);
  EXPECT_EQ(m.at("detailed_pipeline_jobs"), 1);
  EXPECT_GT(m.at("activation_bytes_delivered"), 0);
  EXPECT_EQ(m.at("activation_bytes_sent"), m.at("activation_bytes_delivered"));
  EXPECT_EQ(m.at("detailed_iterations"), 4);

  const auto expect_error = [&](const json& doc, const std::string& text) {
    const std::string e = mlsim::test::prepare_error(doc, registries, file);
    EXPECT_NE(e.find(text), std::string::npos) << e;
  };
  json e = d;
  e["workload"]["jobs"]["list"][2]["stages"] = 2;  // resnet50 has no pipeline
  expect_error(e, "workload.jobs.list[2].stages");
  e = d;
  e["workload"]["jobs"]["list"][0]["stages"] = "two";
  expect_error(e, "workload.jobs.list[0].stages");
  e = d;
  e["workload"]["jobs"]["list"][0]["stages"] = 0;
  expect_error(e, "workload.jobs.list[0].stages");
  e = d;
  e["workload"]["jobs"]["list"][0].erase("model");
  e["workload"]["jobs"]["list"][0].erase("iterations");
  e["workload"]["jobs"]["list"][0]["duration"] = "1s";
  e["workload"]["jobs"]["list"][0]["stages"] = 2;
  expect_error(e, "workload.jobs.list[0].stages: needs the job's model");
  e = d;
  e["workload"]["training"]["models"][0]["pipeline"]["micro_batches"] = 0;
  expect_error(e, "workload.training.models[0].pipeline.micro_batches");
  e = d;
  e["workload"]["training"]["models"][0]["pipeline"]["schedule"] = "interleaved";
  expect_error(e, "workload.training.models[0].pipeline.schedule");
}

// The work estimate's gradient transfers (estimate_work) against what the detailed mode sends:
// one listed AlexNet job of 2 iterations on 5 one-GPU hosts (FIFO: one chunk per layer with
// parameters), its model's sync set to each strategy. Per chunk and iteration a ring sends
// 2(W-1) steps of W transfers (40), a tree and RAT 2(W-1) = 8 (each chunk whole: up to a
// parent or aggregator and back down), PS at least a push and a pull per remote worker (8, a
// lower bound: AlexNet's large layers are sliced over every server). Bytes: 2(W-1) x
// the gradient for ring, tree and RAT, 2W for PS. Tree and RAT were estimated at W - 1 = 4
// transfers until 2026-12-06.
TEST(ClusterScenario, WorkEstimateCountsEachStrategysTransfersAndBytes) {
  const std::filesystem::path file = kSource / "workloads/scenarios/cluster_ina_two_racks.json";
  std::ifstream in(file);
  json doc = json::parse(in);
  doc.erase("variants");
  doc.erase("baseline");
  doc["system"].erase("ina");
  doc["workload"]["training"]["models"][0]["sync"] = "ring";
  doc["workload"]["jobs"] = json::parse(R"({"source": "list", "list": [
      {"submit": "0s", "gpus": 5, "model": "alexnet", "iterations": 2}]})");
  const Registries registries = mlsim::test::registries_with(register_cluster);
  for (const std::string sync : {"ring", "tree", "rat", "ps"}) {
    SCOPED_TRACE(sync);
    json d = doc;
    d["workload"]["training"]["models"][1]["sync"] = sync;
    const LoadedScenario s =
        load_scenario_text(d.dump(), ScenarioRequest{file, {}, {}}, registries);
    PreparedRun prepared(s, registries);
    json resolved = s.resolved;
    JsonReader system(resolved["system"], "system");
    JsonReader workload(resolved["workload"], "workload");
    const ModelParams params = read_cluster_params(
        system, workload, s.hardware, prepared.topology(), prepared.node_hardware(), s.dir());
    WorkEstimate estimate;
    estimate_work(params, 1, 16, estimate);
    const RunOutput out = prepared.run();
    const TrainingModel& alexnet = params.communication->models[1];
    double chunks = 0, gradient = 0;
    for (std::int64_t p : alexnet.parameters) {
      chunks += p > 0 ? 1 : 0;
      gradient += static_cast<double>(p * alexnet.bytes_per_parameter);
    }
    ASSERT_GT(chunks, 0);
    const double sent = static_cast<double>(out.info.network.transfers_delivered);
    EXPECT_EQ(out.info.network.transfers_failed, 0u);
    EXPECT_EQ(estimate.total_transfers(), 2 * chunks * sync_transfers_per_chunk(sync, 5));
    if (sync == "ps") {
      // A lower bound: it leaves out the push and pull of the colocated server, and a layer
      // larger than bigarray_bound is sliced over every server (more transfers).
      EXPECT_LT(estimate.total_transfers(), sent);
    } else {
      EXPECT_EQ(estimate.total_transfers(), sent);
    }
    EXPECT_EQ(out.results.metrics().at("gradient_bytes_delivered"),
              2 * gradient * sync_bytes_per_gradient_byte(sync, 5));
    EXPECT_EQ(out.results.metrics().at("detailed_iterations"), 2);
  }
}

// Pipeline planners (docs/cluster.md, "Pipeline-parallel jobs"): a model's `pipeline.planner`,
// a listed job's `planner` overriding it, and every bad value or combination named by its path.
TEST(ClusterScenario, PipelinePlannersComeFromTheModelOrTheJobAndAreCheckedByPath) {
  const std::filesystem::path file = kSource / "workloads/scenarios/cluster_philly_fat_tree.json";
  std::ifstream in(file);
  json d = json::parse(in);
  const Registries registries = mlsim::test::registries_with(register_cluster);
  d["workload"]["training"]["models"][0]["pipeline"] =
      json::parse(R"({"planner": "dp", "schedule": "1f1b", "micro_batches": 2})");
  d["workload"]["jobs"] = json::parse(R"({"source": "list", "list": [
      {"submit": "0s", "gpus": 12, "model": "vgg16_ring_fifo", "iterations": 1},
      {"submit": "0s", "gpus": 12, "model": "vgg16_ring_fifo", "iterations": 1,
       "planner": "pipedream"},
      {"submit": "0s", "gpus": 12, "model": "vgg16_ring_fifo", "iterations": 1,
       "planner": "exact"},
      {"submit": "0s", "gpus": 8, "model": "vgg16_ring_fifo", "iterations": 1,
       "planner": "even", "stages": 2},
      {"submit": "0s", "gpus": 8, "model": "vgg16_ring_fifo", "iterations": 1, "stages": 1}]})");
  const auto m = mlsim::test::run_json(d, registries, file).results.metrics();
  EXPECT_EQ(m.at("jobs_finished"), 5);
  EXPECT_EQ(m.at("detailed_jobs_simulated"), 5);
  EXPECT_EQ(m.at("detailed_pipeline_jobs"), 4);
  EXPECT_EQ(m.at("detailed_jobs_stalled"), 0);

  const auto expect_error = [&](const json& doc, const std::string& text) {
    const std::string e = mlsim::test::prepare_error(doc, registries, file);
    EXPECT_NE(e.find(text), std::string::npos) << e;
  };
  json e = d;
  e["workload"]["training"]["models"][0]["pipeline"]["planner"] = "greedy";
  expect_error(e, "workload.training.models[0].pipeline.planner: unknown planner \"greedy\"");
  e = d;
  e["workload"]["training"]["models"][0]["pipeline"]["stages"] = 2;  // the planner's choice
  expect_error(e, "workload.training.models[0].pipeline.stages");
  e = d;
  e["workload"]["training"]["models"][0]["pipeline"]["planner"] = "even";  // needs stages
  expect_error(e, "workload.training.models[0].pipeline.stages");
  e = d;
  e["workload"]["training"]["models"][0]["pipeline"] =
      json::parse(R"({"stages": 2, "schedule": "1f1b", "micro_batches": 2, "straight": true})");
  expect_error(e, "workload.training.models[0].pipeline.straight");
  e = d;
  e["workload"]["jobs"]["list"][1]["planner"] = "rl";
  expect_error(e, "workload.jobs.list[1].planner: unknown planner \"rl\"");
  e = d;
  e["workload"]["jobs"]["list"][0]["stages"] = 2;  // the model's dp planner chooses them
  expect_error(e, "workload.jobs.list[0].stages");
  e = d;
  e["workload"]["jobs"]["list"][3].erase("stages");  // even, and the model gives no count
  expect_error(e, "workload.jobs.list[3].planner");
  e = d;
  e["workload"]["jobs"]["list"][0]["model"] = "resnet50_ring_bytescheduler";  // no pipeline
  e["workload"]["jobs"]["list"][0]["planner"] = "dp";
  expect_error(e, "workload.jobs.list[0].planner");

  // pipeline.memory: models/pipeline's keys and checks, at their path under the model.
  const std::string at = "workload.training.models[0].pipeline.memory";
  // Without the listed job that asks for the even split (an error under a limit, below).
  auto with_memory = [&](const json& memory) {
    json doc = d;
    doc["workload"]["training"]["models"][0]["pipeline"]["memory"] = memory;
    doc["workload"]["jobs"]["list"].erase(3);
    return doc;
  };
  // The catalog's GPU memory (the pool's V100s: 32 GiB) holds VGG16's stages: the four jobs
  // finish.
  EXPECT_EQ(mlsim::test::prepare_error(with_memory({{"constraint", true}}), registries, file),
            "no error");
  const auto fit = mlsim::test::run_json(with_memory({{"constraint", true}}), registries, file)
                       .results.metrics();
  EXPECT_EQ(fit.at("jobs_finished"), 4);
  EXPECT_EQ(fit.at("detailed_pipeline_jobs"), 3);
  EXPECT_EQ(fit.at("detailed_jobs_no_memory_fit"), 0);
  expect_error(with_memory({{"constraint", true}, {"capacity", "1MB"}}),
               at + ".capacity: no configuration of the model's 40 layers has every stage fit");
  expect_error(with_memory({{"constraint", true}, {"colour", 1}}), at + ".colour");
  expect_error(with_memory({{"capacity", "1GB"}}), at + ".constraint");
  expect_error(with_memory({{"constraint", false}, {"capacity", "1GB"}}),
               at + ".capacity: used only with " + at + ".constraint true");
  expect_error(with_memory({{"constraint", true}, {"optimizer_state_factor", -1}}),
               at + ".optimizer_state_factor");
  e = with_memory({{"constraint", true}});
  e["workload"]["training"]["models"][0]["pipeline"] =
      json::parse(R"({"stages": 2, "schedule": "1f1b", "micro_batches": 2,
                      "memory": {"constraint": true}})");
  expect_error(e, at + ": only with a planner");
  e = with_memory({{"constraint", true}});  // a listed job's even split would ignore the limit
  e["workload"]["jobs"]["list"][0]["planner"] = "even";
  e["workload"]["jobs"]["list"][0]["stages"] = 2;
  expect_error(e, "workload.jobs.list[0].planner: model 'vgg16_ring_fifo' plans under a memory");
}
