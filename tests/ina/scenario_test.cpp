// Reading the model's scenario sections: defaults from the switch spec and topology, job
// expansion and Poisson arrivals, and errors that name the JSON path.
#include <gtest/gtest.h>

#include <fstream>

#include "models/ina/ina_model.hpp"
#include "sim_core/error.hpp"
#include "sim_core/topology_builders.hpp"
#include "sim_core/topology_spec.hpp"

using namespace mlsim;
using namespace mlsim::ina;
using nlohmann::json;

namespace {

const std::filesystem::path kSource = MLSIM_SOURCE_DIR;

HardwareCatalog shipped_switches() {
  std::ifstream in(kSource / "workloads/hardware/switches.json");
  json doc = json::parse(in);
  HardwareCatalog catalog;
  JsonReader hw(doc["hardware"], "hardware");
  catalog.add_from_json(hw);
  return catalog;
}

Topology star(int hosts, const char* bw = "100Gbps") {
  return build_topology(StarSpec{hosts, LinkSpec{parse_bandwidth(bw), Time::ns(500)}});
}

ClusterParams parse(json doc, const Topology& topology) {
  HardwareCatalog hw = shipped_switches();
  JsonReader system(doc["system"], "system");
  system.ignore("model");  // the runner's key
  JsonReader workload(doc["workload"], "workload");
  ClusterParams p =
      parse_cluster_params(system, workload, hw, topology, kSource / "workloads/scenarios", 7);
  system.finish();
  workload.finish();
  return p;
}

json minimal() {
  return json::parse(R"({
    "system": {"policy": "atp", "switch": "tofino-32x100g-atp"},
    "workload": {"jobs": [{"model": "alexnet", "profile": "../dnn/pipedream/alexnet/graph.txt",
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
  ASSERT_EQ(p.jobs.size(), 3u);
  EXPECT_EQ(p.jobs[0].arrival, Time::zero());
  EXPECT_GT(p.jobs[1].arrival, Time::zero());
  EXPECT_GT(p.jobs[2].arrival, p.jobs[1].arrival);
  EXPECT_EQ(p.jobs[0].profile, p.jobs[2].profile);  // read once
  json d = minimal();
  d["workload"]["jobs"][0]["worker_slowdown"] = {1.0, 1.5};
  EXPECT_EQ(parse(d, star(9)).jobs[2].worker_slowdown, (std::vector<double>{1.0, 1.5}));
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
  d["workload"]["jobs"][0]["worker_slowdown"] = {1.0, 1.1, 1.2};  // 2 workers
  expect_error(d, star(9), "workload.jobs[0].worker_slowdown");
  d = minimal();
  d["system"]["switch"] = "tofino-32x100g";  // no aggregator pool: memory must be given
  expect_error(d, star(9), "system.aggregator_memory");
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
