// Reading the model's scenario sections: defaults from the switch spec and topology, job
// expansion, Poisson and trace arrivals, GPU speed from the catalog, and errors that name the
// JSON path.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>

#include "models/ina/arrival_trace.hpp"
#include "models/ina/ina_cluster.hpp"
#include "models/ina/ina_model.hpp"
#include "models/ina/register.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "sim_core/network/topology_spec.hpp"
#include "tests/support/host_gpus.hpp"
#include "tests/support/run_json.hpp"

using namespace mlsim;
using namespace mlsim::ina;
using nlohmann::json;

namespace {

const std::filesystem::path kSource = MLSIM_SOURCE_DIR;

HardwareCatalog shipped_hardware() {
  HardwareCatalog catalog;
  for (const char* file : {"workloads/hardware/switches.json", "workloads/hardware/gpus.json"}) {
    std::ifstream in(kSource / file);
    json doc = json::parse(in);
    JsonReader hw(doc["hardware"], "hardware");
    catalog.add_from_json(hw);
  }
  return catalog;
}

Topology star(int hosts, const char* bw = "100Gbps") {
  return build_topology(StarSpec{hosts, LinkSpec{parse_bandwidth(bw), Time::ns(500)}});
}

// `gpus[i]` on host i (the last one on the hosts after it), as topology.hardware would put them.
ClusterParams parse(json doc, const Topology& topology,
                    const NetworkSpec& network = NetworkSpec{},  // default: backend not named
                    const std::vector<std::string>& gpus = {"V100-SXM2-32GB"}) {
  HardwareCatalog hw = shipped_hardware();
  const NodeHardware node_hardware = mlsim::test::host_gpus(topology, hw, gpus);
  JsonReader system(doc["system"], "system");
  system.ignore("model");  // the runner's key
  JsonReader workload(doc["workload"], "workload");
  ClusterParams p = parse_cluster_params(system, workload, hw, topology, node_hardware, network,
                                         kSource / "workloads/scenarios", 7);
  system.finish();
  workload.finish();
  return p;
}

// Parsing `doc` on `t` over `n` is refused at `path` with a message containing `words`.
void expect_parse_error(json doc, const Topology& t, const NetworkSpec& n, const std::string& path,
                        const std::string& words) {
  try {
    parse(std::move(doc), t, n);
    ADD_FAILURE() << "no error for " << path;
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), path) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

json minimal() {
  return json::parse(R"({
    "system": {"policy": "atp", "switch": "tofino-32x100g-atp"},
    "workload": {"profiled_on": "V100-SXM2-32GB",
                 "jobs": [{"model": "alexnet", "profile": "../dnn/pipedream/alexnet/graph.txt",
                           "workers": 2, "iterations": 3, "count": 3}],
                 "arrivals": {"process": "poisson", "mean_interarrival": "10ms"}}})");
}

}  // namespace

TEST(InaScenario, DefaultsComeFromTheSwitchAndTopology) {
  const ClusterParams p = parse(minimal(), star(9));
  EXPECT_EQ(p.policy, PolicyKind::kAtp);
  EXPECT_EQ(p.aggregator_memory.count, 20000 * 248);  // the ATP switch's pool
  EXPECT_EQ(p.switch_latency, Time::ns(400));
  EXPECT_EQ(p.link_latency, Time::ns(500));
  EXPECT_DOUBLE_EQ(p.link_bandwidth.bits_per_s(), 100e9);
  EXPECT_EQ(p.atp_values_per_packet, 62);
  EXPECT_EQ(p.switchml_values_per_packet, 256);
  EXPECT_EQ(p.loss_rate, 0.0);  // lossless unless asked
  EXPECT_EQ(p.seed, 7u);        // the scenario seed also seeds the loss stream
  ASSERT_EQ(p.jobs.size(), 3u);
  EXPECT_EQ(p.jobs[0].arrival, Time::zero());
  EXPECT_GT(p.jobs[1].arrival, Time::zero());
  EXPECT_GT(p.jobs[2].arrival, p.jobs[1].arrival);
  EXPECT_EQ(p.jobs[0].profile, p.jobs[2].profile);  // read once
}

