// Cancelling a collective mid-flight (Collective::cancel, its destructor, PointToPoint::cancel):
// every transfer it has in the network is cancelled there, its pending engine events are
// dropped, nothing calls back afterwards, and bytes stay accounted on both sides.
// Links are 1 GB/s (1 byte per ns) with 100 ns latency; on a star a message crosses two links.
#include <gtest/gtest.h>

#include <memory>

#include "sim_core/collectives/collective.hpp"
#include "sim_core/collectives/point_to_point.hpp"
#include "sim_core/engine/random.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "sim_core/network/topology_builders.hpp"

using namespace mlsim;
using namespace mlsim::collectives;

namespace {
const LinkSpec kCancelLink{Bandwidth{1e9}, Time::ns(100)};
constexpr Bytes kCancelMB{1'000'000};

// The network ended every transfer: started = delivered + failed, none in flight.
void expect_network_settled(const Network& net) {
  const NetworkTotals t = net.totals();
  EXPECT_EQ(t.transfers_in_flight, 0u);
  EXPECT_EQ(t.bytes_in_flight.count, 0);
  EXPECT_EQ(t.transfers_started, t.transfers_delivered + t.transfers_failed);
  EXPECT_EQ(t.bytes_started.count, t.bytes_delivered.count + t.bytes_failed.count);
}
}  // namespace

TEST(CollectiveCancel, RingAllReduceCancelledMidStep) {
  // Ring all-reduce of S = 4 MB over 4 hosts of a star, one chunk, window 1: 6 steps, each
  // host sending one 1 MB segment to its successor per step over its own uplink and the
  // successor's downlink (no sharing): a step takes 1,000,000 + 200 ns. Step 1 is delivered at
  // 1,000,200 ns and step 2's four transfers start then; cancelled at 1,500,000 ns, they are
  // half sent. So: 8 transfers (8 MB) started, 4 delivered, 4 cancelled (failed in the
  // network, reported at the cancel time); the collective counts 8 MB sent = 4 MB delivered +
  // 4 MB cancelled. Both ways of ending it (cancel(), destruction) give the same figures.
  const Topology topo = build_topology(StarSpec{4, kCancelLink});
  for (bool destroy : {false, true}) {
    SCOPED_TRACE(destroy ? "destroyed" : "cancel()");
    Engine engine;
    FluidNetwork net(engine, topo, Sharing::kMaxMin);
    CollectiveSpec spec;
    spec.bytes = Bytes{4 * kCancelMB.count};
    int callbacks = 0;
    auto c = std::make_unique<Collective>(
        engine, net, std::vector<NodeId>(topo.hosts().begin(), topo.hosts().end()), spec,
        [&](const CollectiveResult&) { ++callbacks; });
    c->set_participant_callback([&](std::uint32_t, ParticipantEvent) { ++callbacks; });
    c->start();
    CollectiveResult at_cancel;
    engine.schedule_at(Time::ns(1'500'000), [&] {
      EXPECT_EQ(net.totals().transfers_in_flight, 4u);
      if (destroy) {
        c.reset();
      } else {
        c->cancel();
        at_cancel = c->result();
      }
    });
    engine.run();
    EXPECT_EQ(callbacks, 0);
    EXPECT_EQ(engine.pending_events(), 0u);
    expect_network_settled(net);
    const NetworkTotals t = net.totals();
    EXPECT_EQ(t.transfers_started, 8u);
    EXPECT_EQ(t.bytes_delivered.count, 4 * kCancelMB.count);
    EXPECT_EQ(t.bytes_failed.count, 4 * kCancelMB.count);
    if (!destroy) {
      // Nothing of it moved after the cancel (the network's own wake-up may still run later).
      EXPECT_EQ(c->result().bytes_delivered, at_cancel.bytes_delivered);
      EXPECT_EQ(c->result().transfers, at_cancel.transfers);
      EXPECT_FALSE(at_cancel.completed);
      EXPECT_TRUE(c->cancelled());
      EXPECT_EQ(at_cancel.bytes_sent.count, 8 * kCancelMB.count);
      EXPECT_EQ(at_cancel.bytes_delivered.count, 4 * kCancelMB.count);
      EXPECT_EQ(at_cancel.bytes_cancelled.count, 4 * kCancelMB.count);
      EXPECT_EQ(at_cancel.failed_transfers, 0u);  // cancelled, not failed by the network
    }
  }
}

