// The flow backend with tens of thousands of flows in one max-min component. Before the backend
// kept its end-of-sending times in its own heap, every re-solve cancelled and rescheduled one
// engine event per flow, and 10k flows on one link exhausted the engine's event slots.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology_builders.hpp"

using namespace mlsim;

namespace {
// Two hosts through one switch: every flow crosses host 0's uplink and host 1's downlink.
// 1 GB/s links with 100 ns of latency.
const LinkSpec kLink{Bandwidth{1e9}, Time::ns(100)};
constexpr int kFlows = 20'000;
constexpr std::int64_t kBytes = 1'000;
// With and without route classes.
class ScaleModes : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(FluidNetworkScale, ScaleModes, ::testing::Values(false, true),
                         [](const auto& info) {
                           return info.param ? "route_classes" : "per_transfer";
                         });
}  // namespace

TEST_P(ScaleModes, TwentyThousandEqualFlowsOnOneLinkFinishTogether) {
  Engine engine;
  const Topology topology = build_topology(StarSpec{2, kLink});
  FluidNetwork net(engine, topology, Sharing::kMaxMin, GetParam());
  const NodeId a = topology.hosts()[0], b = topology.hosts()[1];
  std::vector<Time> finished;
  finished.reserve(kFlows);
  for (int i = 0; i < kFlows; ++i)
    net.start_transfer(a, b, Bytes{kBytes}, [&](const TransferResult& r) {
      EXPECT_FALSE(r.failed);
      finished.push_back(r.finished);
    });
  engine.run();

  // Each flow gets B / N = 1e9 / 20000 = 50 kB/s, so all send their 1000 bytes in
  // N * S / B = 20 ms, then arrive after the route's two 100 ns links.
  ASSERT_EQ(finished.size(), static_cast<std::size_t>(kFlows));
  const Time expected = Time::ms(20) + Time::ns(200);
  for (Time t : finished) ASSERT_EQ(t, expected);

  // Conservation: every byte started was delivered, and carried once by each link of the route.
  const NetworkTotals totals = net.totals();
  EXPECT_EQ(totals.transfers_started, static_cast<std::uint64_t>(kFlows));
  EXPECT_EQ(totals.transfers_delivered, static_cast<std::uint64_t>(kFlows));
  EXPECT_EQ(totals.bytes_delivered.count, totals.bytes_started.count);
  EXPECT_EQ(totals.bytes_delivered.count, kFlows * kBytes);
  EXPECT_EQ(totals.transfers_in_flight, 0u);
  const auto route = net.router().route(a, b, 0);
  ASSERT_TRUE(route.has_value());
  ASSERT_EQ(route->links.size(), 2u);
  for (LinkId l : route->links) {
    EXPECT_EQ(net.link_stats(l).bytes_carried.count, kFlows * kBytes) << "link " << l;
    EXPECT_NEAR(net.link_stats(l).busy_seconds, 0.02, 1e-9) << "link " << l;
  }
  // The engine never held more than a handful of the backend's events.
  EXPECT_LT(engine.events_processed(), 100u);
}

TEST_P(ScaleModes, StaggeredEndsInOneComponentKeepBytesAndOrder) {
  // 1000 flows of sizes 1..1000 bytes start together on the same route: with equal shares they
  // finish in size order, and flow k (1-based) ends sending when the k smallest have sent:
  //   T_k = sum_{j<k} (N - j + 1) * (s_j - s_{j-1}) / B, with s_j = j, i.e.
  //   T_k = (k * N - k * (k - 1) / 2) bytes / B  (B = 1 byte/ns).
  constexpr int n = 1'000;
  Engine engine;
  const Topology topology = build_topology(StarSpec{2, kLink});
  FluidNetwork net(engine, topology, Sharing::kMaxMin, GetParam());
  const NodeId a = topology.hosts()[0], b = topology.hosts()[1];
  std::vector<std::int64_t> order;
  std::vector<Time> finished;
  for (int k = n; k >= 1; --k)  // started largest first: the order must come from the sizes
    net.start_transfer(a, b, Bytes{k}, [&, k](const TransferResult& r) {
      order.push_back(k);
      finished.push_back(r.finished);
    });
  engine.run();
  ASSERT_EQ(order.size(), static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const std::int64_t k = i + 1;
    ASSERT_EQ(order[static_cast<std::size_t>(i)], k);
    const std::int64_t send_ns = k * n - k * (k - 1) / 2;
    // Each end is rounded up to the nanosecond after a re-solve: a few ns of drift at most.
    ASSERT_NEAR(static_cast<double>(finished[static_cast<std::size_t>(i)].count_ns()),
                static_cast<double>(send_ns + 200), 1e-6 * static_cast<double>(send_ns) + 10)
        << "flow of " << k << " bytes";
  }
  EXPECT_EQ(net.totals().bytes_delivered.count, std::int64_t{n} * (n + 1) / 2);
}

