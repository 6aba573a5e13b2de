// The scenario-facing model: strict reading of "system", and metrics in Results.
#include <gtest/gtest.h>

#include "models/collectives/collectives_model.hpp"
#include "models/collectives/register.hpp"
#include "sim_core/error.hpp"
#include "sim_core/fluid_network.hpp"
#include "sim_core/hardware.hpp"
#include "sim_core/topology_builders.hpp"

using namespace mlsim;

namespace {
const LinkSpec kLink{Bandwidth{1e9}, Time::ns(100)};

std::string error_of(nlohmann::json system, std::size_t hosts = 8) {
  try {
    JsonReader r(system, "system");
    collectives::read_collectives_params(r, hosts);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST(CollectivesModel, RunsThroughTheRegistry) {
  ModelRegistry registry;
  register_collectives(registry);
  const ModelInfo* info = registry.find("collectives");
  ASSERT_NE(info, nullptr);

  const Topology topo = build_topology(RingSpec{4, kLink});
  HardwareCatalog hardware;
  nlohmann::json scenario = {
      {"system", {{"model", "collectives"}, {"algorithm", "ring"}, {"bytes", "4MB"}}}};
  JsonReader root(scenario, "");
  ModelSetup setup{root, topo, hardware, ".", 1};
  auto model = info->make(setup);
  // Defaults are written back for the resolved scenario.
  EXPECT_EQ(scenario["system"]["chunks"], 1);

  Engine engine;
  FluidNetwork net(engine, topo, Sharing::kMaxMin);
  ModelEnv env{engine, net, topo, hardware, 1, "."};
  model->start(env);
  engine.run();
  EXPECT_DOUBLE_EQ(model->progress(env), 1.0);
  Results out;
  model->finish(env, out);
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
  const auto p = collectives::read_collectives_params(r, 8);
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
