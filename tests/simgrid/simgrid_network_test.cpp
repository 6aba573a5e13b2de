// Hand-computed cases for the SimGrid backend with CM02 (every test of this binary uses CM02:
// SimGrid fixes its model once per process; LV08 is tested in tests/simgrid_lv08).
#ifdef MLSIM_HAVE_SIMGRID
#include "sim_core/network/simgrid/simgrid_network.hpp"

#include <gtest/gtest.h>

#include "sim_core/base/error.hpp"
#include "tests/support/network_fixtures.hpp"

using namespace mlsim;
using namespace mlsim::test;

namespace {

SimGridOptions cm02(SimGridOptions::Latency latency = SimGridOptions::Latency::kAfterSending) {
  SimGridOptions o;
  o.latency = latency;
  return o;
}

}  // namespace

TEST(SimGridNetwork, OneFlowTakesLatencyPlusSizeOverBandwidth) {
  Engine engine;
  const Topology topo = star(2, Time::us(1));
  SimGridNetwork net(engine, topo, cm02());
  Recorder rec;
  const TransferId id = net.start_transfer(1, 2, Bytes{1'000'000}, rec.callback());
  engine.run();
  // two links of 1 us, then 1 MB at 1 GB/s
  EXPECT_EQ(rec.finished(id), Time::us(2) + Time::ms(1));
  EXPECT_FALSE(rec.results.at(id).failed);
  EXPECT_EQ(net.totals().transfers_delivered, 1u);
  EXPECT_EQ(net.link_stats(0).bytes_carried, Bytes{1'000'000});
  EXPECT_NEAR(net.link_stats(0).busy_seconds, 0.001, 1e-9);  // busy while sending
}

TEST(SimGridNetwork, TwoFlowsIntoOneHostShareItsLink) {
  Engine engine;
  const Topology topo = star(3, Time::zero());
  SimGridNetwork net(engine, topo, cm02());
  Recorder rec;
  const TransferId a = net.start_transfer(1, 3, Bytes{1'000'000}, rec.callback());
  const TransferId b = net.start_transfer(2, 3, Bytes{3'000'000}, rec.callback());
  engine.run();
  // both at 0.5 GB/s until a ends at 2 ms; b then has 2 MB left at 1 GB/s
  EXPECT_EQ(rec.finished(a), Time::ms(2));
  EXPECT_EQ(rec.finished(b), Time::ms(4));
}

TEST(SimGridNetwork, DeliveryCallbackCanStartTheNextTransferAtItsDate) {
  Engine engine;
  const Topology topo = star(2, Time::zero());
  SimGridNetwork net(engine, topo, cm02());
  std::vector<Time> done;
  std::function<void(int)> send = [&](int left) {
    net.start_transfer(1, 2, Bytes{500'000}, [&, left](const TransferResult& r) {
      done.push_back(r.finished);
      if (left > 1) send(left - 1);
    });
  };
  send(3);
  engine.run();
  EXPECT_EQ(done, (std::vector<Time>{Time::us(500), Time::ms(1), Time::us(1500)}));
}

TEST(SimGridNetwork, EngineEventsInterleaveWithCompletions) {
  Engine engine;
  const Topology topo = star(3, Time::zero());
  SimGridNetwork net(engine, topo, cm02());
  Recorder rec;
  const TransferId a = net.start_transfer(1, 3, Bytes{2'000'000}, rec.callback());
  TransferId b = 0;
  // b joins at 1 ms: a has 1 MB left, both then get 0.5 GB/s: a ends at 3 ms, b (1 MB) too
  engine.schedule_at(Time::ms(1),
                     [&] { b = net.start_transfer(2, 3, Bytes{1'000'000}, rec.callback()); });
  engine.run();
  EXPECT_EQ(rec.finished(a), Time::ms(3));
  EXPECT_EQ(rec.finished(b), Time::ms(3));
}

TEST(SimGridNetwork, ParkingLotIsMaxMinFairWithLatencyAfterSending) {
  // h0 -> s0 -> s1 -> s2 -> h3 chain: the long flow crosses the three inner links, each short
  // flow one of them. Max-min: everybody gets 0.5 GB/s on the inner links.
  Engine engine;
  const ParkingLot lot = parking_lot(kGBps, Time::us(1));
  const Topology& t = lot.topology;
  const std::vector<NodeId>& h = lot.hosts;
  SimGridNetwork net(engine, t, cm02());
  Recorder rec;
  const TransferId lng = net.start_transfer(h[0], h[3], Bytes{1'000'000}, rec.callback());
  std::vector<TransferId> shorts;
  for (int i = 0; i < 3; ++i)
    shorts.push_back(net.start_transfer(h[i], h[i + 1], Bytes{1'000'000}, rec.callback()));
  engine.run();
  // All send at 0.5 GB/s for 2 ms, then pay their route latency.
  for (TransferId id : shorts) EXPECT_EQ(rec.finished(id), Time::ms(2) + Time::us(1));
  EXPECT_EQ(rec.finished(lng), Time::ms(2) + Time::us(3));
}

