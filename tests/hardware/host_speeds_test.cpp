#include "sim_core/hardware/host_speeds.hpp"

#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "sim_core/base/error.hpp"

namespace mlsim {
namespace {

TEST(HostSpeeds, StartsNominalAndNotifiesOnlyOnChange) {
  HostSpeeds speeds(3);
  EXPECT_EQ(speeds.speed(0), 1.0);
  EXPECT_EQ(speeds.speed(2), 1.0);
  std::vector<std::tuple<NodeId, double, double>> seen;
  speeds.on_change([&](NodeId h, double o, double n) { seen.emplace_back(h, o, n); });
  speeds.set_speed(1, 0.5);
  speeds.set_speed(1, 0.5);  // no change: no call
  speeds.set_speed(1, 2.0);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], std::make_tuple(NodeId{1}, 1.0, 0.5));
  EXPECT_EQ(seen[1], std::make_tuple(NodeId{1}, 0.5, 2.0));
  EXPECT_EQ(speeds.speed(1), 2.0);
  EXPECT_EQ(speeds.speed(0), 1.0);
}

TEST(HostSpeeds, RejectsNonPositiveSpeedsAndUnknownNodes) {
  HostSpeeds speeds(2);
  EXPECT_THROW(speeds.set_speed(0, 0.0), InvariantError);
  EXPECT_THROW(speeds.set_speed(0, -1.0), InvariantError);
  EXPECT_THROW(speeds.set_speed(5, 1.0), InvariantError);
  EXPECT_THROW((void)speeds.speed(5), InvariantError);
}

}  // namespace
}  // namespace mlsim
