// The ns-3 backend on cases small enough to reason about packet by packet. Bounds, not exact
// values: TCP's handshake, slow start and 40 B of headers per 1460 B segment are real effects.
#ifdef MLSIM_HAVE_NS3
#include "sim_core/network/ns3/ns3_network.hpp"

#include <gtest/gtest.h>

#include "sim_core/base/error.hpp"
#include "tests/support/network_fixtures.hpp"

using namespace mlsim;
using namespace mlsim::test;

namespace {

// Bytes on the wire per byte of payload: 1460 B segments in 1500 B IP packets + 2 B PPP.
constexpr double kTcpWireFactor = 1502.0 / 1460.0;

}  // namespace

TEST(Ns3Network, OneTcpFlowTakesWireBytesOverBandwidthPlusHandshake) {
  Engine engine;
  const Topology topo = star(2, Time::us(1));
  Ns3Network net(engine, topo, Ns3Options{});
  Recorder rec;
  const TransferId id = net.start_transfer(1, 2, Bytes{1'000'000}, rec.callback());
  engine.run();
  ASSERT_EQ(rec.results.size(), 1u);
  EXPECT_FALSE(rec.results.at(id).failed);
  // At least: the wire bytes at 1 GB/s plus the handshake and one-way propagation.
  const double floor = 1e6 * kTcpWireFactor / 1e9 + 3 * 2e-6;
  EXPECT_GT(rec.seconds(id), floor);
  // At most a few round trips more (the initial window of 10 segments already covers the
  // bandwidth-delay product here).
  EXPECT_LT(rec.seconds(id), floor + 50e-6);
  EXPECT_EQ(net.totals().transfers_delivered, 1u);
  EXPECT_EQ(net.link_stats(0).bytes_carried, Bytes{1'000'000});
  EXPECT_GT(net.packet_counters().packets_sent, 2 * 685u);  // two hops of data segments
}

TEST(Ns3Network, DeliveryStartsTheNextFlowAtItsExactDate) {
  Engine engine;
  const Topology topo = star(2, Time::us(1));
  Ns3Network net(engine, topo, Ns3Options{});
  std::vector<Time> starts, ends;
  std::function<void(int)> send = [&](int left) {
    starts.push_back(engine.now());
    net.start_transfer(1, 2, Bytes{100'000}, [&, left](const TransferResult& r) {
      ends.push_back(r.finished);
      EXPECT_FALSE(r.failed);
      EXPECT_EQ(engine.now(), r.finished);
      if (left > 1) send(left - 1);
    });
  };
  send(3);
  engine.run();
  ASSERT_EQ(ends.size(), 3u);
  EXPECT_EQ(starts[1], ends[0]);
  EXPECT_EQ(starts[2], ends[1]);
  // Each flow takes about the same time (same path, fresh connection each time).
  const double first = ends[0].seconds(), second = (ends[1] - ends[0]).seconds();
  EXPECT_NEAR(second, first, 0.05 * first);
}

