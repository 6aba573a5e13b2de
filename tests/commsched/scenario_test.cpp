// Reading the commsched model's scenario sections (defaults by mode, errors that name the JSON
// path) and running the shipped scenarios end to end through the registry.
#include <gtest/gtest.h>

#include "sim_core/hardware/dnn_profile.hpp"

#include <fstream>

#include "cli/registry.hpp"
#include "models/commsched/commsched_model.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "sim_core/run/runner.hpp"
#include "sim_core/run/scenario.hpp"
#include "tests/support/host_gpus.hpp"

using namespace mlsim;
using namespace mlsim::commsched;
using nlohmann::json;

namespace {

const std::filesystem::path kSource = MLSIM_SOURCE_DIR;
const std::filesystem::path kScenarios = kSource / "workloads/scenarios";

HardwareCatalog shipped_gpus() {
  HardwareCatalog catalog;
  std::ifstream in(kSource / "workloads/hardware/gpus.json");
  json doc = json::parse(in);
  JsonReader hw(doc["hardware"], "hardware");
  catalog.add_from_json(hw);
  return catalog;
}

// `gpus[i]` on host i (the last one on the hosts after it), as topology.hardware would put them.
CommschedParams parse(json doc, int hosts = 4,
                      const std::vector<std::string>& gpus = {"V100-SXM2-32GB"}) {
  const Topology topo = build_topology(StarSpec{hosts, LinkSpec{Bandwidth{1.25e9}, Time::us(2)}});
  const HardwareCatalog catalog = shipped_gpus();
  const NodeHardware node_hardware = mlsim::test::host_gpus(topo, catalog, gpus);
  JsonReader system(doc["system"], "system");
  JsonReader workload(doc["workload"], "workload");
  CommschedParams p =
      read_commsched_params(system, workload, topo, catalog, node_hardware, kScenarios);
  system.finish();
  workload.finish();
  return p;
}

json base() {
  return json::parse(R"({
    "system": {"scheduler": "bytescheduler"},
    "workload": {"profile": "../dnn/pipedream/resnet50/graph.txt", "samples_per_iteration": 128,
                 "profiled_on": "V100-SXM2-32GB", "iterations": 5}})");
}

