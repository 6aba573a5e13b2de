// Reading the pipeline model's scenario sections: the shipped scenario, defaults, and errors that
// name the JSON path.
#include <gtest/gtest.h>

#include "models/pipeline/pipeline_model.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "tests/hardware/gpu_fixtures.hpp"

using namespace mlsim;
using namespace mlsim::pipeline;
using nlohmann::json;

namespace {

const std::filesystem::path kScenarios =
    std::filesystem::path(MLSIM_SOURCE_DIR) / "workloads/scenarios";

const HardwareCatalog& catalog() {
  static const HardwareCatalog c = [] {
    HardwareCatalog h;
    h.add_gpu(test::make_gpu("P", 0, 10, 1000));
    return h;
  }();
  return c;
}

TrainingParams parse(json doc, int hosts = 4) {
  const Topology topo = build_topology(StarSpec{hosts, LinkSpec{Bandwidth{12.5e9}, Time::ns(500)}});
  JsonReader system(doc["system"], "system");
  JsonReader workload(doc["workload"], "workload");
  TrainingParams p = read_training_params(system, workload, topo, catalog(), kScenarios);
  system.finish();
  workload.finish();
  return p;
}

json base_scenario() {
  return json::parse(R"({
    "system": {"policy": "autopipe"},
    "workload": {"profile": "../dnn/pipedream/vgg16/graph.txt", "profiled_on": "P",
                 "samples_per_minibatch": 128,
                 "minibatches": 100}})");
}

