// Hardware on the topology: GPUs, NICs, switches and intra-node links per node, heterogeneous
// groups, and strict errors with JSON paths.
#include "sim_core/network/topology_hardware.hpp"

#include <gtest/gtest.h>

#include <fstream>

#include "sim_core/base/error.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/hardware/compute.hpp"
#include "sim_core/network/topology_spec.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim {
namespace {

HardwareCatalog shipped_catalog() {
  HardwareCatalog c;
  for (const char* file : {"gpus.json", "nics.json", "switches.json"}) {
    std::ifstream in(std::string(MLSIM_SOURCE_DIR) + "/workloads/hardware/" + file);
    auto j = nlohmann::json::parse(in);
    JsonReader r(j["hardware"], "hardware");
    c.add_from_json(r);
  }
  return c;
}

struct Built {
  TopologySpec spec;
  Topology topology;
  NodeHardware hardware;
};

Built build(nlohmann::json topo, const HardwareCatalog& catalog) {
  JsonReader r(topo, "topology");
  Built b;
  b.spec = parse_topology_spec(r);
  JsonReader again(topo, "topology");
  const auto hw = parse_topology_hardware(again, b.spec, catalog);
  b.topology = build_topology(b.spec);
  b.hardware = build_node_hardware(b.topology, b.spec, hw, catalog);
  return b;
}

std::string error_of(nlohmann::json topo, const HardwareCatalog& catalog) {
  try {
    build(std::move(topo), catalog);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

nlohmann::json two_leaves() {
  return nlohmann::json::parse(R"({
    "kind": "leaf_spine", "leaves": 2, "hosts_per_leaf": 2, "spines": 1,
    "host_link": {"bandwidth": "200Gbps", "latency": "1us"}, "uplink_latency": "1us",
    "hardware": {"gpu": "A100-SXM4-80GB", "gpus_per_host": 8, "nic": "ConnectX-6-200G",
                 "switch": "tofino-32x100g",
                 "groups": [{"leaves": [1], "gpu": "H100-SXM5-80GB", "nic": "ConnectX-7-400G"}]}})");
}

TEST(TopologyHardware, HeterogeneousLeavesGetTheirOwnGpusNicsAndIntraNodeLinks) {
  const auto catalog = shipped_catalog();
  const auto b = build(two_leaves(), catalog);
  // Hosts 0, 1 on leaf 0 (A100), hosts 2, 3 on leaf 1 (H100).
  EXPECT_EQ(b.hardware.host(0)->gpu->name, "A100-SXM4-80GB");
  EXPECT_EQ(b.hardware.host(1)->gpu->name, "A100-SXM4-80GB");
  EXPECT_EQ(b.hardware.host(2)->gpu->name, "H100-SXM5-80GB");
  EXPECT_EQ(b.hardware.host(3)->nic->name, "ConnectX-7-400G");
  EXPECT_EQ(b.hardware.host(0)->nic->name, "ConnectX-6-200G");
  EXPECT_EQ(b.hardware.host(0)->gpus, 8);
  // Intra-node links from the catalog: A100 NVSwitch 300 GB/s per direction, H100 450 GB/s.
  EXPECT_EQ(b.hardware.host(0)->intra_node->fabric, IntraNodeFabric::kNvSwitch);
  EXPECT_EQ(b.hardware.host(0)->intra_node->bandwidth.bytes_per_s, 300e9);
  EXPECT_EQ(b.hardware.host(2)->intra_node->bandwidth.bytes_per_s, 450e9);
  EXPECT_EQ(b.hardware.gpu_types(), (std::vector<std::string>{"A100-SXM4-80GB", "H100-SXM5-80GB"}));
  // Switches: leaf0, leaf1, spine0 carry the spec; hosts have none.
  const auto leaf1 = *b.topology.find("leaf1");
  EXPECT_EQ(b.hardware.switch_spec(leaf1)->name, "tofino-32x100g");
  EXPECT_EQ(b.hardware.switch_spec(0), nullptr);
  EXPECT_EQ(b.hardware.host(leaf1), nullptr);
}

TEST(TopologyHardware, AnOperatorTakesEachGpuTypesTimeOnOneTopology) {
  const auto catalog = shipped_catalog();
  const auto b = build(two_leaves(), catalog);
  CostModel costs;
  auto roofline = std::make_unique<RooflineProvider>();
  // The ideal roofline (efficiency 1, no overhead) for both types.
  roofline->add("A100-SXM4-80GB", "gemm", {{0, true, 1, 1, 0}});
  roofline->add("H100-SXM5-80GB", "gemm", {{0, true, 1, 1, 0}});
  costs.add(std::move(roofline));
  Engine engine;
  HostSpeeds speeds(b.topology.nodes().size());
  Compute compute(engine, b.hardware, speeds, costs);
  // 3.12e12 fp16 FLOPs, 1e9 bytes. A100: max(3.12e12 / 312e12, 1e9 / 2039e9) = 10 ms.
  // H100: max(3.12e12 / 989.5e12, 1e9 / 3350e9) = 3.15311 ms.
  const OperatorWork op{"gemm", 3.12e12, 1e9, Dtype::kFp16, 4096, {}};
  std::vector<std::pair<NodeId, Time>> done;
  for (NodeId h : {NodeId{0}, NodeId{2}})
    compute.run(h, op, [&, h] { done.emplace_back(h, engine.now()); });
  engine.run();
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0], std::make_pair(NodeId{2}, Time::from_seconds_ceil(3.12e12 / 989.5e12)));
  EXPECT_EQ(done[0].second, Time::ns(3153108));
  EXPECT_EQ(done[1], std::make_pair(NodeId{0}, Time::ms(10)));
}