TEST(CollectiveCancel, DropsLaunchOverheadHopAndAggregationEvents) {
  // Every kind of event a collective defers: launch latency (2 us), host overhead (3 us) and
  // message latency (4 us) before a transfer starts, the protocol's hop latency (1 us) after
  // it arrived, and the parameter server's aggregation (1 GB/s: 1 ms per MB). The collective
  // is cancelled at random times across its run (ps, ring, tree); after the cancel nothing of
  // it runs (its counts stay as they were at the cancel), the engine drains, the network ends every
  // transfer, and the collective's payload sent = delivered + cancelled (no link fails).
  const Topology topo = build_topology(StarSpec{5, kCancelLink});
  RandomStream rng(7);
  for (Algorithm a : {Algorithm::kParameterServer, Algorithm::kRing, Algorithm::kTree}) {
    int cancelled_trials = 0;
    for (int trial = 0; trial < 20; ++trial) {
      SCOPED_TRACE(std::string(to_string(a)) + " trial " + std::to_string(trial));
      Engine engine;
      FluidNetwork net(engine, topo, Sharing::kMaxMin);
      CollectiveSpec spec;
      spec.algorithm = a;
      spec.bytes = Bytes{4 * kCancelMB.count};
      spec.chunks = 4;
      spec.window = 2;
      spec.costs.launch = Time::us(2);
      spec.costs.of(Protocol::kSimple) = {true, Time::us(1), 1.0};
      spec.host.message_overhead = Time::us(3);
      spec.host.message_latency = Time::us(4);
      spec.host.ps_aggregation = Bandwidth{1e9};
      bool called = false;
      Collective c(engine, net, std::vector<NodeId>(topo.hosts().begin(), topo.hosts().end()), spec,
                   [&](const CollectiveResult&) { called = true; });
      // Uncancelled, each of these runs in well under 20 ms (at most 8 MB through one link).
      const Time when = Time::ns(static_cast<std::int64_t>(rng.below(20'000'000)));
      c.start();
      bool cancelled = false;
      CollectiveResult at_cancel;
      Bytes network_delivered_at_cancel;
      engine.schedule_at(when, [&] {
        if (c.done()) return;
        c.cancel();
        cancelled = true;
        at_cancel = c.result();
        network_delivered_at_cancel = net.totals().bytes_delivered;
      });
      engine.run();
      EXPECT_EQ(engine.pending_events(), 0u);
      expect_network_settled(net);
      const CollectiveResult r = c.result();
      EXPECT_EQ(r.bytes_sent.count, r.bytes_delivered.count + r.bytes_cancelled.count);
      if (cancelled) {
        EXPECT_FALSE(called);
        EXPECT_EQ(r.bytes_delivered, at_cancel.bytes_delivered);  // nothing moved afterwards
        EXPECT_EQ(r.transfers, at_cancel.transfers);
        // The network delivered nothing more: what was in flight ended failed.
        EXPECT_EQ(net.totals().bytes_delivered, network_delivered_at_cancel);
      } else {
        EXPECT_TRUE(called);
        EXPECT_EQ(r.bytes_cancelled.count, 0);
      }
      cancelled_trials += cancelled ? 1 : 0;
    }
    EXPECT_GT(cancelled_trials, 5) << to_string(a);  // the times do fall inside the runs
  }
}

TEST(CollectiveCancel, PointToPointCancelsEveryCallInFlight) {
  // Two 1 MB sends from host 0 (to hosts 1 and 2) share host 0's uplink: 0.5 byte/ns each, so
  // at 1 ms each has 0.5 MB sent and neither arrived. cancel() then ends both: no callback, 2 MB
  // cancelled, 2 transfers failed in the network. A send made afterwards runs normally
  // (1,000,200 ns alone).
  const Topology topo = build_topology(StarSpec{3, kCancelLink});
  Engine engine;
  FluidNetwork net(engine, topo, Sharing::kMaxMin);
  PointToPoint p2p(engine, net, {});
  int callbacks = 0;
  const NodeId h0 = topo.hosts()[0], h1 = topo.hosts()[1], h2 = topo.hosts()[2];
  p2p.send(h0, h1, kCancelMB, [&](const CollectiveResult&) { ++callbacks; });
  p2p.send(h0, h2, kCancelMB, [&](const CollectiveResult&) { ++callbacks; });
  Time later_arrived;
  engine.schedule_at(Time::ms(1), [&] {
    EXPECT_EQ(p2p.in_flight(), 2u);
    p2p.cancel();
    EXPECT_EQ(p2p.in_flight(), 0u);
    p2p.send(h0, h1, kCancelMB, [&](const CollectiveResult&) { later_arrived = engine.now(); });
  });
  engine.run();
  EXPECT_EQ(callbacks, 0);
  EXPECT_EQ(later_arrived, Time::ms(1) + Time::ns(1'000'200));
  EXPECT_EQ(p2p.bytes_cancelled(), 2 * kCancelMB.count);
  EXPECT_EQ(p2p.bytes_sent(), 3 * kCancelMB.count);
  EXPECT_EQ(p2p.bytes_delivered(), kCancelMB.count);
  EXPECT_EQ(net.totals().transfers_failed, 2u);
  expect_network_settled(net);
}