TEST(Ns3Network, IncastSharesTheReceiverLink) {
  Engine engine;
  const Topology topo = star(5, Time::us(1));
  Ns3Network net(engine, topo, Ns3Options{});
  Recorder rec;
  for (NodeId h = 1; h <= 4; ++h) net.start_transfer(h, 5, Bytes{250'000}, rec.callback());
  engine.run();
  ASSERT_EQ(rec.results.size(), 4u);
  double last = 0;
  for (const auto& [id, r] : rec.results) last = std::max(last, r.finished.seconds());
  // 1 MB in total through one 1 GB/s port.
  const double floor = 1e6 * kTcpWireFactor / 1e9;
  EXPECT_GT(last, floor);
  EXPECT_LT(last, 1.15 * floor);
}

TEST(Ns3Network, EcmpFlowsFollowTheirOwnPaths) {
  // a and b are joined by two disjoint 1 GB/s paths; two flows hashed onto different paths each
  // get a full path, onto the same path they share it.
  Engine engine;
  const TwoPaths p =
      two_paths({.a_s0 = Bandwidth{1e12}, .a_s1 = Bandwidth{1e12}, .latency = Time::us(1)});
  const Topology& t = p.topology;
  const NodeId a = p.a, b = p.b;
  const std::uint64_t l0 = label_through(t, a, b, p.a_s0), l1 = label_through(t, a, b, p.a_s1);
  // b's two links carry the two paths: with one flow each, both finish in ~1 MB / 1 GB/s.
  Ns3Network net(engine, t, Ns3Options{});
  Recorder rec;
  const TransferId f0 = net.start_transfer(a, b, Bytes{1'000'000}, rec.callback(), l0);
  const TransferId f1 = net.start_transfer(a, b, Bytes{1'000'000}, rec.callback(), l1);
  engine.run();
  const double alone = 1e6 * kTcpWireFactor / 1e9;
  EXPECT_LT(rec.seconds(f0), 1.1 * alone);
  EXPECT_LT(rec.seconds(f1), 1.1 * alone);
  EXPECT_EQ(net.link_stats(4).bytes_carried, Bytes{1'000'000});  // s0 -> b
  EXPECT_EQ(net.link_stats(6).bytes_carried, Bytes{1'000'000});  // s1 -> b
}

TEST(Ns3Network, FailedLinkReroutesTheFlow) {
  Engine engine;
  const TwoPaths p = two_paths({.latency = Time::us(1)});
  const Topology& t = p.topology;
  const NodeId a = p.a, b = p.b;
  const LinkId a0 = p.a_s0;
  const std::uint64_t via0 = label_through(t, a, b, a0);
  Ns3Network net(engine, t, Ns3Options{});
  Recorder rec;
  const TransferId id = net.start_transfer(a, b, Bytes{1'000'000}, rec.callback(), via0);
  engine.schedule_at(Time::us(300), [&] {
    net.set_link_up(a0, false);
    net.set_link_up(a0 + 1, false);
  });
  engine.run();
  ASSERT_EQ(rec.results.size(), 1u);
  EXPECT_FALSE(rec.results.at(id).failed);
  // Packets in flight on the dead link are lost and retransmitted after the 1 ms minimum RTO.
  EXPECT_GT(rec.seconds(id), 1e6 * kTcpWireFactor / 1e9);
  EXPECT_LT(rec.seconds(id), 0.01);
}

TEST(Ns3Network, FlowWithoutRouteFailsAndCancelReportsOnce) {
  Engine engine;
  const Topology topo = star(3, Time::us(1));
  Ns3Network net(engine, topo, Ns3Options{});
  Recorder rec;
  const TransferId cut = net.start_transfer(1, 2, Bytes{1'000'000}, rec.callback());
  const TransferId cancelled = net.start_transfer(1, 3, Bytes{1'000'000}, rec.callback());
  engine.schedule_at(Time::us(100), [&] {
    net.set_link_up(3, false);  // sw -> h1: `cut` has no other way
    EXPECT_TRUE(net.cancel_transfer(cancelled));
    EXPECT_FALSE(net.cancel_transfer(cancelled));
  });
  engine.run();
  EXPECT_TRUE(rec.results.at(cut).failed);
  EXPECT_TRUE(rec.results.at(cancelled).failed);
  EXPECT_EQ(rec.results.at(cut).finished, Time::us(100));
  EXPECT_EQ(net.totals().transfers_failed, 2u);
}

TEST(Ns3Network, PacedUdpRunsAtLineRateWithoutHandshake) {
  Engine engine;
  const Topology topo = star(2, Time::us(1));
  Ns3Options o;
  o.packets.tcp = false;
  Ns3Network net(engine, topo, o);
  Recorder rec;
  const TransferId id = net.start_transfer(1, 2, Bytes{1'000'000}, rec.callback());
  engine.run();
  // 1472 B datagrams, 1502 B on the wire each, paced at 1 GB/s; store-and-forward adds one
  // packet time at the switch.
  const double packets = std::ceil(1e6 / 1472);
  const double expected = (packets - 1) * 1502 / 1e9 + 2 * 1502 / 1e9 + 2e-6;
  EXPECT_NEAR(rec.seconds(id), expected, 2e-6);
}

TEST(Ns3Network, OnlyOneLiveInstancePerProcess) {
  Engine engine;
  const Topology topo = star(2, Time::zero());
  Ns3Network net(engine, topo, Ns3Options{});
  EXPECT_THROW(Ns3Network(engine, topo, Ns3Options{}), InvariantError);
}

TEST(Ns3Network, EstimatesPacketsFromBytesAndMtu) {
  EXPECT_EQ(estimated_packets(Bytes{1460}, 1500), 1u);
  EXPECT_EQ(estimated_packets(Bytes{1461}, 1500), 2u);
  EXPECT_EQ(estimated_packets(Bytes{0}, 1500), 0u);
}
#endif  // MLSIM_HAVE_NS3