TEST(InaScenario, ErrorsNameThePath) {
  auto expect_error = [](json doc, const Topology& t, const std::string& path) {
    try {
      parse(std::move(doc), t);
      ADD_FAILURE() << "no error for " << path;
    } catch (const InputError& e) {
      EXPECT_EQ(e.path(), path) << e.what();
    }
  };
  json d = minimal();
  d["system"]["policy"] = "fifo";
  expect_error(d, star(9), "system.policy");
  d = minimal();
  d["system"]["colour"] = "red";
  expect_error(d, star(9), "system.colour");
  d = minimal();
  d["system"]["atp"] = {{"values_per_packet", 0}};
  expect_error(d, star(9), "system.atp.values_per_packet");
  d = minimal();
  d["workload"]["jobs"][0]["profile"] = "missing.txt";
  expect_error(d, star(9), "workload.jobs[0].profile");
  d = minimal();
  d["workload"]["jobs"][0]["workers"] = 33;
  expect_error(d, star(9), "workload.jobs[0].workers");
  expect_error(minimal(), star(8), "topology.hosts");  // 3 x (2 workers + PS) = 9
  expect_error(minimal(), star(9, "400Gbps"), "topology");
  d = minimal();
  // Stragglers moved to the events section (host speeds); the old key says so.
  d["workload"]["jobs"][0]["worker_slowdown"] = {1.0, 1.5};
  expect_error(d, star(9), "workload.jobs[0].worker_slowdown");
  d = minimal();
  d["system"]["loss_rate"] = 0.6;  // at most 0.5 per packet per hop
  expect_error(d, star(9), "system.loss_rate");
  d = minimal();
  d["system"]["switch"] = "tofino-32x100g";  // no aggregator pool: memory must be given
  expect_error(d, star(9), "system.aggregator_memory");
  d = minimal();
  d["system"]["dsa"] = {{"priority", "layer"}};  // tensor | job
  expect_error(d, star(9), "system.dsa.priority");
}

TEST(InaScenario, DsaPriorityIsPerTensorUnlessTheScenarioSaysJob) {
  json d = minimal();
  d["system"]["policy"] = "dsa";
  EXPECT_EQ(parse(d, star(9)).dsa_priority, DsaPriorityKind::kTensor);
  d["system"]["dsa"] = {{"priority", "job"}};
  EXPECT_EQ(parse(d, star(9)).dsa_priority, DsaPriorityKind::kJob);
}

void expect_error(json doc, const Topology& t, const std::string& path,
                  const std::string& message_part = "") {
  try {
    parse(std::move(doc), t);
    ADD_FAILURE() << "no error for " << path;
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), path) << e.what();
    EXPECT_NE(std::string(e.what()).find(message_part), std::string::npos) << e.what();
  }
}

