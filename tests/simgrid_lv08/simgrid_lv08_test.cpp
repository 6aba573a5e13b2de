// LV08 in its own binary: SimGrid fixes its network model once per process.
#ifdef MLSIM_HAVE_SIMGRID
#include <gtest/gtest.h>

#include "sim_core/network/simgrid/simgrid_network.hpp"
#include "tests/support/network_fixtures.hpp"

using namespace mlsim;

TEST(SimGridLv08, OneFlowPaysCalibratedLatencyAndBandwidthFactors) {
  Engine engine;
  const Topology t = test::star(2, Time::us(1));
  const NodeId a = 1, b = 2;
  SimGridOptions o;
  o.model = SimGridOptions::Model::kLV08;
  o.latency = SimGridOptions::Latency::kInSimGrid;
  SimGridNetwork net(engine, t, o);
  Time finished;
  net.start_transfer(a, b, Bytes{1'000'000},
                     [&](const TransferResult& r) { finished = r.finished; });
  engine.run();
  // LV08 (Velho & Legrand 2008): latency x 13.01, bandwidth x 0.97.
  EXPECT_NEAR(finished.seconds(), 13.01 * 2e-6 + 1e6 / 0.97e9, 2e-9);
}
#endif  // MLSIM_HAVE_SIMGRID
