// Point-to-point messages through the collective layer (sim_core/collectives/point_to_point.hpp)
// against times computed by hand. Links are 1 GB/s (1 byte per ns) with 100 ns latency; on a star
// a message crosses two links, so 1 MB takes 1,000,000 + 200 ns when nothing else moves.
#include "sim_core/collectives/point_to_point.hpp"

#include <gtest/gtest.h>

#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "sim_core/network/topology_builders.hpp"

using namespace mlsim;
using namespace mlsim::collectives;

namespace {
const LinkSpec kP2pLink{Bandwidth{1e9}, Time::ns(100)};
constexpr Bytes kMB{1'000'000};
}  // namespace

TEST(PointToPoint, WithoutCostsASendIsOneTransfer) {
  // 1 MB from host 0 to host 1: 1,000,200 ns, exactly as Network::start_transfer.
  const Topology topo = build_topology(StarSpec{3, kP2pLink});
  for (Sharing sharing : {Sharing::kNone, Sharing::kMaxMin}) {
    Engine engine;
    FluidNetwork net(engine, topo, sharing);
    PointToPoint p2p(engine, net, {});
    Time arrived;
    p2p.send(topo.hosts()[0], topo.hosts()[1], kMB, [&](const CollectiveResult& r) {
      arrived = engine.now();
      EXPECT_EQ(r.operation, Operation::kSendRecv);
      EXPECT_EQ(r.bytes_sent, kMB);
    });
    EXPECT_EQ(p2p.in_flight(), 1u);
    engine.run();
    EXPECT_EQ(arrived, Time::ns(1'000'200));
    EXPECT_EQ(p2p.in_flight(), 0u);
    EXPECT_EQ(p2p.calls(), 1u);
    EXPECT_EQ(p2p.bytes_sent(), kMB.count);
    EXPECT_EQ(p2p.bytes_delivered(), kMB.count);
    EXPECT_EQ(p2p.wire_bytes(), kMB.count);
  }
}

TEST(PointToPoint, PaysLaunchHostOverheadOnOneClockAndHop) {
  // Two sends of 1 MB from host 0 at t = 0, to hosts 1 and 2, no bandwidth sharing (each has
  // the links to itself). Launch 2 us, Simple with a 1 us hop, host overhead 3 us on host 0's
  // one communication thread, message latency 4 us:
  //   A: launched at 2 us; host 0 busy 2-5 us; leaves at 5 + 4 = 9 us;
  //      arrives 9 us + 1,000,200 ns = 1,009,200 ns; reported 1 us later: 1,010,200 ns.
  //   B: launched at 2 us; host 0 busy 5-8 us (after A's overhead); leaves at 12 us;
  //      reported at 12 us + 1,000,200 + 1,000 ns = 1,013,200 ns.
  // Without the shared clock B's overhead would overlap A's and it would arrive with A.
  const Topology topo = build_topology(StarSpec{3, kP2pLink});
  Engine engine;
  FluidNetwork net(engine, topo, Sharing::kNone);
  PointToPoint::Options o;
  o.costs.launch = Time::us(2);
  o.costs.of(Protocol::kSimple) = {true, Time::us(1), 1.0};
  o.host.message_overhead = Time::us(3);
  o.host.message_latency = Time::us(4);
  PointToPoint p2p(engine, net, o);
  Time a, b;
  p2p.send(topo.hosts()[0], topo.hosts()[1], kMB,
           [&](const CollectiveResult&) { a = engine.now(); });
  p2p.send(topo.hosts()[0], topo.hosts()[2], kMB,
           [&](const CollectiveResult&) { b = engine.now(); });
  engine.run();
  EXPECT_EQ(a, Time::ns(1'010'200));
  EXPECT_EQ(b, Time::ns(1'013'200));
}

TEST(PointToPoint, PerByteCopyRunsBesideTheTransferOnTheSendersClock) {
  // Two sends of 1 MB from host 0 at t = 0, to hosts 1 and 2, no bandwidth sharing; host
  // overhead 3 us. The copy is booked on host 0's thread right after each message's overhead
  // and runs beside the transfer: a message is reported at max(arrival, copy end + latency).
  //   2 ns/B (slower than the 1 B/ns link), no message latency:
  //     A: overhead 0-3 us, copy 3,000-2,003,000 ns; leaves at 3 us, arrives 1,003,200 ns;
  //        reported when its copy ends: 2,003,000 ns.
  //     B: overhead 2,003,000-2,006,000, copy until 4,006,000; arrives 3,006,200: 4,006,000 ns.
  //   2 ns/B and a message latency of 4 us: A leaves at 7 us, arrives 1,007,200, copy ends
  //     2,003,000 + 4,000: 2,007,000 ns; B 4,010,000 ns.
  //   0.5 ns/B (faster than the link): A's copy ends at 503,000, before it arrives
  //     (1,003,200 ns, as without the copy); B's overhead waits for A's copy: 503,000-506,000,
  //     leaves at 506,000, arrives 1,506,200 ns (1,006,200 without the copy).
  //   0 ns/B: as without the key, 1,003,200 and 1,006,200 ns.
  const Topology topo = build_topology(StarSpec{3, kP2pLink});
  auto times = [&](double per_byte_ns, Time latency) {
    Engine engine;
    FluidNetwork net(engine, topo, Sharing::kNone);
    PointToPoint::Options o;
    o.host.message_overhead = Time::us(3);
    o.host.message_latency = latency;
    o.host.per_byte_ns = per_byte_ns;
    PointToPoint p2p(engine, net, o);
    Time a, b;
    p2p.send(topo.hosts()[0], topo.hosts()[1], kMB,
             [&](const CollectiveResult&) { a = engine.now(); });
    p2p.send(topo.hosts()[0], topo.hosts()[2], kMB,
             [&](const CollectiveResult&) { b = engine.now(); });
    engine.run();
    EXPECT_EQ(p2p.bytes_delivered(), 2 * kMB.count);
    return std::pair{a, b};
  };
  EXPECT_EQ(times(2, Time::zero()), std::pair(Time::ns(2'003'000), Time::ns(4'006'000)));
  EXPECT_EQ(times(2, Time::us(4)), std::pair(Time::ns(2'007'000), Time::ns(4'010'000)));
  EXPECT_EQ(times(0.5, Time::zero()), std::pair(Time::ns(1'003'200), Time::ns(1'506'200)));
  EXPECT_EQ(times(0, Time::zero()), std::pair(Time::ns(1'003'200), Time::ns(1'006'200)));
}

