// Properties of the fluid backends under random traffic, link failures, repairs, bandwidth
// changes and cancellations:
//   - every transfer reports exactly once, and started == delivered + failed + in flight;
//   - flow: rates are feasible (no link over capacity) and max-min fair (every sending flow
//     crosses a saturated link on which no flow gets more);
//   - analytic: every flow sends at its route's bottleneck bandwidth.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string_view>
#include <vector>

#include "sim_core/engine/random.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/max_min.hpp"
#include "sim_core/network/topology_builders.hpp"

using namespace mlsim;

namespace {

class Property : public ::testing::TestWithParam<Sharing> {};
INSTANTIATE_TEST_SUITE_P(Fluid, Property, ::testing::Values(Sharing::kNone, Sharing::kMaxMin),
                         [](const auto& info) {
                           return info.param == Sharing::kNone ? "analytic" : "flow";
                         });

void check_totals(const NetworkTotals& t, int callbacks) {
  EXPECT_EQ(t.transfers_started,
            t.transfers_delivered + t.transfers_failed + t.transfers_in_flight);
  EXPECT_EQ(t.bytes_started, t.bytes_delivered + t.bytes_failed + t.bytes_in_flight);
  EXPECT_EQ(static_cast<std::uint64_t>(callbacks), t.transfers_delivered + t.transfers_failed);
}

// Returns how many flows were sending below their route's bottleneck (sharing a link).
int check_rates(const FluidNetwork& net, const std::vector<TransferId>& ids,
                const std::vector<double>& capacity, Sharing sharing) {
  int shared = 0;
  std::vector<double> load(capacity.size(), 0), top(capacity.size(), 0);
  for (TransferId id : ids) {
    const double r = net.current_rate(id);
    if (r <= 0) continue;
    double bottleneck = 1e300;
    for (LinkId l : net.current_route(id)) {
      load[l] += r;
      top[l] = std::max(top[l], r);
      bottleneck = std::min(bottleneck, capacity[l]);
    }
    if (sharing == Sharing::kNone) {
      EXPECT_DOUBLE_EQ(r, bottleneck);
    } else if (r < bottleneck * 0.999) {
      ++shared;
    }
  }
  if (sharing == Sharing::kNone) return shared;
  for (std::size_t l = 0; l < capacity.size(); ++l)
    EXPECT_LE(load[l], capacity[l] * (1 + 1e-9)) << "link " << l << " over capacity";
  for (TransferId id : ids) {
    const double r = net.current_rate(id);
    if (r <= 0) continue;
    bool has_bottleneck = false;
    for (LinkId l : net.current_route(id))
      has_bottleneck |= load[l] >= capacity[l] * (1 - 1e-9) && r >= top[l] * (1 - 1e-9);
    EXPECT_TRUE(has_bottleneck) << "transfer " << id << " at " << r << " B/s has no bottleneck";
  }
  return shared;
}

// The allocation a from-scratch max-min solve gives the transfers sending now, in `ids` order (0
// for those not sending).
std::vector<double> from_scratch(const FluidNetwork& net, const std::vector<TransferId>& ids,
                                 const std::vector<double>& capacity) {
  MaxMinSolver solver;
  for (double c : capacity) solver.add_link(c);
  std::vector<std::int64_t> index(ids.size(), -1);
  std::int64_t n = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (net.current_rate(ids[i]) <= 0) continue;
    const auto route = net.current_route(ids[i]);
    solver.add_flow(std::vector<std::uint32_t>(route.begin(), route.end()));
    index[i] = n++;
  }
  const std::vector<double>& rates = solver.solve();
  std::vector<double> out(ids.size(), 0);
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (index[i] >= 0) out[i] = rates[static_cast<std::size_t>(index[i])];
  return out;
}

// What every test below sets up: one backend on a topology, its random stream, the links'
// capacities as the test changed them, and the transfers it started (in order).
struct Harness {
  Harness(const Topology& t, Sharing sharing, bool route_classes, std::uint64_t seed,
          std::string_view stream)
      : topo(t), net(engine, t, sharing, route_classes), rng(seed, stream) {
    for (const Link& l : t.links()) capacity.push_back(l.bandwidth.bytes_per_s);
  }
  std::uint32_t hosts() const { return static_cast<std::uint32_t>(topo.hosts().size()); }
  std::uint32_t links() const { return static_cast<std::uint32_t>(topo.links().size()); }
  // Link l's bandwidth becomes bw at t (the capacity the checks use follows).
  void change_bandwidth_at(Time t, LinkId l, double bw) {
    engine.schedule_at(t, [this, l, bw] {
      net.set_link_bandwidth(l, Bandwidth{bw});
      capacity[l] = bw;
    });
  }
  // At t, cancels the transfer at fraction `pick` of those started so far (if any).
  void cancel_at(Time t, double pick) {
    engine.schedule_at(t, [this, pick] {
      if (!ids.empty())
        net.cancel_transfer(ids[static_cast<std::size_t>(pick * static_cast<double>(ids.size()))]);
    });
  }
  // The backend's rates equal a from-scratch solve of everything sending, to 1e-9 relative;
  // `shared` counts the transfers sending below `lone_rate` (they share a link).
  ::testing::AssertionResult rates_from_scratch(int& shared, double lone_rate = 0.999e9) const {
    const std::vector<double> want = from_scratch(net, ids, capacity);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const double got = net.current_rate(ids[i]);
      if (!(std::abs(got - want[i]) <= 1e-9 * want[i]))
        return ::testing::AssertionFailure()
               << "transfer " << ids[i] << ": rate " << got << " B/s, from scratch " << want[i];
      if (got > 0 && got < lone_rate) ++shared;
    }
    return ::testing::AssertionSuccess();
  }

  const Topology& topo;
  Engine engine;
  FluidNetwork net;
  RandomStream rng;
  std::vector<double> capacity;
  std::vector<TransferId> ids;
};

}  // namespace