TEST(TopologyHardware, ScenarioOverridesTheIntraNodeLink) {
  const auto catalog = shipped_catalog();
  auto t = two_leaves();
  t["hardware"]["groups"].push_back(
      {{"hosts", {0}}, {"intra_node", {{"fabric", "pcie"}, {"bandwidth", "32GB/s"}}}});
  const auto b = build(t, catalog);
  EXPECT_EQ(b.hardware.host(0)->intra_node->fabric, IntraNodeFabric::kPcie);
  EXPECT_EQ(b.hardware.host(0)->intra_node->bandwidth.bytes_per_s, 32e9);
  EXPECT_EQ(b.hardware.host(0)->intra_node->latency, Time::us(1));  // kept from the catalog
  EXPECT_EQ(b.hardware.host(1)->intra_node->fabric, IntraNodeFabric::kNvSwitch);
}

TEST(TopologyHardware, NoSectionMeansNoHardware) {
  const auto catalog = shipped_catalog();
  auto t = two_leaves();
  t.erase("hardware");
  const auto b = build(t, catalog);
  EXPECT_TRUE(b.hardware.empty());
  EXPECT_EQ(b.hardware.host(0), nullptr);
  EXPECT_THROW(b.hardware.gpu(0, "system.gpu"), InputError);
}