TEST(FluidNetworkScale, SameRouteTransfersShareLikeAProcessorSharingQueue) {
  // Three transfers of 1, 2 and 3 MB from a to b at t = 0 (one route class) and one of 1 MB from
  // a to c at 0.5 ms (another class, sharing a's uplink). By hand, on 1 GB/s links:
  //   0 - 0.5 ms: three at 1/3 GB/s each: 0.1667 MB sent each.
  //   from 0.5 ms: four on a's uplink at 0.25 GB/s. The 1 MB one has 0.8333 MB left: it ends
  //     first, at 0.5 + 0.8333 / 0.25 = 3.8333 ms.
  //   at 3.8333 ms: 1 MB ends; three left at 1/3 GB/s. 2 MB one: 2 - 0.1667 - 0.8333 = 1 MB
  //     left; a->c: 1 - 0.8333 = 0.1667 MB left; 3 MB one: 2 MB left.
  //   a->c ends at 3.8333 + 0.1667 * 3 = 4.3333 ms; then two at 0.5 GB/s: the 2 MB one has
  //     1 - 0.1667 = 0.8333 MB left: ends at 4.3333 + 1.6667 = 6 ms; the 3 MB one then has
  //     2 - 0.1667 - 0.8333 = 1 MB left, alone at 1 GB/s: ends at 7 ms.
  // Each arrives 200 ns (two 100 ns links) after its last byte leaves; ends are rounded up to the
  // nanosecond.
  Engine engine;
  const Topology topology = build_topology(StarSpec{3, kLink});
  FluidNetwork net(engine, topology, Sharing::kMaxMin, /*route_classes=*/true);
  const NodeId a = topology.hosts()[0], b = topology.hosts()[1], c = topology.hosts()[2];
  std::vector<std::int64_t> end_ns(4, 0);
  for (int i = 0; i < 3; ++i)
    net.start_transfer(a, b, Bytes{1'000'000 * (i + 1)},
                       [&, i](const TransferResult& r) { end_ns[i] = r.finished.count_ns(); });
  engine.schedule_at(Time::us(500), [&] {
    net.start_transfer(a, c, Bytes{1'000'000},
                       [&](const TransferResult& r) { end_ns[3] = r.finished.count_ns(); });
  });
  engine.run();
  EXPECT_NEAR(end_ns[0], 3'833'333 + 200, 2);
  EXPECT_NEAR(end_ns[3], 4'333'333 + 200, 2);
  EXPECT_NEAR(end_ns[1], 6'000'000 + 200, 3);
  EXPECT_NEAR(end_ns[2], 7'000'000 + 200, 3);
  // a's uplink carried all 7 MB.
  for (LinkId l = 0; l < topology.links().size(); ++l)
    if (topology.links()[l].src == a) {
      EXPECT_EQ(net.link_stats(l).bytes_carried.count, 7'000'000);
    }
}

