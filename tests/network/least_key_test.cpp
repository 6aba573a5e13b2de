// first_least (the scan filling's pick of the next link): the first index of the least key, by
// hand, around the blocks of four it reads at a time.
#include "sim_core/network/least_key.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

using namespace mlsim;

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
std::size_t at(const std::vector<double>& keys) {
  return first_least(keys.data(), keys.size());
}
}  // namespace

TEST(FirstLeast, TheFirstOfEqualLeastKeysWins) {
  EXPECT_EQ(at({3, 1, 2, 1}), 1u);                 // one block, the tie goes to the first
  EXPECT_EQ(at({5, 5, 5, 5, 2, 7, 2}), 4u);        // a block, then the tail holds the least twice
  EXPECT_EQ(at({9, 9, 9, 9, 4, 8, 8, 4, 4}), 4u);  // tied across the second block and the tail
  EXPECT_EQ(at({9, 3, 9, 9, 9, 9, 9, 3}), 1u);     // tied across two blocks: the first block
  EXPECT_EQ(at({9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 1}), 10u);  // the least in the tail alone
  EXPECT_EQ(at({0.0, -0.0}), 0u);                         // -0 equals +0
  EXPECT_EQ(at({1e-300, -2.5, 7, -2.5}), 1u);  // negative shares (rounding) are ordered too
}

TEST(FirstLeast, AllInfiniteOrEmptyGivesN) {
  EXPECT_EQ(at({}), 0u);
  EXPECT_EQ(at({kInf, kInf, kInf, kInf, kInf}), 5u);
  EXPECT_EQ(at({kInf, kInf, kInf, kInf, kInf, 3}), 5u);
}