TEST(TopologyHardware, StrictErrorsNameTheJsonPath) {
  const auto catalog = shipped_catalog();
  auto with = [&](auto edit) {
    auto t = two_leaves();
    edit(t);
    return error_of(t, catalog);
  };
  auto contains = [](const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
  };
  EXPECT_PRED2(contains, with([](auto& t) { t["hardware"]["groups"][0]["gpu"] = "B200"; }),
               "topology.hardware.groups[0].gpu");
  EXPECT_PRED2(contains, with([](auto& t) { t["hardware"].erase("gpu"); }),
               "topology.hardware.gpu");
  EXPECT_PRED2(contains, with([](auto& t) { t["hardware"]["nic"] = "ConnectX-5-100G"; }),
               "topology.hardware.nic");  // 200 Gbps links on a 100 Gbps NIC
  EXPECT_PRED2(contains, with([](auto& t) { t["hardware"]["groups"][0]["leaves"] = {2}; }),
               "leaf 2 does not exist");
  EXPECT_PRED2(contains, with([](auto& t) { t["hardware"]["groups"][0]["hosts"] = {0}; }),
               "exactly one of");
  EXPECT_PRED2(contains, with([](auto& t) { t["hardware"]["groups"][0]["pods"] = {0}; }),
               "topology.hardware.groups[0].pods");
  EXPECT_PRED2(contains, with([](auto& t) { t["hardware"]["cpu"] = "x"; }),
               "topology.hardware.cpu");
  EXPECT_PRED2(contains, with([](auto& t) { t["hardware"]["gpu"] = "V100-PCIE-32GB"; }),
               "no error");  // PCIe V100s: the catalog has their link
  EXPECT_PRED2(
      contains, with([](auto& t) {
        t["hardware"]["groups"][0] = {{"nodes", {"leaf0", "h9"}}, {"gpu", "A100-SXM4-80GB"}};
      }),
      "no node named \"h9\"");
  EXPECT_PRED2(contains, with([](auto& t) { t["hosts_per_leaf"] = 40; }),
               "topology.hardware.switch");  // 40 hosts + 1 spine on a 32-port switch
}

TEST(TopologyHardware, GpusWithoutACatalogLinkNeedOneFromTheScenario) {
  auto catalog = shipped_catalog();
  GpuSpec bare = catalog.gpu("A100-SXM4-80GB", "x");
  bare.name = "bare";
  bare.intra_node.reset();
  catalog.add_gpu(bare);
  auto t = two_leaves();
  t["hardware"]["gpu"] = "bare";
  EXPECT_NE(error_of(t, catalog).find("topology.hardware.gpus_per_host"), std::string::npos);
  t["hardware"]["gpus_per_host"] = 1;  // one GPU per host needs no link
  EXPECT_EQ(error_of(t, catalog), "no error");
  t["hardware"]["gpus_per_host"] = 4;
  t["hardware"]["intra_node"] = {{"bandwidth", "64GB/s"}};
  EXPECT_NE(error_of(t, catalog).find("topology.hardware.intra_node"), std::string::npos);
  t["hardware"]["intra_node"] = {{"fabric", "pcie"}, {"bandwidth", "64GB/s"}, {"latency", "2us"}};
  EXPECT_EQ(error_of(t, catalog), "no error");
}

}  // namespace
}  // namespace mlsim

namespace mlsim {
namespace {

TEST(ServingEngines, ShippedCatalogHasSourcedOverheads) {
  HardwareCatalog c;
  std::ifstream in(std::string(MLSIM_SOURCE_DIR) + "/workloads/hardware/engines.json");
  auto j = nlohmann::json::parse(in);
  JsonReader r(j["hardware"], "hardware");
  c.add_from_json(r);
  EXPECT_EQ(c.engine("ideal", "x").iteration_overhead, Time::zero());
  // One bar of a published figure, cited with its conditions (docs/sources_pending.md, item 4).
  EXPECT_EQ(c.engine("vllm-v0", "x").iteration_overhead, Time::us(22'500));
  EXPECT_NE(c.engine("vllm-v0", "x").source.find("mlsys.wuklab.io/posts/scheduling_overhead"),
            std::string::npos);
  EXPECT_NE(c.engine("vllm-v0", "x").source.find("v0.5.4"), std::string::npos);
  EXPECT_THROW(c.engine("tgi", "system.engine"), InputError);
  // An entry without a source is refused.
  auto bad = nlohmann::json::parse(R"({"engines": {"x": {"iteration_overhead": "1ms"}}})");
  JsonReader rb(bad, "hardware");
  HardwareCatalog c2;
  EXPECT_THROW(c2.add_from_json(rb), InputError);
}

}  // namespace
}  // namespace mlsim