TEST_P(Property, RandomTrafficWithFailures) {
  const Sharing sharing = GetParam();
  const Topology topo = build_topology(FatTreeSpec{4, LinkSpec{Bandwidth{1e9}, Time::ns(250)}});
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    Harness h(topo, sharing, /*route_classes=*/seed % 2 == 0, seed, "fluid-property");
    Engine& engine = h.engine;
    FluidNetwork& net = h.net;
    RandomStream& rng = h.rng;
    int callbacks = 0, shared = 0;
    const auto at = [&] { return Time::ns(static_cast<std::int64_t>(rng.below(5'000'000))); };

    for (int i = 0; i < 300; ++i) {
      const auto src = static_cast<NodeId>(rng.below(h.hosts()));
      const auto dst = static_cast<NodeId>(rng.below(h.hosts()));
      const Bytes bytes{static_cast<std::int64_t>(rng.below(2'000'000))};
      const std::uint64_t label = rng.next_u64();
      engine.schedule_at(at(), [&, src, dst, bytes, label] {
        h.ids.push_back(net.start_transfer(
            src, dst, bytes, [&](const TransferResult&) { ++callbacks; }, label));
      });
    }
    for (int i = 0; i < 8; ++i) {
      const auto l = static_cast<LinkId>(rng.below(h.links()));
      engine.schedule_at(at(), [&net, l] { net.set_link_up(l, false); });
    }
    for (int i = 0; i < 4; ++i) {
      const auto l = static_cast<LinkId>(rng.below(h.links()));
      engine.schedule_at(at(), [&net, l] { net.set_link_up(l, true); });
    }
    for (int i = 0; i < 8; ++i) {
      const auto l = static_cast<LinkId>(rng.below(h.links()));
      const double bw = 2e8 + 1.8e9 * rng.uniform();
      h.change_bandwidth_at(at(), l, bw);
    }
    for (int i = 0; i < 30; ++i) {
      const double pick = rng.uniform();
      h.cancel_at(at(), pick);
    }

    for (int step = 1; step <= 24; ++step) {
      engine.run_until(Time::us(250 * step));
      check_totals(net.totals(), callbacks);
      shared += check_rates(net, h.ids, h.capacity, sharing);
    }
    engine.run();
    const NetworkTotals t = net.totals();
    check_totals(t, callbacks);
    EXPECT_EQ(t.transfers_in_flight, 0u);
    EXPECT_EQ(t.transfers_started, 300u);
    EXPECT_GT(t.transfers_delivered, 0u);
    // The case is not trivial: flows did share links (flow) and transfers did fail.
    if (sharing == Sharing::kMaxMin) {
      EXPECT_GT(shared, 0);
    }
    EXPECT_GT(t.transfers_failed, 0u);
    if (HasFailure()) return;
  }
}

TEST(FlowProperty, IncrementalRatesEqualAFromScratchSolve) {
  // Random arrivals (many on the same routes, so route classes hold several transfers), ends,
  // cancellations, bandwidth changes and link failures on a k=4 fat tree: at 60 instants the
  // backend's rates (kept incrementally, per route class) must equal those of a max-min solve of
  // every transfer sending, built from scratch, to 1e-9 relative. (The backend keeps a rate that
  // moved by less than 1e-12 relative; the orders of summation differ by rounding only.)
  const Topology topo = build_topology(FatTreeSpec{4, LinkSpec{Bandwidth{1e9}, Time::ns(250)}});
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    Harness h(topo, Sharing::kMaxMin, /*route_classes=*/true, seed, "fluid-incremental");
    Engine& engine = h.engine;
    FluidNetwork& net = h.net;
    RandomStream& rng = h.rng;
    const auto at = [&] { return Time::ns(static_cast<std::int64_t>(rng.below(3'000'000))); };
    for (int i = 0; i < 400; ++i) {
      // Half the transfers between 4 hosts with 2 labels: the same routes recur.
      const bool hot = rng.below(2) == 0;
      const auto src = static_cast<NodeId>(hot ? rng.below(2) : rng.below(h.hosts()));
      const auto dst = static_cast<NodeId>(hot ? 2 + rng.below(2) : rng.below(h.hosts()));
      const Bytes bytes{static_cast<std::int64_t>(1 + rng.below(1'000'000))};
      const std::uint64_t label = hot ? rng.below(2) : rng.next_u64();
      engine.schedule_at(at(), [&, src, dst, bytes, label] {
        h.ids.push_back(net.start_transfer(
            src, dst, bytes, [](const TransferResult&) {}, label));
      });
    }
    for (int i = 0; i < 6; ++i) {
      const auto l = static_cast<LinkId>(rng.below(h.links()));
      const double bw = 2e8 + 1.8e9 * rng.uniform();
      h.change_bandwidth_at(at(), l, bw);
    }
    for (int i = 0; i < 3; ++i) {
      const auto l = static_cast<LinkId>(rng.below(h.links()));
      engine.schedule_at(at(), [&net, l] { net.set_link_up(l, false); });
    }
    for (int i = 0; i < 20; ++i) {
      const double pick = rng.uniform();
      h.cancel_at(at(), pick);
    }
    int shared = 0;
    for (int step = 1; step <= 60; ++step) {
      engine.run_until(Time::us(50 * step));
      ASSERT_TRUE(h.rates_from_scratch(shared)) << "seed " << seed << " step " << step;
    }
    EXPECT_GT(shared, 100);  // not a trivial case: many transfers shared links
    engine.run();
  }
}

