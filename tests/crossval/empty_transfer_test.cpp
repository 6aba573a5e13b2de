// An empty transfer (an acknowledgement, an empty request) on every backend of this build, built
// by name as a scenario builds it, with the options it is cross-validated with: delivered exactly
// once, after its route's latency, whatever else is in flight. Models may send empty messages
// (embcache's push acknowledgement, docs/embcache.md "Messages"), so a backend that never
// delivers one hangs the model (SimGrid 3.32 never starts an empty comm: simgrid_network.cpp).
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "sim_core/network/crossval/cross_validation.hpp"
#include "sim_core/scenario/json_reader.hpp"
#include "tests/support/network_fixtures.hpp"

using namespace mlsim;

namespace {

class EmptyTransfer : public ::testing::TestWithParam<std::string> {};

TEST_P(EmptyTransfer, ArrivesAfterItsRouteLatency) {
  const BackendRegistry registry = crossval::all_backends();
  const BackendInfo* info = registry.find(GetParam());
  if (info == nullptr) GTEST_SKIP() << GetParam() << " is not built";
  nlohmann::json options = crossval::validation_options(GetParam());
  options["backend"] = GetParam();
  JsonReader reader(options, "network");
  const auto factory = info->configure(reader);

  // Three hosts h0..h2 (nodes 1..3) on one switch, 1 us per link. By hand: host to host is two
  // links, 2 us; an empty transfer sends nothing, so it arrives 2 us after its start, on every
  // backend (no header, handshake or sharing applies to nothing). Started at 5 us beside a
  // 100 kB transfer already in flight from h0 to h1: 7 us. To oneself: at once (5 us).
  Engine engine;
  const Topology topology = test::star(3, Time::us(1));
  std::unique_ptr<Network> net = factory(engine, topology);
  test::Recorder rec;
  const TransferId full = net->start_transfer(1, 2, Bytes{100'000}, rec.callback());
  TransferId out = 0, back = 0, self = 0;
  engine.schedule_at(Time::us(5), [&] {
    out = net->start_transfer(1, 3, Bytes{0}, rec.callback());
    back = net->start_transfer(3, 1, Bytes{0}, rec.callback());
    self = net->start_transfer(2, 2, Bytes{0}, rec.callback());
  });
  engine.run();

  ASSERT_EQ(rec.results.size(), 4u);
  EXPECT_EQ(rec.finished(out), Time::us(7));
  EXPECT_EQ(rec.finished(back), Time::us(7));
  EXPECT_EQ(rec.finished(self), Time::us(5));
  for (TransferId id : {out, back, self}) {
    EXPECT_FALSE(rec.results.at(id).failed);
    EXPECT_EQ(rec.results.at(id).bytes, Bytes{0});
  }
  EXPECT_FALSE(rec.results.at(full).failed);
  const NetworkTotals n = net->totals();
  EXPECT_EQ(n.transfers_started, 4u);
  EXPECT_EQ(n.transfers_delivered, 4u);
  EXPECT_EQ(n.transfers_in_flight, 0u);
  EXPECT_EQ(n.bytes_delivered, Bytes{100'000});
}

INSTANTIATE_TEST_SUITE_P(Backends, EmptyTransfer,
                         ::testing::Values("analytic", "flow", "simgrid", "ns3"),
                         [](const auto& info) { return info.param; });

}  // namespace
