// The scenario-facing model: strict reading of "system", and metrics in Results.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "models/collectives/collectives_model.hpp"
#include "models/collectives/register.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/hardware/compute.hpp"
#include "sim_core/hardware/hardware.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "tests/support/run_json.hpp"

using namespace mlsim;

namespace {
const LinkSpec kModelLink{Bandwidth{1e9}, Time::ns(100)};

std::string error_of(nlohmann::json system, int hosts = 8) {
  const Topology topo = build_topology(StarSpec{hosts, kModelLink});
  try {
    JsonReader r(system, "system");
    collectives::read_collectives_params(r, topo);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST(CollectivesModel, RunsThroughTheRegistry) {
  const Registries registries = test::registries_with(register_collectives);
  const nlohmann::json scenario = {
      {"name", "ring4"},
      {"topology",
       {{"kind", "ring"}, {"hosts", 4}, {"link", {{"bandwidth", "8Gbps"}, {"latency", "100ns"}}}}},
      {"system", {{"model", "collectives"}, {"algorithm", "ring"}, {"bytes", "4MB"}}}};
  const RunOutput run = test::run_json(scenario, registries);
  // Defaults are written back for the resolved scenario.
  EXPECT_EQ(run.resolved_scenario["system"]["chunks"], 1);
  const Results& out = run.results;
  // 2(n-1)/n S/B + 2(n-1) a = 6 ms + 600 ns.
  EXPECT_DOUBLE_EQ(out.metrics().at("completion_time_s"), 6.0006e-3);
  EXPECT_DOUBLE_EQ(out.metrics().at("algbw_bytes_per_s"), 4e6 / 6.0006e-3);
  EXPECT_DOUBLE_EQ(out.metrics().at("busbw_bytes_per_s"), 1.5 * 4e6 / 6.0006e-3);
  EXPECT_DOUBLE_EQ(out.metrics().at("sent_bytes"), 24e6);
  EXPECT_DOUBLE_EQ(out.metrics().at("completed"), 1);
  EXPECT_EQ(out.details()["algorithm"], "ring");
}

TEST(CollectivesModel, ParticipantsAndAlgorithmOptions) {
  nlohmann::json system = {{"algorithm", "ps"},
                           {"bytes", "1MiB"},
                           {"servers", 2},
                           {"placement", "colocated"},
                           {"participants", 4}};
  JsonReader r(system, "system");
  const auto p = collectives::read_collectives_params(r, build_topology(StarSpec{8, kModelLink}));
  EXPECT_EQ(p.participants, 4);
  EXPECT_EQ(p.spec.servers, 2);
  EXPECT_EQ(p.spec.placement, collectives::Placement::kColocated);
  EXPECT_EQ(p.spec.bytes, Bytes{1 << 20});
}

TEST(CollectivesModel, StrictErrors) {
  EXPECT_EQ(error_of({{"bytes", "1MiB"}}), "system.algorithm: missing (required)");
  EXPECT_NE(
      error_of({{"algorithm", "ring"}, {"bytes", "1MiB"}, {"servers", 2}}).find("system.servers"),
      std::string::npos);
  EXPECT_NE(error_of({{"algorithm", "allgather"}, {"bytes", "1MiB"}}).find("system.algorithm"),
            std::string::npos);
  EXPECT_NE(
      error_of({{"algorithm", "ring"}, {"bytes", "1MiB"}, {"chunks", 0}}).find("system.chunks"),
      std::string::npos);
  EXPECT_NE(
      error_of({{"algorithm", "ps"}, {"bytes", "1MiB"}, {"servers", 8}}).find("system.servers"),
      std::string::npos);  // dedicated servers must leave a worker
  EXPECT_NE(error_of({{"algorithm", "tree"}, {"bytes", "-1"}}).find("system.bytes"),
            std::string::npos);
  EXPECT_NE(error_of({{"algorithm", "ring"}, {"bytes", "1MiB"}, {"participants", 9}})
                .find("system.participants"),
            std::string::npos);
}

TEST(CollectivesModel, RatWithEvents) {
  // 2 leaves x 2 hosts: one leaf-spine cable slowed before the start, the other spine's cable of
  // leaf1 failed at 1 us (both from the events section); rat completes and reports its regions.
  const Registries registries = test::registries_with(register_collectives);
  const nlohmann::json scenario = nlohmann::json::parse(R"({
    "name": "rat_events",
    "topology": {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
                 "host_link": {"bandwidth": "8Gbps", "latency": "100ns"},
                 "uplink_latency": "100ns"},
    "system": {"model": "collectives", "algorithm": "rat", "bytes": "1MB", "chunks": 4},
    "events": {"list": [
      {"link": ["leaf0", "spine0"], "bandwidth": "1Gbps"},
      {"at": "1us", "link": ["spine1", "leaf1"], "up": false}]}})");
  const RunOutput run = test::run_json(scenario, registries);
  EXPECT_EQ(run.resolved_scenario["events"]["list"][0]["at"], "0s");  // default written back
  const Results& out = run.results;
  EXPECT_DOUBLE_EQ(out.metrics().at("completed"), 1);
  EXPECT_DOUBLE_EQ(out.metrics().at("verified_pieces"), 4 * 4);
  EXPECT_DOUBLE_EQ(out.metrics().at("sent_bytes"), 2 * 3 * 1e6);
  EXPECT_EQ(out.details()["algorithm"], "rat");
  ASSERT_EQ(out.details()["regions"].size(), 2u);
  EXPECT_EQ(out.details()["regions"][1]["gateway"], "leaf1");
  EXPECT_EQ(out.details()["regions"][1]["hosts"], 2);
}

TEST(CollectivesModel, OldLinkChangesKeyNamesTheEventsSection) {
  const std::string e = error_of({{"algorithm", "rat"},
                                  {"bytes", "1MiB"},
                                  {"link_changes", {{{"between", {"h0", "sw0"}}, {"up", false}}}}});
  EXPECT_NE(e.find("system.link_changes: moved"), std::string::npos) << e;
  EXPECT_NE(e.find("\"events\""), std::string::npos) << e;
}

TEST(CollectivesModel, CostKeys) {
  const Topology topo = build_topology(RingSpec{4, kModelLink});
  nlohmann::json system = {
      {"algorithm", "ring"},
      {"bytes", "4MB"},
      {"channels", 2},
      {"costs",
       {{"launch", "5us"},
        {"protocols", {{"Simple", {{"hop_latency", "1us"}}}, {"LL", {{"efficiency", 0.5}}}}}}},
      {"host", {{"message_overhead", "2us"}, {"per_byte_ns", 0.25}}}};
  JsonReader r(system, "system");
  const auto p = collectives::read_collectives_params(r, topo);
  EXPECT_DOUBLE_EQ(p.spec.host.per_byte_ns, 0.25);
  EXPECT_EQ(p.spec.channels, 2);
  EXPECT_EQ(p.spec.costs.launch, Time::us(5));
  EXPECT_TRUE(p.spec.costs.of(collectives::Protocol::kSimple).enabled);
  EXPECT_EQ(p.spec.costs.of(collectives::Protocol::kSimple).hop_latency, Time::us(1));
  EXPECT_FALSE(p.spec.costs.of(collectives::Protocol::kLL128).enabled);
  EXPECT_DOUBLE_EQ(p.spec.costs.of(collectives::Protocol::kLL).efficiency, 0.5);
  EXPECT_EQ(p.spec.host.message_overhead, Time::us(2));

  EXPECT_NE(error_of({{"algorithm", "ring"},
                      {"bytes", "1MiB"},
                      {"costs", {{"protocols", {{"LL", {{"efficiency", 2}}}}}}}})
                .find("system.costs.protocols.LL.efficiency"),
            std::string::npos);
  for (const nlohmann::json& bad :
       {nlohmann::json(-0.1), nlohmann::json(5000), nlohmann::json("1ns")})
    EXPECT_NE(error_of({{"algorithm", "ring"}, {"bytes", "1MiB"}, {"host", {{"per_byte_ns", bad}}}})
                  .find("system.host.per_byte_ns"),
              std::string::npos)
        << bad;
  EXPECT_NE(error_of({{"algorithm", "ring"}, {"bytes", "1MiB"}, {"costs", {{"lunch", "1us"}}}})
                .find("lunch"),
            std::string::npos);
  EXPECT_NE(error_of({{"algorithm", "tree"}, {"bytes", "1MiB"}, {"channels", 2}}).find("channels"),
            std::string::npos);
}

TEST(CollectivesModel, ShippedNcclCostsLoad) {
  // The calibrated fragment (tools/calibrate_collectives.py) is a valid "system.costs".
  std::ifstream in(std::string(MLSIM_SOURCE_DIR) + "/workloads/collectives/nccl_a100.json");
  ASSERT_TRUE(in);
  nlohmann::json fragment = nlohmann::json::parse(in);
  nlohmann::json system = {{"algorithm", "ring"}, {"bytes", "1MiB"}};
  system["costs"] = fragment["system"]["costs"];
  const Topology topo = build_topology(RingSpec{4, kModelLink});
  JsonReader r(system, "system");
  const auto p = collectives::read_collectives_params(r, topo);
  EXPECT_GT(p.spec.costs.launch, Time::zero());
  for (auto proto : collectives::kProtocols) EXPECT_TRUE(p.spec.costs.of(proto).enabled);
}

// Issue 17, defect 8: a collective cut off by a partition reported `completed 0` beside a bus
// bandwidth computed from the time the engine ran dry. It now reports no time or bandwidth.
TEST(CollectivesModel, APartitionedCollectiveReportsNoBandwidth) {
  const Registries registries = test::registries_with(register_collectives);
  // Both uplinks of leaf1 fail at once (events section, at time 0): its two hosts can no longer
  // reach leaf0's.
  const nlohmann::json scenario = {
      {"name", "partitioned"},
      {"topology",
       {{"kind", "leaf_spine"},
        {"leaves", 2},
        {"hosts_per_leaf", 2},
        {"spines", 2},
        {"host_link", {{"bandwidth", "8Gbps"}, {"latency", "100ns"}}},
        {"uplink_latency", "100ns"}}},
      {"events",
       {{"list",
         {{{"at", "0s"}, {"link", {"spine0", "leaf1"}}, {"up", false}},
          {{"at", "0s"}, {"link", {"spine1", "leaf1"}}, {"up", false}}}}}},
      {"system", {{"model", "collectives"}, {"algorithm", "ring"}, {"bytes", "1MB"}}}};
  const RunOutput run = test::run_json(scenario, registries);
  const Results& out = run.results;
  EXPECT_DOUBLE_EQ(out.metrics().at("completed"), 0);
  EXPECT_GT(out.metrics().at("failed_transfers"), 0);
  EXPECT_TRUE(std::isnan(out.metrics().at("busbw_bytes_per_s")));
  EXPECT_TRUE(std::isnan(out.metrics().at("algbw_bytes_per_s")));
  EXPECT_TRUE(std::isnan(out.metrics().at("completion_time_s")));
}

TEST(CollectivesModel, NvlsNeedsOneSwitch) {
  const Topology ring = build_topology(RingSpec{4, kModelLink});
  nlohmann::json system = {{"algorithm", "nvls"}, {"bytes", "1MiB"}};
  JsonReader r(system, "system");
  try {
    collectives::read_collectives_params(r, ring);
    FAIL() << "accepted nvls on a ring of hosts";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("system.algorithm"), std::string::npos);
  }
  EXPECT_EQ(error_of({{"algorithm", "nvls"}, {"bytes", "1MiB"}}), "no error");  // a star
}

TEST(CollectivesModel, ShippedHostCostsLoad) {
  std::ifstream in(std::string(MLSIM_SOURCE_DIR) + "/workloads/collectives/host_costs.json");
  ASSERT_TRUE(in);
  nlohmann::json fragment = nlohmann::json::parse(in);
  nlohmann::json system = {{"algorithm", "ps"}, {"bytes", "1MiB"}};
  system["host"] = fragment["system"]["host"];
  const Topology topo = build_topology(RingSpec{4, kModelLink});
  JsonReader r(system, "system");
  const auto p = collectives::read_collectives_params(r, topo);
  EXPECT_EQ(p.spec.host.message_overhead, Time::us(16));
  EXPECT_DOUBLE_EQ(p.spec.host.ps_aggregation.bytes_per_s, 68e9);
}

TEST(CollectivesModel, AutoChoosesTheAlgorithmBySize) {
  // 16 hosts on a star, no costs: ring 30 x 200 ns + 1.875 S ns, binary tree 8 x 200 ns + 14 S ns
  // (costs_test.cpp): tree below (6,000 - 1,600) / 12.125 = 362 B, ring above.
  const Registries registries = test::registries_with(register_collectives);
  for (const auto& [bytes, expected] : {std::pair{"100B", "tree"}, std::pair{"1MB", "ring"}}) {
    const nlohmann::json scenario = {
        {"name", "auto16"},
        {"topology",
         {{"kind", "star"},
          {"hosts", 16},
          {"link", {{"bandwidth", "8Gbps"}, {"latency", "100ns"}}}}},
        {"system", {{"model", "collectives"}, {"algorithm", "auto"}, {"bytes", bytes}}}};
    const RunOutput run = test::run_json(scenario, registries);
    EXPECT_EQ(run.results.details()["algorithm"], expected) << bytes;
    EXPECT_EQ(run.resolved_scenario["system"]["arity"], 2);
  }
  EXPECT_NE(error_of({{"operation", "broadcast"}, {"algorithm", "auto"}, {"bytes", "1MB"}})
                .find("all_reduce only"),
            std::string::npos);
}