std::string error_of(json doc, int hosts = 4) {
  try {
    parse(std::move(doc), hosts);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

RunOutput run_shipped(const std::string& file, std::optional<std::string> variant,
                      std::vector<Override> overrides = {}) {
  const Registries registries = make_registries();
  ScenarioRequest request{kScenarios / file, std::move(variant), std::move(overrides)};
  const LoadedScenario scenario = load_scenario(request, registries);
  return run_scenario(scenario, registries);
}

}  // namespace

TEST(CommschedScenario, DefaultsByMode) {
  CommschedParams p = parse(base());
  EXPECT_EQ(p.job.mode, Mode::kParameterServer);
  EXPECT_EQ(p.config, (SchedulerConfig{1'000'000, 4'000'000}));  // bytecore.py defaults
  EXPECT_EQ(p.job.workers.size(), 2u);                           // half the hosts each
  EXPECT_EQ(p.job.servers.size(), 2u);
  EXPECT_EQ(p.tuner, Tuner::kStatic);
  EXPECT_GT(p.job.layers.size(), 100u);  // ResNet-50's layers without the input node
  json d = base();
  d["system"]["mode"] = "allreduce";
  p = parse(d);
  EXPECT_EQ(p.config, (SchedulerConfig{8'000'000, 16'000'000}));  // suggested for all-reduce
  EXPECT_EQ(p.job.workers.size(), 4u);
  EXPECT_TRUE(p.job.servers.empty());
}

// Node75's index among ResNet-50's GPU layers (input node left out).
static std::size_t resnet50_node75() {
  const DnnProfile profile = read_pipedream_graph(std::string(MLSIM_SOURCE_DIR) +
                                                  "/workloads/dnn/pipedream/resnet50/graph.txt");
  std::size_t index = 0;
  for (const auto& l : profile.layers) {
    if (l.is_input) continue;
    if (l.id == "node75") return index;
    ++index;
  }
  return index;
}

TEST(CommschedScenario, WorkersTakeTheGpuOfTheirHostFromTheTopology) {
  // Profiled on V100 SXM2, run on it: the measured times.
  const CommschedParams plain = parse(base());
  const auto& on_v100 = plain.job.worker_times.at(0);
  // Every host a V100 PCIe.
  const CommschedParams pcie = parse(base(), 4, {"V100-PCIE-32GB"});
  const auto& on_pcie = pcie.job.worker_times.at(0);
  ASSERT_EQ(on_v100.size(), on_pcie.size());
  ASSERT_EQ(on_v100.size(), plain.job.layers.size());
  // Same HBM bandwidth (900 GB/s), FP32 peak 15.7 vs 14 TFLOP/s: a layer's memory-bound share
  // (its parameters and output activation at 900 GB/s, over its time) keeps its time, the rest
  // takes 15.7/14 = 1.12143x as long; so every layer's ratio lies in [1, 1.12143].
  for (std::size_t i = 0; i < on_v100.size(); ++i) {
    if (on_v100[i].forward == Time::zero()) continue;
    const double r = on_pcie[i].forward.seconds() / on_v100[i].forward.seconds();
    EXPECT_GE(r, 1 - 1e-6) << i;
    EXPECT_LE(r, 15.7 / 14 + 1e-6) << i;
  }
  // By hand for ResNet-50's node75 (ReLU, forward 0.361 ms, output activation 51,380,224 B, no
  // parameters): 51.38e6 B at 900 GB/s = 0.057089 ms, 15.814% of its time; ratio 0.15814 x 1 +
  // 0.84186 x 1.12143 = 1.10222.
  const std::size_t n75 = resnet50_node75();
  ASSERT_LT(n75, on_v100.size());
  EXPECT_NEAR(on_v100[n75].forward.seconds(), 0.361e-3, 1e-12);
  EXPECT_NEAR(on_pcie[n75].forward.seconds() / on_v100[n75].forward.seconds(), 1.10222, 1e-5);
}

TEST(CommschedScenario, HeterogeneousWorkersEachRunTheirOwnGpu) {
  // All-reduce over 4 workers: hosts 0-1 V100 SXM2 (the profiling GPU), hosts 2-3 A100 40GB.
  json d = base();
  d["system"]["mode"] = "allreduce";
  const CommschedParams p = parse(d, 4, {"V100-SXM2-32GB", "V100-SXM2-32GB", "A100-SXM4-40GB"});
  ASSERT_EQ(p.job.worker_times.size(), 4u);
  const std::size_t n75 = resnet50_node75();
  // Node75 on the A100 40GB: the 15.814% memory-bound share at 900/1555 = 0.578778, the rest at
  // the FP32 ratio 15.7/19.5 = 0.805128: 0.15814 x 0.578778 + 0.84186 x 0.805128 = 0.769334,
  // 0.361 ms x 0.769334 = 0.277730 ms.
  for (std::size_t w : {0u, 1u})
    EXPECT_NEAR(p.job.worker_times[w][n75].forward.seconds(), 0.361e-3, 1e-12) << w;
  for (std::size_t w : {2u, 3u})
    EXPECT_NEAR(p.job.worker_times[w][n75].forward.seconds(), 0.277730e-3, 2e-9) << w;
  EXPECT_EQ(p.job.worker_times[2], p.job.worker_times[3]);
}

TEST(CommschedScenario, TheOldGpuKeysNameWhereTheGpuIsDeclaredNow) {
  json d = base();
  d["workload"]["gpu"] = "V100-PCIE-32GB";
  EXPECT_NE(error_of(d).find("workload.gpu: moved"), std::string::npos) << error_of(d);
  EXPECT_NE(error_of(d).find("topology.hardware"), std::string::npos) << error_of(d);
  d = base();
  d["workload"]["compute_scale"] = 1.12;
  EXPECT_NE(error_of(d).find("workload.compute_scale: moved"), std::string::npos) << error_of(d);
  // No hardware on the hosts: the workers have no GPU.
  d = base();
  const Topology topo = build_topology(StarSpec{4, LinkSpec{Bandwidth{1.25e9}, Time::us(2)}});
  JsonReader system(d["system"], "system");
  JsonReader workload(d["workload"], "workload");
  try {
    read_commsched_params(system, workload, topo, shipped_gpus(), NodeHardware{}, kScenarios);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("topology.hardware (commsched worker 0)"),
              std::string::npos)
        << e.what();
  }
  d = base();
  d["workload"].erase("profiled_on");
  EXPECT_NE(error_of(d).find("workload.profiled_on"), std::string::npos) << error_of(d);
}