TEST(FlowProperty, BytesCarriedAreBytesDelivered) {
  // Conservation: with no failure or cancellation, every link carries exactly the bytes of the
  // transfers routed over it, however their rates changed (route classes count bytes per class
  // and correct each member's end to its exact size). Links report whole bytes: each may be off
  // by the rounding of its total (0.5 byte) and by 1e-9 of it.
  const Topology topo = build_topology(FatTreeSpec{4, LinkSpec{Bandwidth{1e9}, Time::ns(250)}});
  Harness h(topo, Sharing::kMaxMin, /*route_classes=*/true, 3, "fluid-conservation");
  Engine& engine = h.engine;
  FluidNetwork& net = h.net;
  RandomStream& rng = h.rng;
  std::vector<double> expected(topo.links().size(), 0);
  int delivered = 0;
  for (int i = 0; i < 500; ++i) {
    const auto src = static_cast<NodeId>(rng.below(h.hosts()));
    const auto dst = static_cast<NodeId>(rng.below(h.hosts()));
    const Bytes bytes{static_cast<std::int64_t>(1 + rng.below(3'000'000))};
    const std::uint64_t label = rng.below(3);
    engine.schedule_at(
        Time::ns(static_cast<std::int64_t>(rng.below(4'000'000))), [&, src, dst, bytes, label] {
          const TransferId id = net.start_transfer(
              src, dst, bytes, [&](const TransferResult& r) { delivered += !r.failed; }, label);
          for (LinkId l : net.current_route(id)) expected[l] += static_cast<double>(bytes.count);
        });
  }
  for (int i = 0; i < 10; ++i) {
    const auto l = static_cast<LinkId>(rng.below(h.links()));
    const double bw = 3e8 + 1e9 * rng.uniform();
    h.change_bandwidth_at(Time::ns(static_cast<std::int64_t>(rng.below(4'000'000))), l, bw);
  }
  engine.run();
  EXPECT_EQ(delivered, 500);
  for (LinkId l = 0; l < topo.links().size(); ++l)
    EXPECT_NEAR(static_cast<double>(net.link_stats(l).bytes_carried.count), expected[l],
                0.5 + 1e-9 * expected[l])
        << "link " << l;
}

TEST(FlowProperty, PartialSolvesEqualAFromScratchSolve) {
  // Many distinct routes per link (24 hosts on a star, random pairs, 2 labels: 552 routes), so
  // the backend re-solves only the classes whose rate can change (above the floor of the
  // instant's changes): at 80 instants its rates must equal a from-scratch solve of everything
  // sending, to 1e-9 relative. Bandwidth changes in between are solved whole.
  const Topology topo = build_topology(StarSpec{24, LinkSpec{Bandwidth{1e9}, Time::ns(500)}});
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    Harness h(topo, Sharing::kMaxMin, /*route_classes=*/true, seed, "fluid-partial");
    Engine& engine = h.engine;
    FluidNetwork& net = h.net;
    RandomStream& rng = h.rng;
    for (int i = 0; i < 1500; ++i) {
      const auto src = static_cast<NodeId>(topo.hosts()[rng.below(h.hosts())]);
      const auto dst = static_cast<NodeId>(topo.hosts()[rng.below(h.hosts())]);
      const Bytes bytes{static_cast<std::int64_t>(1 + rng.below(4'000'000))};
      const std::uint64_t label = rng.below(2);
      engine.schedule_at(Time::ns(static_cast<std::int64_t>(rng.below(8'000'000))),
                         [&, src, dst, bytes, label] {
                           h.ids.push_back(net.start_transfer(
                               src, dst, bytes, [](const TransferResult&) {}, label));
                         });
    }
    for (int i = 0; i < 4; ++i) {
      const auto l = static_cast<LinkId>(rng.below(h.links()));
      const double bw = 3e8 + 1.4e9 * rng.uniform();
      h.change_bandwidth_at(Time::ns(static_cast<std::int64_t>(rng.below(8'000'000))), l, bw);
    }
    int shared = 0;
    for (int step = 1; step <= 80; ++step) {
      engine.run_until(Time::us(1000 * step));
      ASSERT_TRUE(h.rates_from_scratch(shared)) << "seed " << seed << " step " << step;
    }
    engine.run();
    // Not a trivial case: a good part of the solves were partial.
    const auto& stats = net.solve_stats();
    EXPECT_GT(stats.partial, stats.solves / 4);
  }
}