TEST(FluidNetworkScale, ClassesFrozenAtOneLinkShareOneClockThatChangesRateInPlace) {
  // Four senders to one receiver on a star, two transfers each on the same route (four route
  // classes of two), sizes 1..8 MB: sender i sends i+1 and i+5 MB. The receiver's downlink (1
  // GB/s) carries all eight, so it freezes all four classes: one rate group. By hand, as a
  // processor-sharing queue of 8 (1 MB at 1 GB/s = 1 ms): the k MB transfer ends when each has
  // sent k MB, at sum_{j<=k} (9 - j) ms = 8, 15, 21, 26, 30, 33, 35, 36 ms, and arrives 200 ns
  // (two 100 ns links) later; ends are rounded up to the nanosecond.
  // The mechanism: each of the first six ends re-solves the four classes (or fewer) at the same
  // bottleneck, so the group changes rate in place (one clock settled, one event re-timed) and
  // no class moves: 4 group entries (the classes forming) and 6 in-place rate changes. At 35 ms
  // the last transfer is alone and leaves its class.
  // The same with 1 TB in place of 1 MB (ends at 8000 s, ...): the group's clock passes 1e12
  // bytes, where it moves its origin (every class's `sent` back to 0) to keep byte precision.
  for (const std::int64_t unit : {std::int64_t{1'000'000}, std::int64_t{1'000'000'000'000}}) {
    Engine engine;
    const Topology topology = build_topology(StarSpec{5, kLink});
    FluidNetwork net(engine, topology, Sharing::kMaxMin, /*route_classes=*/true);
    const NodeId receiver = topology.hosts()[4];
    std::vector<std::int64_t> end_ns(9, 0);  // by size in units
    std::vector<TransferId> ids;
    for (int i = 0; i < 4; ++i)
      for (int size : {i + 1, i + 5})
        ids.push_back(net.start_transfer(
            topology.hosts()[static_cast<std::size_t>(i)], receiver, Bytes{unit * size},
            [&, size](const TransferResult& r) { end_ns[size] = r.finished.count_ns(); }));
    const double unit_ns = static_cast<double>(unit);                     // 1 unit at 1 GB/s
    engine.run_until(Time::ns(static_cast<std::int64_t>(10 * unit_ns)));  // seven left, 1/7 GB/s
    for (std::size_t k = 1; k < ids.size(); ++k)
      EXPECT_NEAR(net.current_rate(ids[k]), 1e9 / 7, 1e-3) << "transfer " << k;
    engine.run();
    const int want_units[9] = {0, 8, 15, 21, 26, 30, 33, 35, 36};
    for (int k = 1; k <= 8; ++k)
      EXPECT_NEAR(static_cast<double>(end_ns[k]), want_units[k] * unit_ns + 200,
                  3 + 1e-12 * want_units[k] * unit_ns)
          << k << " units of " << unit << " bytes";
    EXPECT_EQ(net.solve_stats().group_entries, 4u);
    EXPECT_EQ(net.solve_stats().group_rate_changes, 6u);
    for (LinkId l = 0; l < topology.links().size(); ++l)
      if (topology.links()[l].dst == receiver) {
        EXPECT_EQ(net.link_stats(l).bytes_carried.count, 36 * unit);
      }
  }
}

TEST(FluidNetworkScale, ClassAloneInItsGroupTakesTheGroupToItsNewBottleneck) {
  // A star of 1 GB/s links. At 0: host A sends 8 transfers to B (one route class of 8, alone on
  // A's uplink and B's downlink: 1/8 GB/s each, frozen at the lower link id, A's uplink; one
  // rate group). At 1 ms: host E sends 8 transfers to B and 16 to F. By hand, progressive
  // filling: E's uplink (24 transfers) fills first, at 1/24 GB/s; B's downlink then has
  // 1 - 8/24 = 2/3 GB/s left for A's 8: 1/12 GB/s each, below A's uplink's 1/8, so A's class
  // moves to B's downlink, where no other class is frozen (E's are at E's uplink).
  // The mechanism: the class is alone in its group, so the group follows it to the new link and
  // takes the new rate (one clock settled, one event re-timed) instead of the class leaving a
  // group that is then freed and entering a new one: 3 group entries (A's class, E's two new
  // ones), not 4.
  Engine engine;
  const Topology topology = build_topology(StarSpec{4, kLink});
  FluidNetwork net(engine, topology, Sharing::kMaxMin, /*route_classes=*/true);
  const NodeId a = topology.hosts()[0], b = topology.hosts()[1], e = topology.hosts()[2],
               f = topology.hosts()[3];
  const Bytes size{100'000'000};
  std::vector<TransferId> ab, eb, ef;
  for (int i = 0; i < 8; ++i)
    ab.push_back(net.start_transfer(a, b, size, [](const TransferResult&) {}));
  engine.run_until(Time::us(500));
  for (TransferId id : ab) EXPECT_NEAR(net.current_rate(id), 1e9 / 8, 1e-3);
  engine.schedule_at(Time::ms(1), [&] {
    for (int i = 0; i < 8; ++i)
      eb.push_back(net.start_transfer(e, b, size, [](const TransferResult&) {}));
    for (int i = 0; i < 16; ++i)
      ef.push_back(net.start_transfer(e, f, size, [](const TransferResult&) {}));
  });
  engine.run_until(Time::us(1500));
  for (TransferId id : ab) EXPECT_NEAR(net.current_rate(id), 1e9 / 12, 1e-3);
  for (TransferId id : eb) EXPECT_NEAR(net.current_rate(id), 1e9 / 24, 1e-3);
  for (TransferId id : ef) EXPECT_NEAR(net.current_rate(id), 1e9 / 24, 1e-3);
  EXPECT_EQ(net.solve_stats().group_entries, 3u);
}