// The workers' GPU is their host's (topology.hardware), moved from the profiling GPU by the
// platform (sim_core/hardware/profile_scaling.hpp): V100-SXM2 FP32 15.7 TFLOPS and 900 GB/s,
// A100-SXM4-40GB 19.5 TFLOPS and 1555 GB/s (datasheets, workloads/hardware/gpus.json). By hand
// for AlexNet's node10 (Conv2d, forward 4.423 ms, backward 7.197 ms, output activation
// 44,302,336 B, parameters 3,539,968 B): forward moves 47,842,304 B, 0.0531581 ms at 900 GB/s,
// 1.20186% of its time, so on the A100 4.423 x (0.0120186 x 900/1555 + 0.9879814 x 15.7/19.5)
// = 3.549050 ms; backward moves twice the bytes, 0.1063162 ms, 1.47723% of 7.197 ms: 5.770443 ms.
TEST(InaScenario, HeterogeneousWorkersTakeTheirHostsGpu) {
  // 3 jobs x (2 workers + PS) on 9 hosts: hosts 0-3 V100 SXM2 (the profiling GPU), 4-8 A100.
  // Job 0: hosts 0, 1 (V100); job 1: hosts 3 (V100) and 4 (A100); job 2: hosts 6, 7 (A100).
  const std::vector<std::string> gpus = {"V100-SXM2-32GB", "V100-SXM2-32GB", "V100-SXM2-32GB",
                                         "V100-SXM2-32GB", "A100-SXM4-40GB"};
  const ClusterParams p = parse(minimal(), star(9), NetworkSpec{}, gpus);
  const DnnProfile profile =
      read_pipedream_graph(kSource / "workloads/dnn/pipedream/alexnet/graph.txt");
  std::size_t node10 = 0, index = 0;
  for (const auto& l : profile.layers) {
    if (l.is_input) continue;  // not in the plan (include_input_layers false)
    if (l.id == "node10") node10 = index;
    ++index;
  }
  ASSERT_EQ(p.jobs.size(), 3u);
  for (const JobSpec& j : p.jobs) ASSERT_EQ(j.worker_times.size(), 2u);
  auto ms = [](Time t) { return t.seconds() * 1e3; };
  const OpTimes v100 = (*p.jobs[0].worker_times[0])[node10];
  EXPECT_NEAR(ms(v100.forward), 4.423, 1e-9);  // as profiled
  EXPECT_NEAR(ms(v100.backward), 7.197, 1e-9);
  const OpTimes a100 = (*p.jobs[1].worker_times[1])[node10];
  EXPECT_NEAR(ms(a100.forward), 3.549050, 1e-6);
  EXPECT_NEAR(ms(a100.backward), 5.770443, 1e-6);
  EXPECT_EQ(p.jobs[1].worker_times[0], p.jobs[0].worker_times[0]);  // one table per GPU type
  EXPECT_EQ(p.jobs[2].worker_times[0], p.jobs[1].worker_times[1]);
  EXPECT_EQ(p.jobs[0].gpus, "V100-SXM2-32GB");
  EXPECT_EQ(p.jobs[1].gpus, "A100-SXM4-40GB+V100-SXM2-32GB");
}

TEST(InaScenario, TheOldGpuKeysNameWhereTheGpuIsDeclaredNow) {
  json d = minimal();
  d["workload"]["jobs"][0]["gpu"] = "A100-SXM4-40GB";
  expect_error(d, star(9), "workload.jobs[0].gpu", "topology.hardware");
  d = minimal();
  d["workload"]["jobs"][0]["compute_scale"] = 0.5;
  expect_error(d, star(9), "workload.jobs[0].compute_scale", "topology.hardware");
  // The profiling GPU is never guessed.
  d = minimal();
  d["workload"].erase("profiled_on");
  expect_error(d, star(9), "workload.profiled_on");
  d = minimal();
  d["workload"]["profiled_on"] = "Z80";
  expect_error(d, star(9), "workload.profiled_on");
  // A job's own profiling GPU.
  d = minimal();
  d["workload"]["jobs"][0]["profiled_on"] = "Z80";
  expect_error(d, star(9), "workload.jobs[0].profiled_on");
  // Hosts without a GPU: the worker's place is named.
  HardwareCatalog hw = shipped_hardware();
  d = minimal();
  JsonReader system(d["system"], "system");
  system.ignore("model");
  JsonReader workload(d["workload"], "workload");
  try {
    parse_cluster_params(system, workload, hw, star(9), NodeHardware{}, NetworkSpec{},
                         kSource / "workloads/scenarios", 7);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ina job 0 worker 0"), std::string::npos) << e.what();
  }
}