TEST(FlowProperty, ClosedLoopArrivalsAndEndsEqualAFromScratchSolve) {
  // The benchmark's pattern, small: 24 senders to 24 receivers on a star, each delivery (1 us
  // after the end of sending) starting a new transfer (closed loop), random sizes, some
  // cancellations. The load moves between
  // about 25 transfers per link (route classes; partial solves whose floor is the rate of the
  // transfer that ended, or the level at which a new one's links could fill) and about 2 per link
  // (below kClassMinLoad: transfers with their own events, solved whole), so both paths and the
  // moves between them run. At 150 instants the backend's rates must equal a from-scratch solve
  // of everything sending, to 1e-9 relative.
  const Topology topo = build_topology(StarSpec{48, LinkSpec{Bandwidth{1e9}, Time::ns(500)}});
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    Harness h(topo, Sharing::kMaxMin, /*route_classes=*/true, seed, "fluid-closed-loop");
    Engine& engine = h.engine;
    FluidNetwork& net = h.net;
    RandomStream& rng = h.rng;
    bool crowded_phase = true;  // 600 concurrent, else 40
    int running = 0;
    std::function<void()> start = [&] {
      const auto src = static_cast<NodeId>(topo.hosts()[rng.below(24)]);
      const auto dst = static_cast<NodeId>(topo.hosts()[24 + rng.below(24)]);
      const Bytes bytes{static_cast<std::int64_t>(100'000 + rng.below(400'000))};
      ++running;
      h.ids.push_back(net.start_transfer(src, dst, bytes, [&](const TransferResult&) {
        --running;
        if (running < (crowded_phase ? 600 : 40)) start();
      }));
    };
    for (int i = 0; i < 600; ++i) start();
    for (int i = 1; i <= 6; ++i)  // the phases alternate every 2 ms
      engine.schedule_at(Time::ms(2 * i), [&] { crowded_phase = !crowded_phase; });
    engine.schedule_at(Time::ms(4) + Time::ns(1), [&] {  // refill the second crowded phase
      while (running < 600) start();
    });
    for (int i = 0; i < 40; ++i) {
      const double pick = rng.uniform();
      h.cancel_at(Time::ns(static_cast<std::int64_t>(rng.below(12'000'000))), pick);
    }
    int shared = 0;
    for (int step = 1; step <= 150; ++step) {
      engine.run_until(Time::us(80 * step));
      ASSERT_TRUE(h.rates_from_scratch(shared)) << "seed " << seed << " step " << step;
    }
    EXPECT_GT(shared, 10'000);  // many transfers shared links
    const auto& stats = net.solve_stats();
    // Not a trivial case: partial solves ran (about 20% of them; the sparse phases and small
    // neighbourhoods are solved whole).
    EXPECT_GT(stats.partial, stats.solves / 8);
  }
}

TEST(FlowProperty, RateGroupsOnRandomLeafSpinesMatchPerTransferAndFromScratch) {
  // Rate groups (one virtual clock per bottleneck link for the route classes it freezes) on
  // random leaf-spine fabrics: random sizes of fabric and oversubscription, half the transfers
  // into a few hot receivers (so links carry many classes and groups change rate in place, and
  // classes move between groups when their bottleneck changes), random bandwidth changes and
  // cancellations. Checked: at 40 instants the rates equal a from-scratch solve (1e-9 relative);
  // every transfer ends when it ends without route classes (per transfer, a MaxMinSolver solve
  // per component: 1e-6 relative plus 20 ns for the rounding of ends to the nanosecond); each
  // link's bytes carried equal the other mode's (conservation through clocks and moves).
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    RandomStream pick(seed, "fluid-groups-topology");
    const int leaves = 2 + static_cast<int>(pick.below(3));
    const int hosts_per_leaf = 4 + static_cast<int>(pick.below(5));
    const int spines = 1 + static_cast<int>(pick.below(3));
    const double oversubscription = 1.0 + 3.0 * pick.uniform();
    const Topology topo =
        build_topology(LeafSpineSpec{leaves, hosts_per_leaf, spines, oversubscription,
                                     LinkSpec{Bandwidth{1e9}, Time::ns(300)}, Time::ns(200)});
    std::vector<std::int64_t> ends[2];
    std::vector<std::int64_t> carried[2];
    std::uint64_t rate_changes = 0, entries = 0;
    for (int mode = 0; mode < 2; ++mode) {
      const bool classes = mode == 1;
      Harness h(topo, Sharing::kMaxMin, classes, seed, "fluid-groups");
      RandomStream& rng = h.rng;
      const auto at = [&] { return Time::ns(static_cast<std::int64_t>(rng.below(4'000'000))); };
      ends[mode].assign(1200, -1);
      for (int i = 0; i < 1200; ++i) {
        const bool hot = rng.below(2) == 0;
        const auto src = static_cast<NodeId>(topo.hosts()[rng.below(h.hosts())]);
        const auto dst =
            static_cast<NodeId>(topo.hosts()[hot ? rng.below(3) : rng.below(h.hosts())]);
        const Bytes bytes{static_cast<std::int64_t>(1 + rng.below(2'000'000))};
        const std::uint64_t label = rng.below(2);
        h.engine.schedule_at(at(), [&h, &ends, mode, i, src, dst, bytes, label] {
          h.ids.push_back(h.net.start_transfer(
              src, dst, bytes,
              [&ends, mode, i](const TransferResult& r) {
                ends[mode][static_cast<std::size_t>(i)] = r.failed ? -2 : r.finished.count_ns();
              },
              label));
        });
      }
      for (int i = 0; i < 5; ++i) {
        const auto l = static_cast<LinkId>(rng.below(h.links()));
        const double bw = 2e8 + 1.8e9 * rng.uniform();
        h.change_bandwidth_at(at(), l, bw);
      }
      for (int i = 0; i < 15; ++i) {
        const double p = rng.uniform();
        h.cancel_at(at(), p);
      }
      int shared = 0;
      for (int step = 1; step <= 40; ++step) {
        h.engine.run_until(Time::us(100 * step));
        ASSERT_TRUE(h.rates_from_scratch(shared)) << "seed " << seed << " step " << step;
      }
      h.engine.run();
      for (LinkId l = 0; l < h.links(); ++l)
        carried[mode].push_back(h.net.link_stats(l).bytes_carried.count);
      if (classes) {
        rate_changes = h.net.solve_stats().group_rate_changes;
        entries = h.net.solve_stats().group_entries;
      }
    }
    for (std::size_t i = 0; i < ends[0].size(); ++i) {
      ASSERT_GE(ends[0][i], -2) << "transfer " << i << " never reported";
      if (ends[0][i] < 0 || ends[1][i] < 0) {
        EXPECT_EQ(ends[0][i], ends[1][i]) << "seed " << seed << " transfer " << i;
        continue;
      }
      EXPECT_NEAR(static_cast<double>(ends[1][i]), static_cast<double>(ends[0][i]),
                  1e-6 * static_cast<double>(ends[0][i]) + 20)
          << "seed " << seed << " transfer " << i;
    }
    for (std::size_t l = 0; l < carried[0].size(); ++l)
      EXPECT_NEAR(static_cast<double>(carried[1][l]), static_cast<double>(carried[0][l]),
                  1 + 1e-9 * static_cast<double>(carried[0][l]))
          << "seed " << seed << " link " << l;
    // Not a trivial case: groups changed rate in place, and classes entered groups.
    EXPECT_GT(rate_changes, 50u) << "seed " << seed;
    EXPECT_GT(entries, 50u) << "seed " << seed;
  }
}