TEST_P(ScaleModes, APhaseStartedInOneCallCostsOneSolve) {
  // A bulk phase, as a collective's step: 8 senders (hosts 0-7) each send 1 MB to each of 8
  // receivers (hosts 8-15) of a 1 GB/s star, 64 transfers started by one start_transfers call.
  // Every uplink and every downlink carries 8 of them, so by hand each gets 1e9 / 8 B/s and all
  // end sending at 1e6 B / 1.25e8 B/s = 8 ms, delivered 200 ns later (two 100 ns links).
  // The mechanism: each start adds its links to the solve pending at this instant, so the phase
  // costs one max-min solve of the 64, not one per start (a second phase, started from an event
  // at 20 ms, costs one more).
  Engine engine;
  const Topology topology = build_topology(StarSpec{16, kLink});
  FluidNetwork net(engine, topology, Sharing::kMaxMin, GetParam());
  std::vector<Time> finished;
  auto phase = [&] {
    std::vector<TransferRequest> requests;
    for (std::size_t s = 0; s < 8; ++s)
      for (std::size_t d = 8; d < 16; ++d)
        requests.push_back(
            TransferRequest{topology.hosts()[s], topology.hosts()[d], Bytes{1'000'000},
                            [&](const TransferResult& r) { finished.push_back(r.finished); }});
    net.start_transfers(requests);
    return requests;
  };
  const std::vector<TransferRequest> first = phase();
  EXPECT_EQ(net.solve_stats().solves, 0u);  // pending: solved once, at this instant
  engine.run_until(Time::ms(1));
  EXPECT_EQ(net.solve_stats().solves, 1u);
  for (const TransferRequest& r : first) EXPECT_NEAR(net.current_rate(r.id), 1e9 / 8, 1e-3);
  engine.run_until(Time::ms(19));
  ASSERT_EQ(finished.size(), 64u);
  for (Time t : finished) EXPECT_EQ(t, Time::ms(8) + Time::ns(200));
  const std::uint64_t before = net.solve_stats().solves;
  std::vector<TransferRequest> second;
  engine.schedule_at(Time::ms(20), [&] { second = phase(); });
  engine.run_until(Time::ms(21));
  EXPECT_EQ(net.solve_stats().solves, before + 1);
  for (const TransferRequest& r : second) EXPECT_NEAR(net.current_rate(r.id), 1e9 / 8, 1e-3);
  engine.run();
  ASSERT_EQ(finished.size(), 128u);
  for (std::size_t i = 64; i < 128; ++i) EXPECT_EQ(finished[i], Time::ms(28) + Time::ns(200));
}

TEST(FluidNetworkScale, FillingsOfOneStepAreCounted) {
  // SolveStats::one_step counts the in-place fillings (route classes) that froze everything at
  // one link: the single-bottleneck fast path's case (docs/plans/flow_fast_path.md).
  // Incast: hosts 0-3 each send 4 transfers to host 4 (1 GB/s star), started in one call. Host
  // 4's downlink carries 16, each uplink 4: by hand the filling freezes all 16 at the downlink at
  // 1e9 / 16 in its first step, so the one solve is a one-step filling.
  // Two levels: as above, and host 0 also sends 8 to host 5. Host 4's downlink (16) fills first
  // at 1e9 / 16, freezing host 0's 4 there; host 0's uplink then has 1e9 - 4e9 / 16 = 0.75e9 left
  // for its other 8: 3e9 / 32 each, below host 5's downlink share (1e9 / 8): a second step.
  for (const bool two_levels : {false, true}) {
    Engine engine;
    const Topology topology = build_topology(StarSpec{6, kLink});
    FluidNetwork net(engine, topology, Sharing::kMaxMin, /*route_classes=*/true);
    std::vector<TransferRequest> incast, other;
    for (std::size_t s = 0; s < 4; ++s)
      for (int i = 0; i < 4; ++i)
        incast.push_back(TransferRequest{topology.hosts()[s], topology.hosts()[4],
                                         Bytes{1'000'000'000}, [](const TransferResult&) {}});
    if (two_levels)
      for (int i = 0; i < 8; ++i)
        other.push_back(TransferRequest{topology.hosts()[0], topology.hosts()[5],
                                        Bytes{1'000'000'000}, [](const TransferResult&) {}});
    net.start_transfers(incast);
    net.start_transfers(other);
    engine.run_until(Time::ms(1));
    EXPECT_EQ(net.solve_stats().solves, 1u);
    EXPECT_EQ(net.solve_stats().one_step, two_levels ? 0u : 1u);
    for (const TransferRequest& r : incast) EXPECT_NEAR(net.current_rate(r.id), 1e9 / 16, 1e-3);
    for (const TransferRequest& r : other) EXPECT_NEAR(net.current_rate(r.id), 3e9 / 32, 1e-3);
  }
}
