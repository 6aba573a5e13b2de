// The analytic and flow backends against timings computed by hand. Links are 1 GB/s (1 byte per
// ns) with 100 ns of latency unless said otherwise, so every expected time is a whole number of
// nanoseconds.
#include "sim_core/network/fluid_network.hpp"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "sim_core/base/error.hpp"
#include "sim_core/network/topology_builders.hpp"

using namespace mlsim;

namespace {
const LinkSpec kFluidLink{Bandwidth{1e9}, Time::ns(100)};

struct FluidHarness {
  Engine engine;
  Topology topology;
  FluidNetwork net;
  std::map<TransferId, TransferResult> results;
  int callbacks = 0;

  FluidHarness(Topology t, Sharing sharing, bool route_classes = false)
      : topology(std::move(t)), net(engine, topology, sharing, route_classes) {}

  TransferId send(NodeId a, NodeId b, std::int64_t bytes, std::uint64_t label = 0) {
    return net.start_transfer(
        a, b, Bytes{bytes},
        [this](const TransferResult& r) {
          ++callbacks;
          EXPECT_TRUE(results.emplace(r.id, r).second) << "callback ran twice";
        },
        label);
  }
  Time finished(TransferId id) const { return results.at(id).finished; }
};

class BothBackends : public ::testing::TestWithParam<Sharing> {};
INSTANTIATE_TEST_SUITE_P(Fluid, BothBackends, ::testing::Values(Sharing::kNone, Sharing::kMaxMin),
                         [](const auto& info) {
                           return info.param == Sharing::kNone ? "analytic" : "flow";
                         });
// The flow backend's hand-computed sharing cases, with and without route classes.
class FlowModes : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(Flow, FlowModes, ::testing::Values(false, true), [](const auto& info) {
  return info.param ? "route_classes" : "per_transfer";
});

bool flow(Sharing s) {
  return s == Sharing::kMaxMin;
}
}  // namespace

TEST_P(BothBackends, LoneTransferIsLatencyPlusBytesOverBandwidth) {
  FluidHarness h(build_topology(StarSpec{2, kFluidLink}), GetParam());
  const auto id = h.send(0, 1, 1'000'000);
  h.engine.run();
  EXPECT_EQ(h.finished(id), Time::ns(1'000'000 + 200));
  EXPECT_FALSE(h.results.at(id).failed);
  EXPECT_EQ(h.net.link_stats(0).bytes_carried, Bytes{1'000'000});
  EXPECT_DOUBLE_EQ(h.net.link_stats(0).busy_seconds, 1e-3);
  EXPECT_EQ(h.engine.events_processed(), 1u);  // no event for the end of sending
}

TEST_P(BothBackends, SelfAndEmptyTransfers) {
  FluidHarness h(build_topology(StarSpec{2, kFluidLink}), GetParam());
  const auto self = h.send(1, 1, 5000);
  const auto empty = h.send(0, 1, 0);
  h.engine.run();
  EXPECT_EQ(h.finished(self), Time::zero());
  EXPECT_EQ(h.finished(empty), Time::ns(200));
  EXPECT_EQ(h.net.link_stats(0).bytes_carried, Bytes{0});
}

TEST_P(BothBackends, IncastEightToOne) {
  // Hosts 1..8 each send 1 MB to host 0 through the switch's port to host 0.
  FluidHarness h(build_topology(StarSpec{9, kFluidLink}), GetParam());
  std::vector<TransferId> ids;
  for (NodeId s = 1; s <= 8; ++s) ids.push_back(h.send(s, 0, 1'000'000));
  h.engine.run_until(Time::us(1));
  for (auto id : ids) EXPECT_DOUBLE_EQ(h.net.current_rate(id), flow(GetParam()) ? 1.25e8 : 1e9);
  h.engine.run();
  // Flow: 1/8 of the port each, 8 ms. Analytic: no sharing, 1 ms each.
  const Time send = flow(GetParam()) ? Time::ms(8) : Time::ms(1);
  for (auto id : ids) EXPECT_EQ(h.finished(id), send + Time::ns(200));
  const LinkId port = 1;  // sw -> h0 (host 0's cable is the first one)
  EXPECT_EQ(h.topology.link(port).dst, 0u);
  EXPECT_EQ(h.net.link_stats(port).bytes_carried, Bytes{8'000'000});
  EXPECT_NEAR(h.net.link_stats(port).busy_seconds, send.seconds(), 1e-12);
}