TEST(FlowProperty, ScanAndHeapFillingsGiveTheSameAllocation) {
  // The filling picks the next link to freeze by a scan on small components and from a heap on
  // large ones (FluidNetwork::set_scan_fill_max); both must freeze the same links in the same
  // order at the same levels. The same random traffic runs three times: always the heap, always
  // the scan, and the default. Traffic: a closed loop on a star (arrivals and completions
  // interleaved, about 25 transfers per link: route classes and partial solves), links of equal
  // capacity (many ties between equally loaded links, broken by link id), random bandwidth
  // changes (solved whole) and cancellations, plus a burst of transfers on two leaf-spine
  // fabrics and on a ring. Checked: every transfer ends at the same nanosecond in all three runs,
  // the rates at 60 instants are bit-identical, and equal a from-scratch MaxMinSolver solve (1e-9).
  struct Fabric {
    Topology topo;
    bool closed_loop;
  };
  std::vector<Fabric> fabrics;
  fabrics.push_back({build_topology(StarSpec{48, LinkSpec{Bandwidth{1e9}, Time::ns(500)}}), true});
  fabrics.push_back({build_topology(LeafSpineSpec{
                         4, 6, 2, 2.0, LinkSpec{Bandwidth{1e9}, Time::ns(300)}, Time::ns(200)}),
                     false});
  fabrics.push_back({build_topology(LeafSpineSpec{
                         3, 8, 3, 1.5, LinkSpec{Bandwidth{1e9}, Time::ns(300)}, Time::ns(200)}),
                     false});
  // A ring of 24 hosts: routes of up to 12 links, longer than the flat copy the solve's walks
  // read (FluidNetwork::kRouteStride, 6), so classes fall back to their record's route.
  fabrics.push_back({build_topology(RingSpec{24, LinkSpec{Bandwidth{1e9}, Time::ns(300)}}), false});
  const std::size_t modes[3] = {0, std::numeric_limits<std::size_t>::max(), 96};
  for (std::size_t f = 0; f < fabrics.size(); ++f) {
    const Topology& topo = fabrics[f].topo;
    for (std::uint64_t seed = 1; seed <= 2; ++seed) {
      std::vector<std::int64_t> ends[3];
      std::vector<std::vector<double>> rates[3];
      std::uint64_t partial = 0;
      for (int mode = 0; mode < 3; ++mode) {
        Harness h(topo, Sharing::kMaxMin, /*route_classes=*/true, seed, "fluid-scan-heap");
        h.net.set_scan_fill_max(modes[mode]);
        RandomStream& rng = h.rng;
        const std::uint32_t half = h.hosts() / 2;
        int running = 0, started = 0;
        const int limit = fabrics[f].closed_loop ? 4000 : 900;
        std::function<void()> start = [&] {
          if (started == limit) return;
          const int i = started++;
          const auto src = static_cast<NodeId>(topo.hosts()[rng.below(half)]);
          const auto dst = static_cast<NodeId>(topo.hosts()[half + rng.below(half)]);
          const Bytes bytes{static_cast<std::int64_t>(10'000 + rng.below(140'000))};
          ++running;
          ends[mode].resize(static_cast<std::size_t>(limit), -1);
          h.ids.push_back(
              h.net.start_transfer(src, dst, bytes, [&, i, mode](const TransferResult& r) {
                --running;
                ends[mode][static_cast<std::size_t>(i)] = r.failed ? -2 : r.finished.count_ns();
                if (fabrics[f].closed_loop) start();
              }));
        };
        const int burst = fabrics[f].closed_loop ? 600 : limit;
        for (int i = 0; i < burst; ++i) {
          if (fabrics[f].closed_loop || i < 300) {
            start();
          } else {  // the rest of the fabric burst arrives spread over 3 ms
            h.engine.schedule_at(Time::ns(static_cast<std::int64_t>(rng.below(3'000'000))),
                                 [&] { start(); });
          }
        }
        for (int i = 0; i < 6; ++i) {
          const auto l = static_cast<LinkId>(rng.below(h.links()));
          const double bw = 3e8 + 1.4e9 * rng.uniform();
          h.change_bandwidth_at(Time::ns(static_cast<std::int64_t>(rng.below(6'000'000))), l, bw);
        }
        for (int i = 0; i < 20; ++i) {
          const double p = rng.uniform();
          h.cancel_at(Time::ns(static_cast<std::int64_t>(rng.below(6'000'000))), p);
        }
        int shared = 0;
        for (int step = 1; step <= 60; ++step) {
          h.engine.run_until(Time::us(100 * step));
          ASSERT_TRUE(h.rates_from_scratch(shared))
              << "fabric " << f << " seed " << seed << " mode " << mode << " step " << step;
          std::vector<double>& now = rates[mode].emplace_back();
          for (TransferId id : h.ids) now.push_back(h.net.current_rate(id));
        }
        h.engine.run();
        EXPECT_GT(shared, 1000) << "fabric " << f;  // transfers shared links
        partial = h.net.solve_stats().partial;
      }
      for (int mode = 1; mode < 3; ++mode) {
        EXPECT_EQ(ends[mode], ends[0]) << "fabric " << f << " seed " << seed << " mode " << mode;
        EXPECT_EQ(rates[mode], rates[0]) << "fabric " << f << " seed " << seed << " mode " << mode;
      }
      for (std::int64_t e : ends[0]) {
        EXPECT_NE(e, -1) << "a transfer never reported";
      }
      if (fabrics[f].closed_loop) {
        EXPECT_GT(partial, 100u) << "seed " << seed;
      }
    }
  }
}

