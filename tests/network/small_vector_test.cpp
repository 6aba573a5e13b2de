#include "sim_core/base/small_vector.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

using namespace mlsim;

TEST(SmallVector, InlineThenHeapKeepsValuesInOrder) {
  SmallVector<int, 2> v;
  EXPECT_TRUE(v.empty());
  const int* inline_data = v.data();
  v.push_back(1);
  v.push_back(2);
  EXPECT_EQ(v.data(), inline_data);  // still inside the object
  v.push_back(3);
  v.push_back(4);
  EXPECT_NE(v.data(), inline_data);
  EXPECT_EQ(std::vector<int>(v.begin(), v.end()), (std::vector<int>{1, 2, 3, 4}));
  v.pop_back();
  EXPECT_EQ(v.back(), 3);
  v.clear();
  v.push_back(7);  // the heap storage is kept
  EXPECT_NE(v.data(), inline_data);
  EXPECT_EQ(v[0], 7);
}

TEST(SmallVector, CopyMoveAssignResize) {
  SmallVector<int, 3> a;
  std::vector<int> src(10);
  std::iota(src.begin(), src.end(), 0);
  a.assign(src.begin(), src.end());
  SmallVector<int, 3> b = a;
  EXPECT_EQ(std::vector<int>(b.begin(), b.end()), src);
  SmallVector<int, 3> c = std::move(a);
  EXPECT_EQ(std::vector<int>(c.begin(), c.end()), src);
  EXPECT_TRUE(a.empty());  // NOLINT: moved-from is empty by contract
  SmallVector<int, 3> d;
  d.push_back(5);
  SmallVector<int, 3> e = std::move(d);
  EXPECT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0], 5);
  e.resize(2);
  EXPECT_EQ(e.size(), 2u);
  const std::span<const int> view = e;
  EXPECT_EQ(view.size(), 2u);
}
