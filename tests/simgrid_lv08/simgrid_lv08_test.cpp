// LV08 in its own binary: SimGrid fixes its network model once per process.
#ifdef MLSIM_HAVE_SIMGRID
#include <gtest/gtest.h>

#include "sim_core/simgrid/simgrid_network.hpp"

using namespace mlsim;

TEST(SimGridLv08, OneFlowPaysCalibratedLatencyAndBandwidthFactors) {
  Engine engine;
  Topology t;
  const NodeId sw = t.add_node("sw", NodeKind::kSwitch);
  const NodeId a = t.add_node("a", NodeKind::kHost);
  const NodeId b = t.add_node("b", NodeKind::kHost);
  t.add_duplex_link(a, sw, Bandwidth{1e9}, Time::us(1));
  t.add_duplex_link(b, sw, Bandwidth{1e9}, Time::us(1));
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