// Arrivals from the committed Philly excerpt (workloads/traces/philly_first12.csv), as seconds
// after the first submit, times 1e-6: 2017-09-04 10:30:41 -> 0; 2017-09-07 03:58:57 is 2 d
// 17:28:16 = 235,696 s later -> 0.235696 s; 2017-09-07 09:57:50 is 2 d 23:27:09 = 257,229 s ->
// 0.257229 s. Worker counts from num_gpus: 8, 1, 1 (3 jobs need 9 + 2 + 2 = 13 hosts).
TEST(InaScenario, ArrivalsFromAPhillyTraceExcerpt) {
  json d = minimal();
  d["workload"]["arrivals"] = {
      {"process", "trace"},           {"file", "../traces/philly_first12.csv"},
      {"time_column", "timestamp"},   {"time_format", "datetime"},
      {"workers_column", "num_gpus"}, {"time_scale", 1e-6}};
  ClusterParams p = parse(d, star(13));
  ASSERT_EQ(p.jobs.size(), 3u);
  EXPECT_EQ(p.jobs[0].arrival, Time::zero());
  EXPECT_EQ(p.jobs[1].arrival, Time::ns(235'696'000));
  EXPECT_EQ(p.jobs[2].arrival, Time::ns(257'229'000));
  EXPECT_EQ(p.jobs[0].workers, 8);
  EXPECT_EQ(p.jobs[1].workers, 1);
  // skip_rows shifts the window: rows 2..4, first one at 0.
  d["workload"]["arrivals"]["skip_rows"] = 1;
  p = parse(d, star(13));
  EXPECT_EQ(p.jobs[0].arrival, Time::zero());
  EXPECT_EQ(p.jobs[1].arrival, Time::ns(257'229'000 - 235'696'000));
  EXPECT_EQ(p.jobs[0].workers, 1);
  // Too few rows, an unknown column, a job with its own arrival: errors name the path.
  d["workload"]["arrivals"]["skip_rows"] = 10;
  expect_error(d, star(13), "workload.arrivals.file", "2 arrivals");
  d["workload"]["arrivals"]["skip_rows"] = 0;
  d["workload"]["arrivals"]["workers_column"] = "gpus";
  expect_error(d, star(13), "workload.arrivals.file", "no column 'gpus'");
  d["workload"]["arrivals"].erase("workers_column");
  d["workload"]["jobs"][0]["arrival"] = "1s";
  expect_error(d, star(13), "workload.jobs");
  d = minimal();
  d["workload"]["arrivals"] = {{"process", "trace"}, {"file", "missing.csv"}};
  expect_error(d, star(9), "workload.arrivals.file", "missing.csv: not found");
  // Issue 17, defect 8: a folder given as the trace was reported as an "empty file".
  d["workload"]["arrivals"]["file"] = ".";
  expect_error(d, star(9), "workload.arrivals.file", "is a folder, not a file");
}