std::string error_of(json doc, int hosts = 4) {
  try {
    parse(std::move(doc), hosts);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(PipelineScenario, DefaultsFromTheTopology) {
  const TrainingParams p = parse(base_scenario());
  EXPECT_EQ(p.policy, Policy::kAutoPipe);
  EXPECT_EQ(p.hosts.size(), 4u);  // every host of the topology
  EXPECT_EQ(p.host_links.size(), 4u);
  EXPECT_DOUBLE_EQ(p.latency_out[0], 500e-9);  // host -> switch
  EXPECT_DOUBLE_EQ(p.latency_in[3], 500e-9);   // switch -> host
  // PipeDream's optimizer defaults: replication allowed, activations not in the objective.
  EXPECT_FALSE(p.straight);
  EXPECT_FALSE(p.activation_compression_ratio.has_value());
  json options = base_scenario();
  options["system"]["straight_pipeline"] = true;
  options["system"]["activation_compression_ratio"] = 2;
  options["system"]["hosts"] = 3;
  const TrainingParams o = parse(options);
  EXPECT_TRUE(o.straight);
  EXPECT_EQ(o.activation_compression_ratio, 2.0);
  EXPECT_EQ(o.hosts.size(), 3u);
  EXPECT_DOUBLE_EQ(p.min_gain, 0.05);
  EXPECT_GT(p.layers.size(), 30u);  // VGG16's layers without the input node
  EXPECT_EQ(p.profiled_on, catalog().find_gpu("P"));
}

TEST(PipelineScenario, ErrorsNameThePath) {
  json d = base_scenario();
  // The old dynamics keys name the events section that replaced them.
  d["workload"]["changes"] = json::parse(R"([{"at": "1s", "stage": 1, "gpu_speed": 0.5}])");
  EXPECT_NE(error_of(d).find("workload.changes: moved"), std::string::npos) << error_of(d);
  EXPECT_NE(error_of(d).find("\"events\""), std::string::npos) << error_of(d);
  d = base_scenario();
  d["system"]["stages"] = 4;  // renamed: a stage may now span several hosts
  EXPECT_NE(error_of(d).find("system.stages: moved"), std::string::npos) << error_of(d);
  d = base_scenario();
  d["system"]["hosts"] = 5;
  EXPECT_NE(error_of(d).find("system.hosts"), std::string::npos) << error_of(d);
  d = base_scenario();
  d["system"]["activation_compression_ratio"] = 0;
  EXPECT_NE(error_of(d).find("system.activation_compression_ratio"), std::string::npos)
      << error_of(d);
  d = base_scenario();
  d["workload"]["gpu_speed"] = json::array({1, 1, 1, 1});
  EXPECT_NE(error_of(d).find("workload.gpu_speed: moved"), std::string::npos) << error_of(d);
  d = base_scenario();
  d["workload"]["profile"] = "missing.txt";
  EXPECT_NE(error_of(d).find("workload.profile"), std::string::npos) << error_of(d);
  d = base_scenario();
  d["workload"]["minibatchs"] = 3;
  EXPECT_NE(error_of(d).find("workload.minibatchs"), std::string::npos) << error_of(d);
  d = base_scenario();
  d["workload"]["profiled_on"] = "Q";  // not in the catalog
  EXPECT_NE(error_of(d).find("workload.profiled_on"), std::string::npos) << error_of(d);
  d = base_scenario();
  d["system"]["host"] = {{"ps_aggregation", "10GB/s"}};  // no parameter server here
  EXPECT_NE(error_of(d).find("system.host.ps_aggregation"), std::string::npos) << error_of(d);
  d = base_scenario();
  d["system"]["costs"] = {{"launch", "-1us"}};
  EXPECT_NE(error_of(d).find("system.costs.launch"), std::string::npos) << error_of(d);
  d = base_scenario();
  d["system"]["policy"] = "gpipe";
  EXPECT_NE(error_of(d).find("system.policy"), std::string::npos) << error_of(d);
  d = base_scenario();
  d["system"]["schedule"] = "1f1b-flush";  // not registered: the message lists what is
  EXPECT_NE(error_of(d).find("system.schedule: unknown schedule \"1f1b-flush\""), std::string::npos)
      << error_of(d);
  EXPECT_NE(error_of(d).find("\"gpipe\""), std::string::npos) << error_of(d);
  d = base_scenario();
  d["system"]["micro_batches_per_flush"] = 8;  // 1F1B has no flush
  EXPECT_NE(error_of(d).find("system.micro_batches_per_flush"), std::string::npos) << error_of(d);
  d = base_scenario();
  d["system"]["schedule"] = "gpipe";
  d["system"]["micro_batches_per_flush"] = 0;
  EXPECT_NE(error_of(d).find("system.micro_batches_per_flush"), std::string::npos) << error_of(d);
}

TEST(PipelineScenario, ScheduleKey) {
  using Kind = training::PipelineSchedule::Kind;
  EXPECT_EQ(parse(base_scenario()).schedule, Kind::kOneFOneB);  // PipeDream's, the default
  json d = base_scenario();
  d["system"]["schedule"] = "gpipe";
  TrainingParams g = parse(d);
  EXPECT_EQ(g.schedule, Kind::kGPipe);
  EXPECT_EQ(g.gpipe_group, 16u);  // 4 micro-batches per host, 4 hosts
  d["system"]["micro_batches_per_flush"] = 6;
  EXPECT_EQ(parse(d).gpipe_group, 6u);
}

TEST(PipelineScenario, PlannerKeys) {
  EXPECT_EQ(parse(base_scenario()).planner, Planner::kExact);  // the reference search, the default
  json dp = base_scenario();
  dp["system"]["planner"] = "dp";
  EXPECT_EQ(parse(dp).planner, Planner::kDp);
  json dp_rl = dp;  // the RL options belong to the RL planner only
  dp_rl["system"]["rl"] = {{"episodes", 40}};
  EXPECT_NE(error_of(dp_rl).find("system.rl"), std::string::npos) << error_of(dp_rl);
  json d = base_scenario();
  d["system"]["planner"] = "rl";
  const TrainingParams defaults = parse(d);
  EXPECT_EQ(defaults.planner, Planner::kRl);
  EXPECT_EQ(defaults.rl.episodes, RlOptions{}.episodes);
  d["system"]["rl"] = {{"episodes", 40}, {"batch", 8}, {"learning_rate", 0.1}};
  const TrainingParams p = parse(d);
  EXPECT_EQ(p.rl.episodes, 40u);
  EXPECT_EQ(p.rl.batch, 8u);
  EXPECT_DOUBLE_EQ(p.rl.learning_rate, 0.1);
  // Strict: an unknown key of system.rl, a batch of one, options without the RL planner, a
  // planner for PipeDream, an unknown planner.
  json typo = d;
  typo["system"]["rl"]["epsiodes"] = 3;
  EXPECT_NE(error_of(typo).find("system.rl.epsiodes"), std::string::npos) << error_of(typo);
  json one = d;
  one["system"]["rl"]["batch"] = 1;
  EXPECT_NE(error_of(one).find("system.rl.batch"), std::string::npos) << error_of(one);
  json exact = d;
  exact["system"]["planner"] = "exact";
  EXPECT_NE(error_of(exact).find("system.rl"), std::string::npos) << error_of(exact);
  json pd = base_scenario();
  pd["system"]["policy"] = "pipedream";
  pd["system"]["planner"] = "rl";
  EXPECT_NE(error_of(pd).find("system.planner"), std::string::npos) << error_of(pd);
  json unknown = base_scenario();
  unknown["system"]["planner"] = "genetic";
  const std::string e = error_of(unknown);
  EXPECT_NE(e.find("system.planner"), std::string::npos) << e;
  EXPECT_NE(e.find("rl"), std::string::npos) << e;
  EXPECT_NE(e.find("\"dp\""), std::string::npos) << e;
}

TEST(PipelineScenario, SwitchingKey) {
  EXPECT_EQ(parse(base_scenario()).switching, Switching::kDrainAndCopy);
  json d = base_scenario();
  d["system"]["switching"] = "layer_by_layer";
  EXPECT_EQ(parse(d).switching, Switching::kLayerByLayer);
  d["system"]["switching"] = "teleport";
  EXPECT_NE(error_of(d).find("system.switching"), std::string::npos) << error_of(d);
  json pd = base_scenario();
  pd["system"]["policy"] = "pipedream";
  pd["system"]["switching"] = "layer_by_layer";
  EXPECT_NE(error_of(pd).find("system.switching"), std::string::npos) << error_of(pd);
}

TEST(PipelineScenario, MemoryKeys) {
  // Off by default, as PipeDream's --use_memory_constraint.
  const TrainingParams off = parse(base_scenario());
  EXPECT_FALSE(off.memory_constraint);
  EXPECT_FALSE(off.memory_capacity_override.has_value());
  json d = base_scenario();
  d["system"]["memory"] = {{"constraint", true}};
  const TrainingParams on = parse(d);
  EXPECT_TRUE(on.memory_constraint);
  EXPECT_FALSE(on.memory_capacity_override.has_value());  // the GPUs' own, from the catalog
  EXPECT_DOUBLE_EQ(on.optimizer_state_factor, 1);
  d["system"]["memory"] = {
      {"constraint", true}, {"capacity", "16GB"}, {"optimizer_state_factor", 2}};
  const TrainingParams given = parse(d);
  EXPECT_EQ(given.memory_capacity_override, 16e9);
  EXPECT_DOUBLE_EQ(given.optimizer_state_factor, 2);
  // Errors name the path: an unknown key, a missing or mistyped switch, a size without a unit,
  // a setting given with the constraint off.
  d["system"]["memory"] = {{"constraint", true}, {"capacty", "16GB"}};
  EXPECT_NE(error_of(d).find("system.memory.capacty: unknown key (known keys here: constraint, "
                             "capacity, optimizer_state_factor)"),
            std::string::npos)
      << error_of(d);
  d["system"]["memory"] = {{"capacity", "16GB"}};
  EXPECT_NE(error_of(d).find("system.memory.constraint"), std::string::npos) << error_of(d);
  d["system"]["memory"] = {{"constraint", "yes"}};
  EXPECT_NE(error_of(d).find("system.memory.constraint"), std::string::npos) << error_of(d);
  d["system"]["memory"] = {{"constraint", true}, {"capacity", 16}};
  EXPECT_NE(error_of(d).find("system.memory.capacity"), std::string::npos) << error_of(d);
  d["system"]["memory"] = {{"constraint", true}, {"optimizer_state_factor", -1}};
  EXPECT_NE(error_of(d).find("system.memory.optimizer_state_factor"), std::string::npos)
      << error_of(d);
  d["system"]["memory"] = {{"constraint", false}, {"capacity", "16GB"}};
  EXPECT_NE(error_of(d).find("system.memory.capacity: used only with"), std::string::npos)
      << error_of(d);
  d["system"]["memory"] = 16;
  EXPECT_NE(error_of(d).find("system.memory"), std::string::npos) << error_of(d);
}

TEST(PipelineScenario, PipeDreamLevelsKey) {
  json d = base_scenario();
  d["system"]["policy"] = "pipedream";
  EXPECT_TRUE(parse(d).pipedream_levels.empty());  // one level over the hosts' links, the default
  d["system"]["pipedream_levels"] =
      json::parse(R"([{"machines": 2, "bandwidth": "80Gbps"}, {"machines": 2}])");
  const TrainingParams p = parse(d);
  ASSERT_EQ(p.pipedream_levels.size(), 2u);
  EXPECT_EQ(p.pipedream_levels[0].machines, 2u);
  EXPECT_DOUBLE_EQ(p.pipedream_levels[0].bandwidth, 10e9);
  EXPECT_DOUBLE_EQ(p.pipedream_levels[1].bandwidth, 0);  // the hosts' links when PipeDream plans
  // Errors name the path.
  d["system"]["pipedream_levels"] = json::parse(R"([{"machines": 3}, {"machines": 2}])");
  EXPECT_NE(error_of(d).find("system.pipedream_levels[0].bandwidth: required"), std::string::npos)
      << error_of(d);
  d["system"]["pipedream_levels"] = json::parse(R"([{"machines": 3, "bandwidth": "1Gbps"}])");
  EXPECT_NE(error_of(d).find("system.pipedream_levels: the levels' machines multiply to 3"),
            std::string::npos)
      << error_of(d);
  d["system"]["pipedream_levels"] = json::parse(R"([{"machines": 0}])");
  EXPECT_NE(error_of(d).find("system.pipedream_levels[0].machines"), std::string::npos)
      << error_of(d);
  d["system"]["pipedream_levels"] = json::parse(R"([{"machines": 4, "bandwith": "1Gbps"}])");
  EXPECT_NE(error_of(d).find("system.pipedream_levels[0].bandwith"), std::string::npos)
      << error_of(d);
  d["system"]["pipedream_levels"] = json::array();
  EXPECT_NE(error_of(d).find("system.pipedream_levels: expected at least one level"),
            std::string::npos)
      << error_of(d);
  d["system"]["pipedream_levels"] = json::parse(R"([{"machines": 4}])");
  d["system"]["memory"] = {{"constraint", true}};
  EXPECT_NE(error_of(d).find("system.pipedream_levels: PipeDream's memory check"),
            std::string::npos)
      << error_of(d);
  d = base_scenario();  // AutoPipe plans with its own timing model, not PipeDream's levels
  d["system"]["pipedream_levels"] = json::parse(R"([{"machines": 4}])");
  EXPECT_NE(error_of(d).find("system.pipedream_levels: only the \"pipedream\" policy"),
            std::string::npos)
      << error_of(d);
}
