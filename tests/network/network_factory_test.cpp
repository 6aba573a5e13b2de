#include "sim_core/network/network_factory.hpp"

#include <gtest/gtest.h>

#include "sim_core/base/error.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "sim_core/scenario/json_reader.hpp"

using namespace mlsim;

TEST(NetworkFactory, CoreBackendsAreRegisteredAndBuild) {
  BackendRegistry registry;
  register_core_backends(registry);
  const Topology topo = build_topology(StarSpec{2, LinkSpec{Bandwidth{1e9}, Time::zero()}});
  for (const char* name : {"analytic", "flow"}) {
    const BackendInfo* info = registry.find(name);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_FALSE(info->description.empty());
    nlohmann::json section = {{"backend", name}};
    JsonReader reader(section, "network");
    auto make = info->configure(reader);
    Engine engine;
    auto net = make(engine, topo);
    EXPECT_EQ(net->backend_name(), name);
    bool delivered = false;
    net->start_transfer(0, 1, Bytes{1000}, [&](const TransferResult& r) { delivered = !r.failed; });
    engine.run();
    EXPECT_TRUE(delivered);
    EXPECT_EQ(engine.now(), Time::us(1));
  }
}

TEST(NetworkFactory, UnknownOptionIsRejectedWithItsPath) {
  BackendRegistry registry;
  register_core_backends(registry);
  nlohmann::json section = {{"backend", "flow"}, {"mtu", 1500}};
  JsonReader reader(section, "network");
  try {
    registry.find("flow")->configure(reader);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "network.mtu");
  }
}

TEST(NetworkFactory, FlowRouteClassesOptionIsReadAndChecked) {
  BackendRegistry registry;
  register_core_backends(registry);
  const Topology topo = build_topology(StarSpec{3, LinkSpec{Bandwidth{1e9}, Time::zero()}});
  {  // On: two transfers on the same route share one class; each gets half of the 1 GB/s.
    nlohmann::json section = {{"backend", "flow"}, {"route_classes", true}};
    JsonReader reader(section, "network");
    auto make = registry.find("flow")->configure(reader);
    Engine engine;
    auto net = make(engine, topo);
    auto* fluid = dynamic_cast<FluidNetwork*>(net.get());
    ASSERT_NE(fluid, nullptr);
    const TransferId a = net->start_transfer(0, 1, Bytes{1000}, [](const TransferResult&) {});
    const TransferId b = net->start_transfer(0, 1, Bytes{1000}, [](const TransferResult&) {});
    engine.run_until(Time::ns(1));
    EXPECT_DOUBLE_EQ(fluid->current_rate(a), 5e8);
    EXPECT_DOUBLE_EQ(fluid->current_rate(b), 5e8);
    engine.run();
  }
  {  // Not a boolean: an error at its path.
    nlohmann::json section = {{"backend", "flow"}, {"route_classes", "yes"}};
    JsonReader reader(section, "network");
    try {
      registry.find("flow")->configure(reader);
      FAIL() << "no error";
    } catch (const InputError& e) {
      EXPECT_EQ(e.path(), "network.route_classes");
    }
  }
  {  // The analytic backend shares nothing: the option is unknown there.
    nlohmann::json section = {{"backend", "analytic"}, {"route_classes", true}};
    JsonReader reader(section, "network");
    try {
      registry.find("analytic")->configure(reader);
      FAIL() << "no error";
    } catch (const InputError& e) {
      EXPECT_EQ(e.path(), "network.route_classes");
    }
  }
}