TEST(CommschedScenario, ErrorsNameThePath) {
  json d = base();
  d["system"]["scheduler"] = "fifo";
  d["system"]["tuner"] = "autobyte";
  EXPECT_NE(error_of(d).find("system.tuner"), std::string::npos) << error_of(d);

  // The old dynamics keys name the events section that replaced them.
  d = base();
  d["workload"]["stragglers"] = json::parse(R"([{"worker": 0, "slowdown": 2}])");
  EXPECT_NE(error_of(d).find("workload.stragglers: moved"), std::string::npos) << error_of(d);
  EXPECT_NE(error_of(d).find("\"events\""), std::string::npos) << error_of(d);
  d = base();
  d["workload"]["bandwidth_changes"] = json::parse(R"([{"at": "1s", "bandwidth": "1Gbps"}])");
  EXPECT_NE(error_of(d).find("workload.bandwidth_changes: moved"), std::string::npos)
      << error_of(d);

  d = base();
  d["system"]["mode"] = "allreduce";
  d["system"]["servers"] = 2;
  EXPECT_NE(error_of(d).find("system.servers"), std::string::npos) << error_of(d);

  d = base();
  d["system"]["tuner"] = "autobyte";
  d["system"]["autobyte"] = json::parse(R"({"interval_iteration": 3})");
  EXPECT_NE(error_of(d).find("system.autobyte"), std::string::npos) << error_of(d);
  // The noisy oracle's key names what replaced it.
  d["system"]["autobyte"] = json::parse(R"({"noise": 0.05})");
  EXPECT_NE(error_of(d).find("system.autobyte.noise"), std::string::npos) << error_of(d);
  EXPECT_NE(error_of(d).find("meta-network"), std::string::npos) << error_of(d);

  // ByteScheduler's Bayesian tuner: the old grid stand-in's key names its replacement; ranges
  // are [low, high]; PS mode tunes only the credit.
  d = base();
  d["system"]["bo_like"] = json::parse(R"({"trial_iterations": 3})");
  EXPECT_NE(error_of(d).find("system.bo_like: replaced by \"bo\""), std::string::npos)
      << error_of(d);
  d = base();
  d["system"]["tuner"] = "bo";
  d["system"]["bo"] = json::parse(R"({"credit_range": [4000000, 1000000]})");
  EXPECT_NE(error_of(d).find("system.bo.credit_range: expected [low, high]"), std::string::npos)
      << error_of(d);
  d["system"]["bo"] = json::parse(R"({"partition_range": [1000000, 4000000]})");
  EXPECT_NE(error_of(d).find("system.bo.partition_range: PS mode tunes only the credit"),
            std::string::npos)
      << error_of(d);

  d = base();
  d["system"]["tuner"] = "grid_best";
  d["system"]["grid"] = json::parse(R"({"partitions": []})");
  EXPECT_NE(error_of(d).find("system.grid.partitions"), std::string::npos) << error_of(d);

  d = base();
  d["workload"]["profile"] = "no/such/graph.txt";
  EXPECT_NE(error_of(d).find("workload.profile"), std::string::npos) << error_of(d);

  d = base();
  d["system"]["credits"] = 5;  // unknown key
  EXPECT_NE(error_of(d).find("credits"), std::string::npos) << error_of(d);
}

TEST(CommschedScenario, ShippedScenarioRunsAndAccountsEveryByte) {
  for (const char* variant : {"bytescheduler", "fifo", "allreduce"}) {
    SCOPED_TRACE(variant);
    const RunOutput out = run_shipped("commsched_bytescheduler.json", variant,
                                      {{"workload.iterations", 3, "workload.iterations"}});
    const auto& m = out.results.metrics();
    EXPECT_EQ(m.at("finished"), 1);
    EXPECT_EQ(m.at("iterations"), 3);
    EXPECT_EQ(m.at("bytes_undelivered"), 0);
    EXPECT_GT(m.at("throughput_samples_per_s"), 0);
  }
}

