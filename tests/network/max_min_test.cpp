// Max-min fair allocations of textbook cases, computed by hand.
#include "sim_core/network/max_min.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
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

TEST(MaxMin, WeightedFlowIsThatManyIdenticalFlows) {
  // Link 0 (capacity 12) carries a flow of weight 3 and a flow of weight 1 that also crosses
  // link 1 (capacity 2). Link 1 fills first at 2 / 1 = 2; link 0 then has 12 - 2 = 10 for the
  // three identical flows: 10 / 3 each. The bottleneck of each is the link that froze it.
  MaxMinSolver s;
  s.add_link(12);
  s.add_link(2);
  const std::uint32_t a[] = {0};
  const std::uint32_t b[] = {0, 1};
  s.add_flow(a, 3);
  s.add_flow(b, 1);
  const auto& r = s.solve();
  EXPECT_DOUBLE_EQ(r[0], 10.0 / 3);
  EXPECT_DOUBLE_EQ(r[1], 2);
  EXPECT_EQ(s.bottleneck(0), 0u);
  EXPECT_EQ(s.bottleneck(1), 1u);
}

namespace {
// Textbook progressive filling, written for clarity, not speed: repeatedly find the link with
// the smallest fair share among unfrozen flows and freeze its flows at that share.
std::vector<double> reference(const std::vector<double>& caps,
                              const std::vector<std::vector<std::uint32_t>>& flows) {
  std::vector<double> rate(flows.size(), -1);
  std::vector<double> left = caps;
  for (;;) {
    double best = std::numeric_limits<double>::infinity();
    std::size_t best_link = caps.size();
    for (std::size_t l = 0; l < caps.size(); ++l) {
      int n = 0;
      for (std::size_t f = 0; f < flows.size(); ++f)
        if (rate[f] < 0 && std::count(flows[f].begin(), flows[f].end(), l)) ++n;
      if (n > 0 && left[l] / n < best) {
        best = left[l] / n;
        best_link = l;
      }
    }
    if (best_link == caps.size()) return rate;
    for (std::size_t f = 0; f < flows.size(); ++f) {
      if (rate[f] >= 0 || !std::count(flows[f].begin(), flows[f].end(), best_link)) continue;
      rate[f] = best;
      for (std::uint32_t m : flows[f]) left[m] -= best;
    }
  }
}
}  // namespace

TEST(MaxMin, PropertyMatchesTextbookFillingAndWeightsMatchCopies) {
  // Random problems: up to 12 links of capacities 1..4 (few distinct values, so shares tie
  // often), up to 40 flows of 1-4 distinct links. The solver must give every flow the textbook
  // rate to 1e-12 relative (the orders of subtraction differ), every link must be within its
  // capacity, and every flow must cross a saturated link on which no flow is faster (max-min).
  // Merging identical flows into one weighted flow must give the same rates to 1e-12.
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    const std::size_t nl = 1 + rng() % 12;
    std::vector<double> caps(nl);
    for (double& c : caps) c = static_cast<double>(1 + rng() % 4);
    std::vector<std::vector<std::uint32_t>> flows(1 + rng() % 40);
    for (auto& f : flows) {
      const std::size_t hops = 1 + rng() % std::min<std::size_t>(4, nl);
      while (f.size() < hops) {
        const auto l = static_cast<std::uint32_t>(rng() % nl);
        if (std::count(f.begin(), f.end(), l) == 0) f.push_back(l);
      }
      if (rng() % 3 == 0 && &f != &flows[0]) f = flows[rng() % (&f - &flows[0])];  // a copy
    }
    const std::vector<double> got = solve(caps, flows);
    const std::vector<double> want = reference(caps, flows);
    std::vector<double> load(nl, 0);
    for (std::size_t f = 0; f < flows.size(); ++f) {
      ASSERT_NEAR(got[f], want[f], 1e-12 * want[f]) << "trial " << trial << " flow " << f;
      for (std::uint32_t l : flows[f]) load[l] += got[f];
    }
    for (std::size_t l = 0; l < nl; ++l) ASSERT_LE(load[l], caps[l] * (1 + 1e-12));
    for (std::size_t f = 0; f < flows.size(); ++f) {
      bool bottlenecked = false;
      for (std::uint32_t l : flows[f]) {
        if (load[l] < caps[l] * (1 - 1e-12)) continue;
        bool fastest = true;
        for (std::size_t g = 0; g < flows.size(); ++g)
          if (std::count(flows[g].begin(), flows[g].end(), l) && got[g] > got[f] * (1 + 1e-12))
            fastest = false;
        bottlenecked = bottlenecked || fastest;
      }
      ASSERT_TRUE(bottlenecked) << "trial " << trial << " flow " << f;
    }
    // Identical routes merged into weighted flows.
    std::vector<std::vector<std::uint32_t>> distinct;
    std::vector<std::uint32_t> weight, index(flows.size());
    for (std::size_t f = 0; f < flows.size(); ++f) {
      const auto it = std::find(distinct.begin(), distinct.end(), flows[f]);
      index[f] = static_cast<std::uint32_t>(it - distinct.begin());
      if (it == distinct.end()) {
        distinct.push_back(flows[f]);
        weight.push_back(0);
      }
      ++weight[index[f]];
    }
    MaxMinSolver merged;
    for (double c : caps) merged.add_link(c);
    for (std::size_t i = 0; i < distinct.size(); ++i) merged.add_flow(distinct[i], weight[i]);
    const std::vector<double> rates = merged.solve();
    for (std::size_t f = 0; f < flows.size(); ++f)
      ASSERT_NEAR(rates[index[f]], got[f], 1e-12 * got[f]) << "trial " << trial;
  }
}
