// The check the platform is judged by: ring all-reduce of S bytes on n nodes of a ring topology
// (50 GB/s links, 500 ns latency) takes 2(n-1)/n * S/B + 2(n-1) * latency, within 1 %, on both
// fluid backends, for S in {1 MiB, 64 MiB, 1 GiB} and n in {8, 64, 256, 1024, 4096}.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>

#include "sim_core/collectives/collective.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology_builders.hpp"

using namespace mlsim;
using namespace mlsim::collectives;

namespace {

constexpr double kBandwidth = 50e9;  // bytes/s
constexpr std::int64_t kLatencyNs = 500;

using Case = std::tuple<Sharing, int, std::int64_t>;  // backend, nodes, bytes

class RingFormula : public ::testing::TestWithParam<Case> {};

std::string name(const ::testing::TestParamInfo<Case>& info) {
  const auto [sharing, n, bytes] = info.param;
  return std::string(sharing == Sharing::kNone ? "analytic" : "flow") + "_n" + std::to_string(n) +
         "_" + std::to_string(bytes >> 20) + "MiB";
}

}  // namespace

TEST_P(RingFormula, MatchesClosedForm) {
  const auto [sharing, n, bytes] = GetParam();
  const Topology topo =
      build_topology(RingSpec{n, LinkSpec{Bandwidth{kBandwidth}, Time::ns(kLatencyNs)}});
  Engine engine;
  FluidNetwork net(engine, topo, sharing);
  CollectiveSpec spec;
  spec.algorithm = Algorithm::kRing;
  spec.bytes = Bytes{bytes};
  const CollectiveResult r = run_collective(engine, net, topo.hosts(), spec);
  ASSERT_TRUE(r.completed);
  const double expected = 2.0 * (n - 1) / n * static_cast<double>(bytes) / kBandwidth +
                          2.0 * (n - 1) * kLatencyNs * 1e-9;
  EXPECT_NEAR(r.seconds(), expected, 0.01 * expected);
  EXPECT_EQ(r.transfers, 2u * (n - 1) * n);
  EXPECT_EQ(r.bytes_sent.count, 2 * (n - 1) * bytes);  // every node sends 2(n-1) segments
  EXPECT_EQ(net.totals().transfers_delivered, r.transfers);
}

const auto kBackends = ::testing::Values(Sharing::kNone, Sharing::kMaxMin);
const auto kSizes =
    ::testing::Values(std::int64_t{1} << 20, std::int64_t{64} << 20, std::int64_t{1} << 30);
INSTANTIATE_TEST_SUITE_P(Ring, RingFormula,
                         ::testing::Combine(kBackends, ::testing::Values(8, 64, 256, 1024), kSizes),
                         name);
// 4096 nodes: 33.5 million transfers per case, about a second or two each.
INSTANTIATE_TEST_SUITE_P(Ring4096, RingFormula,
                         ::testing::Combine(kBackends, ::testing::Values(4096), kSizes), name);