TEST(FlowProperty, RestartedFillingsEqualAFromScratchSolveAndTheGatheredOnes) {
  // A solve may restart the last solve's filling from the first link the change moves
  // (FluidNetwork::set_fill_restart) instead of gathering the component. Two traffics on a star
  // of 24 senders and 24 receivers, each run with restarts on and off:
  //   - open loop: 2,000 transfers arriving at random instants over 6 ms (about 25 per link:
  //     route classes, partial solves), random cancellations and bandwidth changes (which drop
  //     the saved filling; the next large solve saves one again). Every transfer must end within
  //     1e-9 relative plus 2 ns of the run without restarts (the two sum the capacity left in
  //     another order: the last bits differ), and every link carry the same bytes;
  //   - closed loop (each delivery starts the next transfer, so the traffic depends on the end
  //     times, which differ in the last bit: compared with a from-scratch solve only).
  // In both, at 40 instants the rates must equal a from-scratch MaxMinSolver solve (1e-9), and
  // with restarts on most solves must have restarted.
  const Topology topo = build_topology(StarSpec{48, LinkSpec{Bandwidth{1e9}, Time::ns(500)}});
  for (std::uint64_t seed = 1; seed <= 2; ++seed) {
    std::vector<std::int64_t> ends[2];
    std::vector<std::int64_t> carried[2];
    for (int mode = 0; mode < 2; ++mode) {
      const bool restart = mode == 1;
      Harness h(topo, Sharing::kMaxMin, /*route_classes=*/true, seed, "fluid-restart-open");
      h.net.set_fill_restart(restart);
      RandomStream& rng = h.rng;
      ends[mode].assign(2000, -1);
      for (int i = 0; i < 2000; ++i) {
        const auto src = static_cast<NodeId>(topo.hosts()[rng.below(24)]);
        const auto dst = static_cast<NodeId>(topo.hosts()[24 + rng.below(24)]);
        const Bytes bytes{static_cast<std::int64_t>(50'000 + rng.below(300'000))};
        // The first 500 at once (the loaded state), the rest spread over 6 ms.
        const Time at =
            i < 500 ? Time::zero() : Time::ns(static_cast<std::int64_t>(rng.below(6'000'000)));
        h.engine.schedule_at(at, [&h, &ends, mode, i, src, dst, bytes] {
          h.ids.push_back(
              h.net.start_transfer(src, dst, bytes, [&ends, mode, i](const TransferResult& r) {
                ends[mode][static_cast<std::size_t>(i)] = r.failed ? -2 : r.finished.count_ns();
              }));
        });
      }
      for (int i = 0; i < 4; ++i) {
        const auto l = static_cast<LinkId>(rng.below(h.links()));
        const double bw = 4e8 + 1.2e9 * rng.uniform();
        h.change_bandwidth_at(Time::ns(static_cast<std::int64_t>(rng.below(6'000'000))), l, bw);
      }
      for (int i = 0; i < 20; ++i) {
        const double p = rng.uniform();
        h.cancel_at(Time::ns(static_cast<std::int64_t>(rng.below(6'000'000))), p);
      }
      int shared = 0;
      for (int step = 1; step <= 40; ++step) {
        h.engine.run_until(Time::us(150 * step));
        ASSERT_TRUE(h.rates_from_scratch(shared))
            << "open loop, seed " << seed << " restart " << restart << " step " << step;
      }
      h.engine.run();
      EXPECT_GT(shared, 10'000);
      for (LinkId l = 0; l < h.links(); ++l)
        carried[mode].push_back(h.net.link_stats(l).bytes_carried.count);
      const auto& st = h.net.solve_stats();
      if (restart) {
        EXPECT_GT(st.restarted, st.solves / 2) << "seed " << seed;
      } else {
        EXPECT_EQ(st.restarted, 0u);
      }
    }
    for (std::size_t i = 0; i < ends[0].size(); ++i) {
      ASSERT_NE(ends[0][i], -1) << "transfer " << i << " never reported";
      if (ends[0][i] < 0 || ends[1][i] < 0) {
        EXPECT_EQ(ends[0][i], ends[1][i]) << "seed " << seed << " transfer " << i;
        continue;
      }
      EXPECT_NEAR(static_cast<double>(ends[1][i]), static_cast<double>(ends[0][i]),
                  1e-9 * static_cast<double>(ends[0][i]) + 2)
          << "seed " << seed << " transfer " << i;
    }
    for (std::size_t l = 0; l < carried[0].size(); ++l)
      EXPECT_NEAR(static_cast<double>(carried[1][l]), static_cast<double>(carried[0][l]),
                  1 + 1e-9 * static_cast<double>(carried[0][l]))
          << "seed " << seed << " link " << l;

    for (int mode = 0; mode < 2; ++mode) {
      const bool restart = mode == 1;
      Harness h(topo, Sharing::kMaxMin, /*route_classes=*/true, seed, "fluid-restart-closed");
      h.net.set_fill_restart(restart);
      RandomStream& rng = h.rng;
      int started = 0;
      std::function<void()> start = [&] {
        if (started == 2500) return;
        ++started;
        const auto src = static_cast<NodeId>(topo.hosts()[rng.below(24)]);
        const auto dst = static_cast<NodeId>(topo.hosts()[24 + rng.below(24)]);
        const Bytes bytes{static_cast<std::int64_t>(50'000 + rng.below(300'000))};
        h.ids.push_back(
            h.net.start_transfer(src, dst, bytes, [&](const TransferResult&) { start(); }));
      };
      for (int i = 0; i < 600; ++i) start();
      for (int i = 0; i < 20; ++i) {
        const double p = rng.uniform();
        h.cancel_at(Time::ns(static_cast<std::int64_t>(rng.below(4'000'000))), p);
      }
      int shared = 0;
      for (int step = 1; step <= 40; ++step) {
        h.engine.run_until(Time::us(100 * step));
        ASSERT_TRUE(h.rates_from_scratch(shared))
            << "closed loop, seed " << seed << " restart " << restart << " step " << step;
      }
      h.engine.run();
      EXPECT_GT(shared, 10'000);
      if (restart) {
        EXPECT_GT(h.net.solve_stats().restarted, h.net.solve_stats().solves / 2);
      }
    }
  }
}

