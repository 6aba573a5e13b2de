// Max-min fair allocations of textbook cases, computed by hand.
#include "sim_core/network/max_min.hpp"

#include <gtest/gtest.h>

#include <vector>

using namespace mlsim;

namespace {
std::vector<double> solve(const std::vector<double>& caps,
                          const std::vector<std::vector<std::uint32_t>>& flows) {
  MaxMinSolver s;
  for (double c : caps) s.add_link(c);
  for (const auto& f : flows) s.add_flow(f);
  return s.solve();
}
}  // namespace

TEST(MaxMin, ParkingLot) {
  // Three unit links in a row; one long flow over all, one short flow per link: every link has
  // two flows, so every flow gets 1/2.
  const auto r = solve({1, 1, 1}, {{0, 1, 2}, {0}, {1}, {2}});
  for (double x : r) EXPECT_DOUBLE_EQ(x, 0.5);
}

TEST(MaxMin, TwoBottlenecks) {
  // A (10) carries f0 and f1; B (4) carries f0 and f2. B fills first at 2 each; f1 takes the
  // 8 that f0 leaves on A.
  const auto r = solve({10, 4}, {{0, 1}, {0}, {1}});
  EXPECT_DOUBLE_EQ(r[0], 2);
  EXPECT_DOUBLE_EQ(r[1], 8);
  EXPECT_DOUBLE_EQ(r[2], 2);
}

TEST(MaxMin, IncastThroughOneSwitchPort) {
  // 8 senders (uplinks 0..7, 10 each) into one receiver port (link 8, 10): 10/8 each.
  std::vector<std::vector<std::uint32_t>> flows;
  for (std::uint32_t i = 0; i < 8; ++i) flows.push_back({i, 8});
  const auto r = solve({10, 10, 10, 10, 10, 10, 10, 10, 10}, flows);
  for (double x : r) EXPECT_DOUBLE_EQ(x, 1.25);
}

TEST(MaxMin, ThreeLevels) {
  // L0 (1): a, b, c. L1 (3): c, d. L2 (1.5): d, e.
  // L0 fills first at 1/3 (a, b, c); L1 then offers d 8/3 but L2 offers 0.75: d = e = 0.75.
  const auto r = solve({1, 3, 1.5}, {{0}, {0}, {0, 1}, {1, 2}, {2}});
  EXPECT_DOUBLE_EQ(r[0], 1.0 / 3);
  EXPECT_DOUBLE_EQ(r[1], 1.0 / 3);
  EXPECT_DOUBLE_EQ(r[2], 1.0 / 3);
  EXPECT_DOUBLE_EQ(r[3], 0.75);
  EXPECT_DOUBLE_EQ(r[4], 0.75);
}

TEST(MaxMin, LoneFlowGetsItsBottleneckAndSolverIsReusable) {
  MaxMinSolver s;
  s.add_link(5);
  s.add_link(3);
  const std::uint32_t both[] = {0, 1};
  s.add_flow(both);
  EXPECT_DOUBLE_EQ(s.solve()[0], 3);
  s.clear();
  s.add_link(7);
  const std::uint32_t one[] = {0};
  s.add_flow(one);
  s.add_flow(one);
  const auto& r = s.solve();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_DOUBLE_EQ(r[0], 3.5);
}