TEST(CommschedScenario, AutoByteScenarioIsDeterministic) {
  const std::vector<Override> shorter = {{"workload.iterations", 20, "workload.iterations"}};
  const RunOutput a = run_shipped("commsched_autobyte_dynamic.json", "autobyte", shorter);
  const RunOutput b = run_shipped("commsched_autobyte_dynamic.json", "autobyte", shorter);
  EXPECT_EQ(a.results.metrics(), b.results.metrics());
  EXPECT_EQ(a.results.details(), b.results.details());
  EXPECT_FALSE(a.results.details()["autobyte_decisions"].empty());
  EXPECT_EQ(a.results.metrics().at("bytes_undelivered"), 0);
}

TEST(CommschedScenario, PsAggregationIsThePlatformsPsCostAndOnlyForPs) {
  json d = base();
  d["system"]["ps_aggregation"] = "12GB/s";
  EXPECT_DOUBLE_EQ(parse(d).job.ps_aggregation.bytes_per_s, 12e9);
  EXPECT_DOUBLE_EQ(parse(base()).job.ps_aggregation.bytes_per_s, 0);  // absent: free
  d["system"]["mode"] = "allreduce";
  EXPECT_NE(error_of(d).find("system.ps_aggregation: only for PS mode"), std::string::npos)
      << error_of(d);
}

// `transport` gives the per-message costs' defaults (transport_costs.hpp, [assumed] figures);
// the keys override it. PS mode sends over ps-lite's in-order connections by default, and
// FIFO's engines then bound nothing (0); with `ps_connections: shared` they default to one per
// server; one in all-reduce mode. ByteScheduler's credit delay defaults to none.
TEST(CommschedScenario, TransportProfilesAndFifoEngines) {
  CommschedParams p = parse(base());
  EXPECT_EQ(p.job.message_cpu, Time::zero());
  EXPECT_EQ(p.job.message_overhead, Time::zero());
  EXPECT_EQ(p.job.servers.size(), 2U);  // 4 hosts: half are servers by default
  EXPECT_EQ(p.job.ps_connections, PsConnections::kInOrder);
  EXPECT_EQ(p.job.fifo_engines, 0);
  {
    json shared = base();
    shared["system"]["ps_connections"] = "shared";
    EXPECT_EQ(parse(shared).job.ps_connections, PsConnections::kShared);
    EXPECT_EQ(parse(shared).job.fifo_engines, 2);
    json three = shared;
    three["system"]["servers"] = 3;
    EXPECT_EQ(parse(three, 8).job.fifo_engines, 3);
    json bad = base();
    bad["system"]["ps_connections"] = "parallel";
    EXPECT_NE(error_of(bad).find("system.ps_connections"), std::string::npos) << error_of(bad);
    bad = base();
    bad["system"]["mode"] = "allreduce";
    bad["system"]["ps_connections"] = "in_order";
    EXPECT_NE(error_of(bad).find("system.ps_connections: only for PS mode"), std::string::npos)
        << error_of(bad);
    json ring = base();
    ring["system"]["mode"] = "allreduce";
    EXPECT_EQ(parse(ring).job.fifo_engines, 1);
  }
  EXPECT_EQ(p.job.credit_delay, Time::zero());
  json d = base();
  d["system"]["transport"] = "tcp";
  p = parse(d);
  EXPECT_EQ(p.job.message_cpu, Time::us(30));
  EXPECT_EQ(p.job.message_overhead, Time::us(50));
  d["system"]["transport"] = "rdma";
  d["system"]["message_cpu"] = "7us";
  d["system"]["fifo_engines"] = 0;
  d["system"]["credit_delay"] = "1ms";
  p = parse(d);
  EXPECT_EQ(p.job.message_cpu, Time::us(7));  // the key wins
  EXPECT_EQ(p.job.message_overhead, Time::us(10));
  EXPECT_EQ(p.job.fifo_engines, 0);
  EXPECT_EQ(p.job.credit_delay, Time::ms(1));
  d["system"]["transport"] = "udp";
  EXPECT_NE(error_of(d).find("system.transport"), std::string::npos) << error_of(d);
  d = base();
  EXPECT_EQ(parse(d).job.scheduling, Scheduling::kEveryWorker);
  d["system"]["scheduling"] = "rank0";
  EXPECT_EQ(parse(d).job.scheduling, Scheduling::kRankZero);
  d["system"]["mode"] = "allreduce";
  EXPECT_NE(error_of(d).find("system.scheduling"), std::string::npos) << error_of(d);
  d = base();
  d["system"]["fifo_engines"] = -1;
  EXPECT_NE(error_of(d).find("system.fifo_engines"), std::string::npos) << error_of(d);
}