TEST(PointToPoint, ProtocolEfficiencyPutsMoreBytesOnTheWire) {
  // LL only (efficiency 0.5, hop 500 ns): 1 MB puts 2 MB on the wire:
  // 2,000,000 + 200 + 500 ns = 2,000,700 ns.
  const Topology topo = build_topology(StarSpec{2, kP2pLink});
  Engine engine;
  FluidNetwork net(engine, topo, Sharing::kMaxMin);
  PointToPoint::Options o;
  o.costs.of(Protocol::kLL) = {true, Time::ns(500), 0.5};
  PointToPoint p2p(engine, net, o);
  Time t;
  p2p.send(topo.hosts()[0], topo.hosts()[1], kMB,
           [&](const CollectiveResult&) { t = engine.now(); });
  engine.run();
  EXPECT_EQ(t, Time::ns(2'000'700));
  EXPECT_EQ(p2p.bytes_sent(), kMB.count);
  EXPECT_EQ(p2p.wire_bytes(), 2 * kMB.count);
}

TEST(PointToPoint, ACallbackMaySendAgainAndSlotsAreReused) {
  // A chain of three 1 MB messages 0 -> 1 -> 2 -> 0, each sent from the previous one's
  // callback: 3 x 1,000,200 ns, one message in flight at a time.
  const Topology topo = build_topology(StarSpec{3, kP2pLink});
  Engine engine;
  FluidNetwork net(engine, topo, Sharing::kMaxMin);
  PointToPoint p2p(engine, net, {});
  const auto& h = topo.hosts();
  int hops = 0;
  std::function<void(std::size_t)> next = [&](std::size_t from) {
    p2p.send(h[from], h[(from + 1) % 3], kMB, [&, from](const CollectiveResult&) {
      EXPECT_EQ(p2p.in_flight(), 1u);  // this one's callback is running
      if (++hops < 3) next((from + 1) % 3);
    });
  };
  next(0);
  engine.run();
  EXPECT_EQ(hops, 3);
  EXPECT_EQ(engine.now(), Time::ns(3'000'600));
  EXPECT_EQ(p2p.calls(), 3u);
  EXPECT_EQ(p2p.bytes_delivered(), 3 * kMB.count);
  EXPECT_EQ(p2p.in_flight(), 0u);
}

TEST(PointToPoint, AFailedSendNeverCompletesAndIsCounted) {
  // Host 1's link is down: the message cannot arrive, its callback never runs.
  const Topology topo = build_topology(StarSpec{2, kP2pLink});
  Engine engine;
  FluidNetwork net(engine, topo, Sharing::kMaxMin);
  LinkConditions links(topo, net);
  for (LinkId l = 0; l < topo.links().size(); ++l) links.set_link_up(l, false);
  PointToPoint p2p(engine, net, {}, &links);
  bool called = false;
  p2p.send(topo.hosts()[0], topo.hosts()[1], kMB, [&](const CollectiveResult&) { called = true; });
  engine.run();
  EXPECT_FALSE(called);
  EXPECT_EQ(p2p.failed_transfers(), 1u);
  EXPECT_EQ(p2p.in_flight(), 1u);
  EXPECT_EQ(p2p.bytes_delivered(), 0);
}

TEST(PointToPoint, AFailedTransferIsReportedOnceToTheFailureCallback) {
  // Host 1's downlink is down: a message 0 -> 1 finds no route and fails; 0 -> 2 arrives at
  // 1,000,200 ns. Two failing messages report once each (the callback runs per failed call,
  // the owner keeps the first: EmbeddingSync's report_failure runs once), the good one never.
  const Topology topo = build_topology(StarSpec{3, kP2pLink});
  Engine engine;
  FluidNetwork net(engine, topo, Sharing::kMaxMin);
  LinkConditions links(topo, net);
  for (LinkId l = 0; l < topo.links().size(); ++l)
    if (topo.link(l).dst == topo.hosts()[1]) links.set_link_up(l, false);
  PointToPoint p2p(engine, net, {});
  int failures = 0;
  p2p.set_failure_callback([&] { ++failures; });
  int arrived = 0;
  p2p.send(topo.hosts()[0], topo.hosts()[2], kMB, [&](const CollectiveResult&) { ++arrived; });
  p2p.send(topo.hosts()[0], topo.hosts()[1], kMB, [&](const CollectiveResult&) { ++arrived; });
  p2p.send(topo.hosts()[2], topo.hosts()[1], kMB, [&](const CollectiveResult&) { ++arrived; });
  engine.run();
  EXPECT_EQ(arrived, 1);
  EXPECT_EQ(failures, 2);
  EXPECT_EQ(p2p.failed_transfers(), 2u);
}