TEST(SimGridNetwork, LatencyInsideSimGridWeightsSharesByRouteLatency) {
  // Same parking lot with the latency inside SimGrid: CM02 weights each flow by its route
  // latency, so the long flow (3 us) gets 1/3 of a short flow's (1 us) rate: 0.25 vs 0.75 GB/s.
  Engine engine;
  const ParkingLot lot = parking_lot(kGBps, Time::us(1));
  const Topology& t = lot.topology;
  const std::vector<NodeId>& h = lot.hosts;
  SimGridNetwork net(engine, t, cm02(SimGridOptions::Latency::kInSimGrid));
  Recorder rec;
  const TransferId lng = net.start_transfer(h[0], h[3], Bytes{1'000'000}, rec.callback());
  const TransferId sh = net.start_transfer(h[1], h[2], Bytes{1'000'000}, rec.callback());
  engine.run();
  // The short flow runs alone at 1 GB/s during the long flow's extra 2 us of latency (2 kB),
  // then at 0.75 GB/s: 1 us + 2 us + 0.998 MB / 0.75 GB/s.
  const double short_end = 3e-6 + 998'000 / 0.75e9;
  EXPECT_NEAR(rec.finished(sh).seconds(), short_end, 2e-9);
  // The long flow moved 0.25 GB/s * (short_end - 3 us), then runs alone at 1 GB/s.
  const double long_left = 1e6 - 0.25e9 * (short_end - 3e-6);
  EXPECT_NEAR(rec.finished(lng).seconds(), short_end + long_left / 1e9, 2e-9);
}

TEST(SimGridNetwork, BandwidthChangeAppliesFromItsDate) {
  Engine engine;
  const Topology topo = star(2, Time::zero());
  SimGridNetwork net(engine, topo, cm02());
  Recorder rec;
  const TransferId id = net.start_transfer(1, 2, Bytes{1'000'000}, rec.callback());
  // half of the bytes by 0.5 ms, the other half at 0.25 GB/s: 2 ms more
  engine.schedule_at(Time::us(500),
                     [&] { net.set_link_bandwidth(3, Bandwidth{0.25e9}); });  // sw -> h1
  engine.run();
  EXPECT_EQ(rec.finished(id), Time::us(2500));
}