TEST(FlowProperty, GroupCountsAtTheFreezeGiveTheSameRunAsTheFirstPass) {
  // A restarted solve counts the classes of each rate group as its filling freezes them (by link:
  // a step's classes in the link's group are counted once) instead of in apply_class_rates' first
  // pass (FluidNetwork::set_count_at_freeze). The counts decide which groups change rate in place,
  // so a wrong count moves classes between groups, or re-rates a group some of whose classes were
  // kept: the runs must be the same to the bit. Open-loop traffic on a star of 24 senders and 24
  // receivers: a loaded start (route classes, restarted partial solves), arrivals spread over
  // 6 ms, cancellations and bandwidth changes, and a thinning tail in which classes of one member
  // are left alone on their links inside a saved filling (the lone classes, counted again class
  // by class); and a closed loop at a steady load. Every end to the nanosecond, every link's bytes,
  // and the group statistics must equal the run counted in the first pass.
  const Topology topo = build_topology(StarSpec{48, LinkSpec{Bandwidth{1e9}, Time::ns(500)}});
  std::uint64_t lone_recounts = 0;
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    for (const bool closed : {false, true}) {
      std::vector<std::int64_t> ends[2];
      std::vector<std::int64_t> carried[2];
      FluidNetwork::SolveStats stats[2];
      for (int mode = 0; mode < 2; ++mode) {
        Harness h(topo, Sharing::kMaxMin, /*route_classes=*/true, seed, "fluid-freeze-counts");
        h.net.set_count_at_freeze(mode == 1);
        RandomStream& rng = h.rng;
        std::vector<std::int64_t>& end = ends[mode];
        auto record = [&end](std::size_t i) {
          return [&end, i](const TransferResult& r) {
            end[i] = r.failed ? -2 : r.finished.count_ns();
          };
        };
        int started = 0;
        std::function<void()> next;  // closed loop: each delivery starts the next transfer
        auto start = [&](std::size_t i) {
          const auto src = static_cast<NodeId>(topo.hosts()[rng.below(24)]);
          const auto dst = static_cast<NodeId>(topo.hosts()[24 + rng.below(24)]);
          const Bytes bytes{static_cast<std::int64_t>(50'000 + rng.below(300'000))};
          h.ids.push_back(h.net.start_transfer(src, dst, bytes, [&, i](const TransferResult& r) {
            record(i)(r);
            if (closed) next();
          }));
        };
        if (closed) {
          end.assign(3000, -1);
          next = [&] {
            if (started < 3000) start(static_cast<std::size_t>(started++));
          };
          for (int i = 0; i < 600; ++i) next();
        } else {
          end.assign(2000, -1);
          for (int i = 0; i < 2000; ++i) {
            const Time at =
                i < 500 ? Time::zero() : Time::ns(static_cast<std::int64_t>(rng.below(6'000'000)));
            h.engine.schedule_at(at, [&start, i] { start(static_cast<std::size_t>(i)); });
          }
          for (int i = 0; i < 4; ++i) {
            const auto l = static_cast<LinkId>(rng.below(h.links()));
            const double bw = 4e8 + 1.2e9 * rng.uniform();
            h.change_bandwidth_at(Time::ns(static_cast<std::int64_t>(rng.below(6'000'000))), l, bw);
          }
        }
        for (int i = 0; i < 20; ++i) {
          const double p = rng.uniform();
          h.cancel_at(Time::ns(static_cast<std::int64_t>(rng.below(4'000'000))), p);
        }
        h.engine.run();
        for (LinkId l = 0; l < h.links(); ++l)
          carried[mode].push_back(h.net.link_stats(l).bytes_carried.count);
        stats[mode] = h.net.solve_stats();
      }
      const auto& on = stats[1];
      const auto& off = stats[0];
      EXPECT_EQ(off.counted_at_freeze, 0u);
      EXPECT_GT(on.counted_at_freeze, on.solves / 2) << "seed " << seed << " closed " << closed;
      EXPECT_EQ(on.counted_at_freeze, on.restarted);
      lone_recounts += on.lone_recounts;
      EXPECT_EQ(on.solves, off.solves);
      EXPECT_EQ(on.restarted, off.restarted);
      EXPECT_EQ(on.group_rate_changes, off.group_rate_changes)
          << "seed " << seed << " closed " << closed;
      EXPECT_EQ(on.group_entries, off.group_entries) << "seed " << seed << " closed " << closed;
      ASSERT_EQ(ends[0].size(), ends[1].size());
      for (std::size_t i = 0; i < ends[0].size(); ++i) {
        ASSERT_NE(ends[0][i], -1) << "transfer " << i << " never reported";
        ASSERT_EQ(ends[1][i], ends[0][i])
            << "seed " << seed << " closed " << closed << " transfer " << i;
      }
      EXPECT_EQ(carried[1], carried[0]) << "seed " << seed << " closed " << closed;
    }
  }
  // The lone classes' path (counts reset, the first pass run) was taken.
  EXPECT_GT(lone_recounts, 0u);

  // Lone classes made on purpose, while the rest of the component changes rate: 16 senders each
  // send 8 long transfers to 8 of 16 receivers (links of 8: route classes, one saved filling), and
  // 8 more senders each send 7 short transfers into that mesh and one long one to a receiver of
  // its own. When a sender's last short transfer ends, its long one is a class of one member
  // alone on its links (made a lone transfer), in a solve that re-rates the mesh's groups.
  const auto host = [&topo](int i) { return static_cast<NodeId>(topo.hosts()[i]); };
  std::vector<std::int64_t> ends[2];
  FluidNetwork::SolveStats stats[2];
  for (int mode = 0; mode < 2; ++mode) {
    Harness h(topo, Sharing::kMaxMin, /*route_classes=*/true, 1, "fluid-freeze-lone");
    h.net.set_count_at_freeze(mode == 1);
    std::vector<std::int64_t>& end = ends[mode];
    auto send = [&](int src, int dst, std::int64_t bytes) {
      const std::size_t i = end.size();
      end.push_back(-1);
      h.ids.push_back(h.net.start_transfer(
          host(src), host(dst), Bytes{bytes},
          [&end, i](const TransferResult& r) { end[i] = r.finished.count_ns(); }));
    };
    for (int s = 0; s < 16; ++s)
      for (int j = 0; j < 8; ++j) send(s, 24 + (s + 2 * j) % 16, 20'000'000 + 100'000 * s + j);
    for (int s = 16; s < 24; ++s) {
      for (int k = 0; k < 7; ++k) send(s, 24 + (3 * s + k) % 16, 40'000 * (s - 15) + 3'000 * k);
      send(s, 40 + (s - 16), 30'000'000);
    }
    h.engine.run();
    stats[mode] = h.net.solve_stats();
  }
  EXPECT_GE(stats[1].lone_recounts, 8u);
  EXPECT_EQ(stats[1].group_rate_changes, stats[0].group_rate_changes);
  EXPECT_EQ(stats[1].group_entries, stats[0].group_entries);
  ASSERT_EQ(ends[1].size(), ends[0].size());
  for (std::size_t i = 0; i < ends[0].size(); ++i) {
    ASSERT_NE(ends[0][i], -1) << "transfer " << i << " never reported";
    ASSERT_EQ(ends[1][i], ends[0][i]) << "built case, transfer " << i;
  }
}