// A hand-written trace in seconds, unsorted: 5, 1.5, 3 -> 0, 1.5, 3.5 after sorting; a malformed
// value names its line.
TEST(InaScenario, ArrivalTraceInSecondsIsSortedAndChecked) {
  const auto file = std::filesystem::temp_directory_path() / "mlsim_ina_trace_test.csv";
  {
    std::ofstream out(file);
    out << "job,arrival_s\na,5\nb,1.5\nc,3\n";
  }
  ArrivalTraceOptions o;
  o.file = file;
  auto t = read_arrival_trace(o, 10, "w");
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].at, Time::zero());
  EXPECT_EQ(t[1].at, Time::ms(1500));
  EXPECT_EQ(t[2].at, Time::ms(3500));
  EXPECT_EQ(t[0].line, 3u);
  EXPECT_EQ(read_arrival_trace(o, 2, "w").size(), 2u);
  {
    std::ofstream out(file);
    out << "job,arrival_s\na,5\nb,soon\n";
  }
  try {
    read_arrival_trace(o, 10, "w");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "w");
    EXPECT_NE(std::string(e.what()).find("mlsim_ina_trace_test.csv:3: 'soon'"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove(file);
}

// The full Philly trace in ../shared/data: sorted arrivals starting at the excerpt's first rows.
TEST(InaScenario, FullPhillyTraceReads) {
  const std::filesystem::path file =
      std::filesystem::path(MLSIM_SHARED_DATA_DIR) / "cluster_traces/philly/philly.csv";
  if (!std::filesystem::exists(file))
    GTEST_SKIP() << file << " is absent (../shared/data not available)";
  ArrivalTraceOptions o;
  o.file = file;
  o.time_column = "timestamp";
  o.datetime = true;
  o.workers_column = "num_gpus";
  const auto t = read_arrival_trace(o, 100'000, "w");
  EXPECT_EQ(t.size(), 82'247u);
  EXPECT_EQ(t[0].at, Time::zero());
  EXPECT_EQ(t[1].at, Time::s(235'696));  // as in the excerpt
  EXPECT_EQ(t[0].workers, 8);
  EXPECT_TRUE(std::is_sorted(t.begin(), t.end(), [](const TraceArrival& a, const TraceArrival& b) {
    return a.at < b.at;
  }));
}

// The shipped study scenario parses and fits its switch.
TEST(InaScenario, ShippedStudyScenarioParses) {
  std::ifstream in(kSource / "workloads/scenarios/ina_dsa_study.json");
  json doc = json::parse(in);
  JsonReader topo(doc["topology"], "topology");
  const ClusterParams p = parse(doc, build_topology(parse_topology_spec(topo)));
  EXPECT_EQ(p.policy, PolicyKind::kDsa);
  EXPECT_EQ(p.jobs.size(), 6u);
  EXPECT_EQ(p.aggregator_memory.count, 256 * 1024);
}

// Which data path carries the switch program, and the backends each one accepts: the packet path
// refuses a backend the scenario names (it would be ignored); the network path needs a backend
// that can end transfers at a switch node, and on a topology with several switches the name of
// the one hosting the program.
TEST(InaScenario, DataPathAndBackendAgreeOrTheScenarioIsRefused) {
  const auto expect_error = expect_parse_error;
  NetworkSpec named_flow;
  named_flow.backend = "flow";
  named_flow.backend_explicit = true;
  named_flow.hosts_switch_programs = true;
  EXPECT_EQ(parse(minimal(), star(9)).data_path, DataPathKind::kPacket);  // the default
  expect_error(minimal(), star(9), named_flow, "network.backend",
               "packet data path (system.data_path \"packet\", the default) moves packets over "
               "its own links and cannot use the \"flow\" backend");

  json d = minimal();
  d["system"]["data_path"] = "network";
  EXPECT_EQ(parse(d, star(9), named_flow).data_path, DataPathKind::kNetwork);
  NetworkSpec no_switch_end = named_flow;
  no_switch_end.backend = "somebackend";
  no_switch_end.hosts_switch_programs = false;
  expect_error(d, star(9), no_switch_end, "network.backend",
               "\"somebackend\" backend cannot end transfers at a switch node");

  // Two racks: leaf0 and leaf1 with 5 hosts each, one spine; the program needs a named switch.
  const Topology racks = build_topology(LeafSpineSpec{
      2, 5, 1, 1.0, LinkSpec{parse_bandwidth("100Gbps"), Time::ns(500)}, Time::ns(500)});
  expect_error(d, racks, named_flow, "system.switch_node", "3 switches");
  d["system"]["switch_node"] = "leaf9";
  expect_error(d, racks, named_flow, "system.switch_node", "not a switch");
  d["system"]["switch_node"] = "leaf0";
  const ClusterParams p = parse(d, racks, named_flow);
  EXPECT_EQ(p.switch_node, "leaf0");
  d = minimal();
  d["system"]["switch_node"] = "leaf0";  // only the network path reads it
  expect_error(d, star(9), NetworkSpec{}, "system.switch_node", "");
}

// Two-level aggregation (system.levels): a known value, only on the network path, only for ATP
// and DSA (SwitchML aggregates at one switch), without loss, and only where some job has
// workers under another ToR than the program's switch; each refusal names its path.
TEST(InaScenario, TwoLevelAggregationIsCheckedByPath) {
  const auto expect_error = expect_parse_error;
  NetworkSpec flow;
  flow.backend = "flow";
  flow.backend_explicit = true;
  flow.hosts_switch_programs = true;
  const Topology racks = build_topology(LeafSpineSpec{
      2, 5, 1, 1.0, LinkSpec{parse_bandwidth("100Gbps"), Time::ns(500)}, Time::ns(500)});
  json d = minimal();
  EXPECT_FALSE(parse(d, star(9)).two_level);  // one switch by default
  d["system"]["levels"] = "three";
  expect_error(d, star(9), NetworkSpec{}, "system.levels", "\"one_switch\" (the default), ");
  d["system"]["levels"] = "two_level";  // on the packet path
  expect_error(d, star(9), NetworkSpec{}, "system.levels", "network data path");
  d["system"]["data_path"] = "network";
  d["system"]["switch_node"] = "leaf0";
  EXPECT_TRUE(parse(d, racks, flow).two_level);
  json sml = d;
  sml["system"]["policy"] = "switchml";
  expect_error(sml, racks, flow, "system.levels", "SwitchML aggregates at one switch");
  sml = d;
  sml["workload"]["jobs"][0]["policy"] = "switchml";
  expect_error(sml, racks, flow, "workload.jobs[0].policy", "SwitchML aggregates at one switch");
  json lossy = d;
  lossy["system"]["loss_rate"] = 0.01;
  expect_error(lossy, racks, flow, "system.loss_rate", "not modelled");
  // The root: the program's switch ("two_level"), or each job's PS's ToR.
  EXPECT_FALSE(parse(d, racks, flow).root_at_ps_tor);
  json rooted = d;
  rooted["system"]["levels"] = "two_level_ps_tor";
  EXPECT_TRUE(parse(rooted, racks, flow).two_level);
  EXPECT_TRUE(parse(rooted, racks, flow).root_at_ps_tor);
  rooted["system"]["policy"] = "switchml";
  expect_error(rooted, racks, flow, "system.levels", "SwitchML aggregates at one switch");
  rooted = d;
  rooted["system"]["levels"] = "two_level_spine";
  expect_error(rooted, racks, flow, "system.levels", "\"two_level_ps_tor\" (root: each job's");

  // No racks: the built cluster finds that no job has a worker outside the root's rack (all 9
  // hosts under leaf0 of racks of 10; the one switch of a star).
  const auto build_error = [&](const Topology& t, json doc) -> std::string {
    const ClusterParams p = parse(std::move(doc), t, flow);
    Engine engine;
    FluidNetwork network(engine, t, Sharing::kMaxMin);
    try {
      InaCluster cluster(engine, p, &network, &t);
      return "no error";
    } catch (const InputError& e) {
      EXPECT_EQ(e.path(), "system.levels") << e.what();
      return e.what();
    }
  };
  const Topology wide_racks = build_topology(LeafSpineSpec{
      2, 10, 1, 1.0, LinkSpec{parse_bandwidth("100Gbps"), Time::ns(500)}, Time::ns(500)});
  EXPECT_NE(build_error(wide_racks, d).find("two_level needs racks"), std::string::npos);
  json on_star = d;
  on_star["system"].erase("switch_node");
  EXPECT_NE(build_error(star(9), on_star).find("two_level needs racks"), std::string::npos);
  EXPECT_EQ(build_error(racks, d), "no error");
  // Rooted at the PS's ToR: racks of 10 put every job's workers under its PS's ToR; racks of 5
  // put job 1's workers (hosts 3-4) under leaf0 and its PS (host 5) under leaf1.
  json ps_tor = d;
  ps_tor["system"]["levels"] = "two_level_ps_tor";
  EXPECT_NE(build_error(wide_racks, ps_tor).find("every job's workers sit under its PS's ToR"),
            std::string::npos);
  EXPECT_EQ(build_error(racks, ps_tor), "no error");
}

// Host costs are read as the collective layer reads them; only the PS summing rate applies.
TEST(InaScenario, PsSummingRateFromTheHostCosts) {
  json d = minimal();
  EXPECT_EQ(parse(d, star(9)).ps_aggregation.bytes_per_s, 0);  // free by default
  d["system"]["host"] = {{"ps_aggregation", "12GB/s"}};
  EXPECT_DOUBLE_EQ(parse(d, star(9)).ps_aggregation.bytes_per_s, 12e9);
  auto expect_error = [](json doc, const std::string& path) {
    try {
      parse(std::move(doc), star(9));
      ADD_FAILURE() << "no error for " << path;
    } catch (const InputError& e) {
      EXPECT_EQ(e.path(), path) << e.what();
    }
  };
  d["system"]["host"] = {{"message_overhead", "10us"}};
  expect_error(d, "system.host.message_overhead");
  d["system"]["host"] = {{"per_byte_ns", 0.1}};
  expect_error(d, "system.host.per_byte_ns");
  d["system"]["host"] = {{"ps_aggregation", "12GB/s"}};
  d["system"]["policy"] = "switchml";
  expect_error(d, "system.host.ps_aggregation");
  d["system"]["host"] = {{"colour", 1}};
  expect_error(d, "system.host.colour");
}

// The two-rack study: the program on leaf0, the flow backend named, the study's six jobs.
TEST(InaScenario, ShippedTwoRackScenarioParses) {
  std::ifstream in(kSource / "workloads/scenarios/ina_dsa_two_racks.json");
  json doc = json::parse(in);
  JsonReader topo(doc["topology"], "topology");
  NetworkSpec flow;
  flow.backend = "flow";
  flow.backend_explicit = true;
  flow.hosts_switch_programs = true;
  const ClusterParams p = parse(doc, build_topology(parse_topology_spec(topo)), flow);
  EXPECT_EQ(p.data_path, DataPathKind::kNetwork);
  EXPECT_EQ(p.switch_node, "leaf0");
  EXPECT_EQ(p.policy, PolicyKind::kDsa);
  EXPECT_EQ(p.jobs.size(), 6u);
}

// The events section through the runner: host speeds slow the workers that run on those hosts.
TEST(InaScenario, HostSpeedsFromTheEventsSectionSlowTheirWorkers) {
  // One AlexNet job of 2 workers (hosts 0, 1; its PS on host 2), 1 iteration. Compute dominates
  // AlexNet on 100 Gbps (communication intensity 0.28), so worker 1 at half speed makes the job
  // take more than 1.5x as long; a slow host that runs no worker (host 3) changes nothing.
  const Registries registries = mlsim::test::registries_with(register_ina);
  json doc = minimal();
  doc["name"] = "ina_events";
  doc["include"] = json::array({"../hardware/switches.json", "../hardware/gpus.json"});
  doc["topology"] = {{"kind", "star"},
                     {"hosts", 4},
                     {"link", {{"bandwidth", "100Gbps"}, {"latency", "500ns"}}},
                     {"hardware", {{"gpu", "V100-SXM2-32GB"}}}};
  doc["system"]["model"] = "ina";
  doc["workload"]["jobs"][0]["count"] = 1;
  doc["workload"]["jobs"][0]["iterations"] = 1;
  const double plain = mlsim::test::run_json(doc, registries).info.simulated_time.seconds();
  doc["events"] = json::parse(R"({"list": [{"host": 1, "speed": 0.5}]})");
  const double slowed = mlsim::test::run_json(doc, registries).info.simulated_time.seconds();
  EXPECT_GT(slowed, 1.5 * plain) << plain;
  doc["events"] = json::parse(R"({"list": [{"host": 3, "speed": 0.5}]})");
  EXPECT_DOUBLE_EQ(mlsim::test::run_json(doc, registries).info.simulated_time.seconds(), plain);
}

// The shipped two-rack scenario runs with its link failures from the events section (one uplink
// of leaf1 down from 2.5 s to 5 s, both from 3 s to 3.02 s). Shrunk for the test suite: 2
// iterations per job and bursts of 3968 values (64 ATP packets, 15 SwitchML packets) instead of
// 992, which keeps the arrivals (seed 1: 0 to 2.10 s) and puts job 5 (VGG16, 2.10 s to about
// 3.4 s) in rack 1 across both failures: about 3 s of CPU. Every job finishes (the cut is
// repaired), rack 1's bursts that found no route were resent, and every result is right.
TEST(InaScenario, ShippedTwoRackScenarioRunsThroughItsLinkFailures) {
  const Registries registries = mlsim::test::registries_with(register_ina);
  std::ifstream in(kSource / "workloads/scenarios/ina_dsa_two_racks.json");
  json doc = json::parse(in);
  ASSERT_EQ(doc["events"]["list"].size(), 4u);
  doc["system"]["burst_values"] = 3968;
  for (json& j : doc["workload"]["jobs"]) j["iterations"] = 2;
  const RunOutput run = mlsim::test::run_json(doc, registries);
  const auto& m = run.results.metrics();
  EXPECT_EQ(m.at("jobs_finished"), 6);
  EXPECT_EQ(m.at("jobs_failed"), 0);
  EXPECT_GT(m.at("undelivered_packets"), 0);  // the cut left rack 1 without a route
  EXPECT_GT(m.at("timeouts"), 0);
  EXPECT_EQ(m.at("wrong_sums"), 0);
  EXPECT_EQ(m.at("duplicate_results"), 0);
  // Job 5 was running through both failures.
  EXPECT_LT(run.results.details()["jobs"].back()["arrival_s"].get<double>(), 2.5);
  EXPECT_GT(run.results.details()["jobs"].back()["finish_s"].get<double>(), 3.02);
  // Without the events nothing is undelivered.
  doc["events"]["list"] = json::array();
  doc["workload"]["jobs"] = json::array({doc["workload"]["jobs"][0]});  // one job suffices
  const RunOutput plain = mlsim::test::run_json(doc, registries);
  EXPECT_EQ(plain.results.metrics().at("undelivered_packets"), 0);
}

// A synchronous job waits for its slowest worker, so DSA ranks a job by the slowest worker's
// compute. Three AlexNet jobs, one after another (arrivals 0, 1 and 2 s; one iteration takes
// well under 1 s): job 0 on two V100 hosts, job 1 on an A100 (its worker 0) and a V100, job 2 on
// two A100s.
// Their communication is the same (one profile), so job 1's intensity equals job 0's (its V100
// is the slowest), and job 2's is job 0's times (compute on the V100 / compute on the A100), the
// sums of their layer tables; the A100 being faster, job 2 is the more communication-intensive.
TEST(InaScenario, AJobsIntensityIsItsSlowestWorkers) {
  const Registries registries = mlsim::test::registries_with(register_ina);
  json doc = json::parse(R"({
    "name": "ina_mixed",
    "include": ["../hardware/switches.json", "../hardware/gpus.json"],
    "topology": {"kind": "star", "hosts": 9, "link": {"bandwidth": "100Gbps", "latency": "500ns"},
                 "hardware": {"gpu": "V100-SXM2-32GB",
                              "groups": [{"hosts": [3, 5, 6, 7, 8], "gpu": "A100-SXM4-40GB"}]}},
    "system": {"model": "ina", "policy": "dsa", "switch": "tofino-32x100g-atp",
               "burst_values": 992},
    "workload": {"profiled_on": "V100-SXM2-32GB",
                 "jobs": [{"model": "a", "profile": "../dnn/pipedream/alexnet/graph.txt",
                           "workers": 2, "iterations": 1, "arrival": "0s"},
                          {"model": "b", "profile": "../dnn/pipedream/alexnet/graph.txt",
                           "workers": 2, "iterations": 1, "arrival": "1s"},
                          {"model": "c", "profile": "../dnn/pipedream/alexnet/graph.txt",
                           "workers": 2, "iterations": 1, "arrival": "2s"}]}})");
  const RunOutput r = mlsim::test::run_json(doc, registries);
  std::map<std::string, double> intensity;
  std::map<std::string, std::string> gpus;
  for (const json& j : r.results.details()["jobs"]) {
    intensity[j["model"].get<std::string>()] = j["communication_intensity"].get<double>();
    gpus[j["model"].get<std::string>()] = j["gpus"].get<std::string>();
  }
  ASSERT_EQ(intensity.size(), 3u);
  EXPECT_EQ(gpus["b"], "A100-SXM4-40GB+V100-SXM2-32GB");
  EXPECT_DOUBLE_EQ(intensity["b"], intensity["a"]);
  // The two GPUs' iteration compute, from the tables the workers run.
  const ClusterParams p = parse(
      minimal(), star(9), NetworkSpec{},
      {"V100-SXM2-32GB", "V100-SXM2-32GB", "V100-SXM2-32GB", "V100-SXM2-32GB", "A100-SXM4-40GB"});
  auto compute = [](const LayerTimes& t) {
    Time sum;
    for (const OpTimes& op : t) sum += op.forward + op.backward;
    return sum.seconds();
  };
  const double v100 = compute(*p.jobs[0].worker_times[0]);
  const double a100 = compute(*p.jobs[2].worker_times[0]);
  EXPECT_LT(a100, v100);
  EXPECT_NEAR(intensity["c"] / intensity["a"], v100 / a100, 1e-12);
}