TEST(SimGridNetwork, FailedLinkReroutesOrFailsTransfers) {
  // Two switches between a and b (two equal paths), plus a host c reachable only via sw1.
  Engine engine;
  TwoPaths p = two_paths({});
  Topology& t = p.topology;
  const NodeId a = p.a, b = p.b;
  const LinkId a0 = p.a_s0, a1 = p.a_s1;
  const NodeId c = t.add_node("c", NodeKind::kHost);
  t.add_duplex_link(p.s1, c, kGBps, Time::zero());
  SimGridNetwork net(engine, t, cm02());
  Recorder rec;
  const std::uint64_t via0 = label_through(t, a, b, a0);
  const TransferId moved = net.start_transfer(a, b, Bytes{1'000'000}, rec.callback(), via0);
  const TransferId lost = net.start_transfer(a, c, Bytes{1'000'000}, rec.callback());
  // At 0.5 ms a->sw0 fails: `moved` (0.5 MB left) continues via sw1, sharing a->sw1 with `lost`
  // until a->sw1 fails too at 1 ms: `lost` then has no route and fails.
  engine.schedule_at(Time::us(500), [&] { net.set_link_up(a0, false); });
  engine.schedule_at(Time::ms(1), [&] { net.set_link_up(a1, false); });
  engine.run();
  EXPECT_TRUE(rec.results.at(lost).failed);
  EXPECT_EQ(rec.finished(lost), Time::ms(1));
  EXPECT_TRUE(rec.results.at(moved).failed);  // its second path died with a->sw1 as well
  EXPECT_EQ(net.totals().transfers_failed, 2u);
  // a->sw0 carried the first 0.5 MB of `moved`
  EXPECT_EQ(net.link_stats(a0).bytes_carried, Bytes{500'000});
}

TEST(SimGridNetwork, RerouteKeepsRemainingBytes) {
  Engine engine;
  const TwoPaths p = two_paths({.a_s1 = Bandwidth{0.5e9}});
  const NodeId a = p.a, b = p.b;
  const LinkId a0 = p.a_s0;
  SimGridNetwork net(engine, p.topology, cm02());
  const std::uint64_t via0 = label_through(p.topology, a, b, a0);
  Recorder rec;
  const TransferId id = net.start_transfer(a, b, Bytes{1'000'000}, rec.callback(), via0);
  engine.schedule_at(Time::us(500), [&] { net.set_link_up(a0, false); });
  engine.run();
  // 0.5 MB at 1 GB/s, then 0.5 MB at 0.5 GB/s via sw1
  EXPECT_FALSE(rec.results.at(id).failed);
  EXPECT_EQ(rec.finished(id), Time::us(1500));
}

TEST(SimGridNetwork, CancelReportsFailureOnce) {
  Engine engine;
  const Topology topo = star(2, Time::zero());
  SimGridNetwork net(engine, topo, cm02());
  int calls = 0;
  bool failed = false;
  const TransferId id = net.start_transfer(1, 2, Bytes{1'000'000}, [&](const TransferResult& r) {
    ++calls;
    failed = r.failed;
  });
  engine.schedule_at(Time::us(100), [&] { EXPECT_TRUE(net.cancel_transfer(id)); });
  engine.run();
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(failed);
  EXPECT_FALSE(net.cancel_transfer(id));
  EXPECT_EQ(net.link_stats(0).bytes_carried, Bytes{100'000});
}

TEST(SimGridNetwork, TransferToSelfCompletesAtOnce) {
  Engine engine;
  const Topology topo = star(2, Time::us(1));
  SimGridNetwork net(engine, topo, cm02());
  Recorder rec;
  engine.schedule_at(Time::us(7), [&] { net.start_transfer(1, 1, Bytes{10}, rec.callback()); });
  engine.run();
  ASSERT_EQ(rec.results.size(), 1u);
  EXPECT_EQ(rec.results.begin()->second.finished, Time::us(7));
}

// An empty message (an acknowledgement) crosses the network like any other: delivered once, after
// its route's latency, as on every backend (tests/network/fluid_network_test.cpp
// SelfAndEmptyTransfers, tests/ns3). By hand: two links of 1 us, no bytes: 2 us, in either
// latency mode; the 1 MB transfer beside it is not slowed (1 ms + 2 us).
TEST(SimGridNetwork, EmptyTransferIsDeliveredAfterItsRouteLatency) {
  for (const auto latency :
       {SimGridOptions::Latency::kAfterSending, SimGridOptions::Latency::kInSimGrid}) {
    SCOPED_TRACE(latency == SimGridOptions::Latency::kAfterSending ? "after sending"
                                                                   : "in SimGrid");
    Engine engine;
    const Topology topo = star(3, Time::us(1));
    SimGridNetwork net(engine, topo, cm02(latency));
    Recorder rec;
    const TransferId full = net.start_transfer(1, 2, Bytes{1'000'000}, rec.callback());
    TransferId empty = 0, later = 0;
    engine.schedule_at(Time::us(5), [&] {
      empty = net.start_transfer(1, 3, Bytes{0}, rec.callback());
      later = net.start_transfer(3, 1, Bytes{0}, rec.callback());
    });
    engine.run();
    ASSERT_EQ(rec.results.size(), 3u);
    EXPECT_EQ(rec.finished(empty), Time::us(7));
    EXPECT_EQ(rec.finished(later), Time::us(7));
    EXPECT_FALSE(rec.results.at(empty).failed);
    EXPECT_EQ(rec.finished(full), Time::ms(1) + Time::us(2));
    const NetworkTotals n = net.totals();
    EXPECT_EQ(n.transfers_started, 3u);
    EXPECT_EQ(n.transfers_delivered, 3u);
    EXPECT_EQ(n.transfers_in_flight, 0u);
  }
}

TEST(SimGridNetwork, SecondLiveInstanceOrOtherModelIsRefused) {
  Engine engine;
  const Topology topo = star(2, Time::zero());
  {
    SimGridNetwork net(engine, topo, cm02());
    EXPECT_THROW(SimGridNetwork(engine, topo, cm02()), InvariantError);
  }
  SimGridOptions lv08;
  lv08.model = SimGridOptions::Model::kLV08;
  EXPECT_THROW(SimGridNetwork(engine, topo, lv08), InputError);
}
#endif  // MLSIM_HAVE_SIMGRID