TEST_P(FlowModes, ParkingLot) {
  // A chain n0-n1-n2-n3. Long flow n0->n3 (1 MB) and one short flow per hop (0.5 MB): every link
  // is shared by two flows at 0.5 GB/s, the shorts finish sending at 1 ms, then the long flow has
  // 0.5 MB left at 1 GB/s: 1.5 ms.
  ExplicitSpec spec;
  for (const char* n : {"n0", "n1", "n2", "n3"}) spec.nodes.push_back({n, NodeKind::kHost});
  spec.links = {{"n0", "n1", kFluidLink}, {"n1", "n2", kFluidLink}, {"n2", "n3", kFluidLink}};
  FluidHarness h(build_topology(spec), Sharing::kMaxMin, GetParam());
  const auto longf = h.send(0, 3, 1'000'000);
  std::vector<TransferId> shorts = {h.send(0, 1, 500'000), h.send(1, 2, 500'000),
                                    h.send(2, 3, 500'000)};
  h.engine.run_until(Time::ns(10));
  EXPECT_DOUBLE_EQ(h.net.current_rate(longf), 5e8);
  for (auto id : shorts) EXPECT_DOUBLE_EQ(h.net.current_rate(id), 5e8);
  h.engine.run();
  for (auto id : shorts) EXPECT_EQ(h.finished(id), Time::ns(1'000'000 + 100));
  EXPECT_EQ(h.finished(longf), Time::ns(1'500'000 + 300));
}

TEST_P(FlowModes, TwoBottlenecks) {
  // h0 -A(1 GB/s)- h1 -B(0.4 GB/s)- h2. f1: h0->h2 over A and B, f2: h0->h1 over A, f3: h1->h2
  // over B. B fills first (0.2 GB/s each for f1, f3); f2 gets the 0.8 GB/s left on A.
  ExplicitSpec spec;
  for (const char* n : {"h0", "h1", "h2"}) spec.nodes.push_back({n, NodeKind::kHost});
  spec.links = {{"h0", "h1", kFluidLink}, {"h1", "h2", LinkSpec{Bandwidth{4e8}, Time::ns(100)}}};
  FluidHarness h(build_topology(spec), Sharing::kMaxMin, GetParam());
  const auto f1 = h.send(0, 2, 1'000'000);
  const auto f2 = h.send(0, 1, 1'000'000);
  const auto f3 = h.send(1, 2, 1'000'000);
  h.engine.run_until(Time::ns(1));
  EXPECT_DOUBLE_EQ(h.net.current_rate(f1), 2e8);
  EXPECT_DOUBLE_EQ(h.net.current_rate(f2), 8e8);
  EXPECT_DOUBLE_EQ(h.net.current_rate(f3), 2e8);
  h.engine.run();
  // f2 sends 1 MB at 0.8 GB/s: 1.25 ms. f1 and f3 share B to the end: 5 ms.
  EXPECT_EQ(h.finished(f2), Time::ns(1'250'000 + 100));
  EXPECT_EQ(h.finished(f1), Time::ns(5'000'000 + 200));
  EXPECT_EQ(h.finished(f3), Time::ns(5'000'000 + 100));
}

TEST_P(FlowModes, LateArrivalSharesThenLeaves) {
  // A: 2 MB h1->h0 from 0. B: 0.5 MB h2->h0 from 1 ms. Alone, A sends 1 MB by 1 ms; then both
  // get 0.5 GB/s: B is done at 2 ms, A has 0.5 MB left at 1 GB/s: 2.5 ms.
  FluidHarness h(build_topology(StarSpec{3, kFluidLink}), Sharing::kMaxMin, GetParam());
  const auto a = h.send(1, 0, 2'000'000);
  TransferId b = 0;
  h.engine.schedule_at(Time::ms(1), [&] { b = h.send(2, 0, 500'000); });
  h.engine.run();
  EXPECT_EQ(h.finished(b), Time::ns(2'000'000 + 200));
  EXPECT_EQ(h.finished(a), Time::ns(2'500'000 + 200));
  EXPECT_EQ(h.net.link_stats(1).bytes_carried, Bytes{2'500'000});
  EXPECT_NEAR(h.net.link_stats(1).busy_seconds, 2.5e-3, 1e-12);
}

TEST_P(BothBackends, BandwidthChangeMidTransfer) {
  // 2 MB at 1 GB/s; at 1 ms the first hop drops to 0.5 GB/s: the last 1 MB takes 2 ms.
  FluidHarness h(build_topology(StarSpec{2, kFluidLink}), GetParam());
  const auto id = h.send(0, 1, 2'000'000);
  h.engine.schedule_at(Time::ms(1), [&n = h.net] { n.set_link_bandwidth(0, Bandwidth{5e8}); });
  h.engine.run();
  EXPECT_EQ(h.finished(id), Time::ns(3'000'000 + 200));
  EXPECT_EQ(h.net.link_stats(0).bytes_carried, Bytes{2'000'000});
}

TEST_P(BothBackends, LinkFailureMidTransferReroutesKeepingBytesSent) {
  // Ring of 4. 0->1 directly; at 1 ms link 0->1 fails: the 1 MB left goes 0->3->2->1.
  FluidHarness h(build_topology(RingSpec{4, kFluidLink}), GetParam());
  const auto id = h.send(0, 1, 2'000'000);
  h.engine.schedule_at(Time::ms(1), [&n = h.net] { n.set_link_up(0, false); });
  h.engine.run();
  EXPECT_FALSE(h.results.at(id).failed);
  EXPECT_EQ(h.finished(id), Time::ns(2'000'000 + 300));
  EXPECT_EQ(h.net.link_stats(0).bytes_carried, Bytes{1'000'000});
  EXPECT_EQ(h.net.link_stats(7).bytes_carried, Bytes{1'000'000});  // 0->3
  EXPECT_NEAR(h.net.link_stats(0).busy_seconds, 1e-3, 1e-12);
}

TEST_P(BothBackends, LinkFailureWithoutDetourFailsAndNeverHangs) {
  FluidHarness h(build_topology(StarSpec{3, kFluidLink}), GetParam());
  const auto cut = h.send(0, 1, 2'000'000);
  const auto other = h.send(2, 1, 1'000'000);
  h.engine.schedule_at(Time::ms(1), [&n = h.net] { n.set_link_up(0, false); });  // h0 -> switch
  TransferId after = 0;
  h.engine.schedule_at(Time::ms(2), [&] { after = h.send(0, 2, 10); });
  h.engine.run();
  EXPECT_TRUE(h.results.at(cut).failed);
  EXPECT_EQ(h.finished(cut), Time::ms(1));
  EXPECT_TRUE(h.results.at(after).failed);
  EXPECT_EQ(h.finished(after), Time::ms(2));
  EXPECT_FALSE(h.results.at(other).failed);
  const auto t = h.net.totals();
  EXPECT_EQ(t.transfers_failed, 2u);
  EXPECT_EQ(t.bytes_failed, Bytes{2'000'010});
  EXPECT_EQ(t.transfers_in_flight, 0u);
  // The failed transfer's bytes sent before the failure still crossed the link.
  EXPECT_EQ(h.net.link_stats(0).bytes_carried, Bytes{flow(GetParam()) ? 500'000 : 1'000'000});
}

TEST_P(BothBackends, CancelReportsFailureAndFreesBandwidth) {
  FluidHarness h(build_topology(StarSpec{3, kFluidLink}), GetParam());
  const auto a = h.send(1, 0, 2'000'000);
  const auto b = h.send(2, 0, 2'000'000);
  h.engine.schedule_at(Time::ms(1), [&] {
    EXPECT_TRUE(h.net.cancel_transfer(a));
    EXPECT_FALSE(h.net.cancel_transfer(a));  // already cancelled
  });
  h.engine.run();
  EXPECT_TRUE(h.results.at(a).failed);
  EXPECT_EQ(h.finished(a), Time::ms(1));
  // Flow: b had 0.5 MB by 1 ms, then 1.5 MB alone: 2.5 ms. Analytic: 2 ms regardless.
  EXPECT_EQ(h.finished(b), (flow(GetParam()) ? Time::ns(2'500'000) : Time::ms(2)) + Time::ns(200));
  EXPECT_FALSE(h.net.cancel_transfer(b));  // delivered
  EXPECT_EQ(h.callbacks, 2);
}

TEST_P(BothBackends, EcmpRoutesAreDeterministic) {
  const Topology t = build_topology(FatTreeSpec{4, kFluidLink});
  Engine e1, e2;
  FluidNetwork n1(e1, t, GetParam()), n2(e2, t, GetParam());
  for (std::uint64_t label = 0; label < 16; ++label) {
    const auto a = n1.start_transfer(0, 15, Bytes{1000}, nullptr, label);
    const auto b = n2.start_transfer(0, 15, Bytes{1000}, nullptr, label);
    const auto ra = n1.current_route(a), rb = n2.current_route(b);
    EXPECT_EQ(std::vector<LinkId>(ra.begin(), ra.end()), std::vector<LinkId>(rb.begin(), rb.end()));
    EXPECT_EQ(ra.size(), 6u);
  }
  e1.run();
  e2.run();
}

TEST_P(FlowModes, UnequalSizesOnOneLinkAreWorkConserving) {
  // 1 MB and 3 MB into the same port: 0.5 GB/s each until 2 ms, then 2 MB alone: 4 ms.
  FluidHarness h(build_topology(StarSpec{3, kFluidLink}), Sharing::kMaxMin, GetParam());
  const auto small = h.send(1, 0, 1'000'000);
  const auto big = h.send(2, 0, 3'000'000);
  h.engine.run();
  EXPECT_EQ(h.finished(small), Time::ns(2'000'000 + 200));
  EXPECT_EQ(h.finished(big), Time::ns(4'000'000 + 200));
}

TEST_P(BothBackends, NonPositiveBandwidthIsRejected) {
  FluidHarness h(build_topology(StarSpec{2, kFluidLink}), GetParam());
  EXPECT_THROW(h.net.set_link_bandwidth(0, Bandwidth{0}), InputError);
}

TEST_P(BothBackends, StopInADeliveryCallbackHoldsTheOtherDeliveriesOfThatInstant) {
  // Three 1 MB transfers from three hosts into host 0 arrive together (analytic: 1 GB/s each,
  // 1 ms; flow: 1/3 GB/s each, 3 ms). The backend runs its due events in one engine event; a
  // stop() from the first callback must hold the other two, as between engine events.
  FluidHarness h(build_topology(StarSpec{4, kFluidLink}), GetParam());
  int seen = 0;
  for (NodeId s = 1; s <= 3; ++s)
    h.net.start_transfer(s, 0, Bytes{1'000'000}, [&](const TransferResult&) {
      if (++seen == 1) h.engine.stop();
    });
  h.engine.run();
  EXPECT_EQ(seen, 1);
  const Time at = h.engine.now();
  EXPECT_EQ(at, Time::ns((flow(GetParam()) ? 3'000'000 : 1'000'000) + 200));
  h.engine.run();
  EXPECT_EQ(seen, 3);
  EXPECT_EQ(h.engine.now(), at);
}
