// The flow backend's max-min allocations against SimGrid's CM02 on random topologies (issue 18:
// "same allocations as today's solver and SimGrid CM02, verified by property tests on random
// topologies"). Trees, so that every pair of hosts has one route and both simulators route alike;
// random link speeds, so bottlenecks sit anywhere; random arrivals and sizes, many on the same
// routes, so the flow backend's route classes hold several transfers. CM02 with latency after
// sending (SimGrid's factors 1.0) is exact max-min, as the flow backend is: every completion
// must agree to 1e-6 relative (SimGrid solves to its own precision, 1e-5 of a share in its
// maxmin solver, which leaves completions far closer than that in practice).
#ifdef MLSIM_HAVE_SIMGRID
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "sim_core/engine/random.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/simgrid/simgrid_network.hpp"
#include "tests/support/network_fixtures.hpp"

using namespace mlsim;
using namespace mlsim::test;

namespace {

// A random tree of `switches` switches (switch i > 0 hangs off a random earlier one) with
// `hosts` hosts on random switches; every cable 0.2-2 GB/s, 1 us.
Topology random_tree(RandomStream& rng, int switches, int hosts) {
  Topology t;
  std::vector<NodeId> sw;
  auto speed = [&] { return Bandwidth{2e8 + 1.8e9 * rng.uniform()}; };
  for (int i = 0; i < switches; ++i) {
    sw.push_back(t.add_node("s" + std::to_string(i), NodeKind::kSwitch));
    if (i > 0)
      t.add_duplex_link(sw[rng.below(static_cast<std::uint32_t>(i))], sw.back(), speed(),
                        Time::us(1));
  }
  for (int i = 0; i < hosts; ++i) {
    const NodeId h = t.add_node("h" + std::to_string(i), NodeKind::kHost);
    t.add_duplex_link(h, sw[rng.below(static_cast<std::uint32_t>(switches))], speed(), Time::us(1));
  }
  return t;
}

struct Start {
  Time at;
  NodeId src, dst;
  Bytes bytes;
};

// Completion time of every transfer, in start order.
template <typename Net>
std::vector<Time> run(Net& net, Engine& engine, const std::vector<Start>& starts) {
  std::vector<Time> done(starts.size(), Time::max());
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const Start s = starts[i];
    engine.schedule_at(s.at, [&net, &engine, &done, s, i] {
      net.start_transfer(s.src, s.dst, s.bytes, [&engine, &done, i](const TransferResult& r) {
        if (!r.failed) done[i] = engine.now();
      });
    });
  }
  engine.run();
  return done;
}

TEST(SimGridCm02, RandomTreesGiveTheFlowBackendsCompletions) {
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    RandomStream rng(seed, "cm02-trees");
    const Topology topo = random_tree(rng, 2 + static_cast<int>(rng.below(5)), 12);
    std::vector<Start> starts;
    const auto hosts = static_cast<std::uint32_t>(topo.hosts().size());
    for (int i = 0; i < 120; ++i) {
      const NodeId src = topo.hosts()[rng.below(hosts)];
      NodeId dst = topo.hosts()[rng.below(hosts)];
      if (dst == src) dst = topo.hosts()[(rng.below(hosts - 1) + 1 + src) % hosts];
      starts.push_back(Start{Time::ns(static_cast<std::int64_t>(rng.below(5'000'000))), src, dst,
                             Bytes{static_cast<std::int64_t>(1000 + rng.below(2'000'000))}});
    }
    Engine e_flow, e_classes, e_sg;
    FluidNetwork flow(e_flow, topo, Sharing::kMaxMin, /*route_classes=*/false);
    FluidNetwork classes(e_classes, topo, Sharing::kMaxMin, /*route_classes=*/true);
    const std::vector<Time> a = run(flow, e_flow, starts);
    const std::vector<Time> b = run(classes, e_classes, starts);
    std::vector<Time> c;
    {
      SimGridOptions cm02;  // CM02, factors 1.0, latency after sending
      SimGridNetwork sg(e_sg, topo, cm02);
      c = run(sg, e_sg, starts);
    }
    for (std::size_t i = 0; i < starts.size(); ++i) {
      ASSERT_NE(a[i], Time::max()) << "seed " << seed << " transfer " << i;
      const double tol = 1e-6 * a[i].seconds() + 2e-9;
      EXPECT_NEAR(b[i].seconds(), a[i].seconds(), tol)
          << "route classes, seed " << seed << " #" << i;
      EXPECT_NEAR(c[i].seconds(), a[i].seconds(), tol)
          << "SimGrid CM02, seed " << seed << " #" << i;
    }
  }
}

}  // namespace
#endif
