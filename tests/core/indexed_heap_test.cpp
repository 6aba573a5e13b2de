// The indexed 4-ary heap: ordering, key updates both ways and removal, by hand and against a
// sorted reference.
#include "sim_core/base/indexed_heap.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

using namespace mlsim;

namespace {
// Pops everything: the ids in the order they come out.
std::vector<std::uint32_t> drain(IndexedHeap<int>& h) {
  std::vector<std::uint32_t> out;
  while (!h.empty()) {
    out.push_back(h.top_id());
    h.pop();
  }
  return out;
}
}  // namespace

TEST(IndexedHeap, PopsInKeyOrder) {
  IndexedHeap<int> h;
  // id -> key: 0->50, 1->10, 2->40, 3->30, 4->20, 5->60
  const int keys[] = {50, 10, 40, 30, 20, 60};
  for (std::uint32_t id = 0; id < 6; ++id) h.push(id, keys[id]);
  EXPECT_EQ(h.size(), 6u);
  EXPECT_EQ(h.top_id(), 1u);
  EXPECT_EQ(h.top_key(), 10);
  EXPECT_EQ(h.key(2), 40);
  EXPECT_EQ(drain(h), (std::vector<std::uint32_t>{1, 4, 3, 2, 0, 5}));
  EXPECT_FALSE(h.contains(1));
}

TEST(IndexedHeap, UpdateMovesAKeyBothWays) {
  IndexedHeap<int> h;
  for (std::uint32_t id = 0; id < 6; ++id) h.push(id, 10 * static_cast<int>(id + 1));  // 10..60
  h.update(5, 5);  // 60 -> 5: new head
  EXPECT_EQ(h.top_id(), 5u);
  h.update(0, 100);  // 10 -> 100: last
  h.update(5, 35);   // 5 -> 35: between 30 (id 2) and 40 (id 3)
  EXPECT_EQ(h.top_id(), 1u);
  EXPECT_EQ(drain(h), (std::vector<std::uint32_t>{1, 2, 5, 3, 4, 0}));
}

TEST(IndexedHeap, EraseAnywhere) {
  IndexedHeap<int> h;
  for (std::uint32_t id = 0; id < 9; ++id) h.push(id, static_cast<int>(id));
  EXPECT_TRUE(h.erase(0));    // the head
  EXPECT_TRUE(h.erase(8));    // the last item
  EXPECT_TRUE(h.erase(3));    // inside
  EXPECT_FALSE(h.erase(3));   // already gone
  EXPECT_FALSE(h.erase(42));  // never there
  EXPECT_EQ(drain(h), (std::vector<std::uint32_t>{1, 2, 4, 5, 6, 7}));
  h.set(7, 3);  // inserts
  h.set(7, 1);  // updates
  h.push(3, 2);
  EXPECT_EQ(drain(h), (std::vector<std::uint32_t>{7, 3}));
}

TEST(IndexedHeap, TiesBrokenByTheKeyOnly) {
  // Equal times come out by sequence number when the key carries one, as the flow backend does.
  struct Key {
    int time, seq;
    bool operator<(const Key& o) const { return std::pair(time, seq) < std::pair(o.time, o.seq); }
  };
  IndexedHeap<Key> h;
  h.push(4, {7, 3});
  h.push(9, {7, 1});
  h.push(2, {5, 9});
  h.push(6, {7, 2});
  std::vector<std::uint32_t> out;
  while (!h.empty()) {
    out.push_back(h.top_id());
    h.pop();
  }
  EXPECT_EQ(out, (std::vector<std::uint32_t>{2, 9, 6, 4}));
}

TEST(IndexedHeap, MatchesASortedReferenceUnderRandomOperations) {
  // Property: after any mix of push / update / erase / pop, the heap pops what a sorted list of
  // the live (key, id) pairs says.
  std::mt19937 rng(7);
  IndexedHeap<int> h;
  std::vector<int> key(500, -1);  // -1: absent
  for (int step = 0; step < 20000; ++step) {
    const auto id = static_cast<std::uint32_t>(rng() % key.size());
    const int k = static_cast<int>(rng() % 1000) * 1000 + static_cast<int>(id);  // unique keys
    switch (rng() % 4) {
      case 0:
      case 1:
        h.set(id, k);
        key[id] = k;
        break;
      case 2:
        EXPECT_EQ(h.erase(id), key[id] >= 0);
        key[id] = -1;
        break;
      default:
        if (!h.empty()) {
          const std::uint32_t top = h.top_id();
          const int best = *std::min_element(
              key.begin(), key.end(), [](int a, int b) { return b < 0 || (a >= 0 && a < b); });
          ASSERT_EQ(h.top_key(), best);
          h.pop();
          key[top] = -1;
        }
    }
    ASSERT_EQ(h.size(), static_cast<std::size_t>(
                            std::count_if(key.begin(), key.end(), [](int k) { return k >= 0; })));
  }
  std::vector<std::pair<int, std::uint32_t>> live;
  for (std::uint32_t id = 0; id < key.size(); ++id)
    if (key[id] >= 0) live.emplace_back(key[id], id);
  std::sort(live.begin(), live.end());
  std::vector<std::uint32_t> want;
  for (const auto& [k, id] : live) want.push_back(id);
  EXPECT_EQ(drain(h), want);
}

TEST(IndexedHeap, BulkChangesComeOutInKeyOrder) {
  // By hand: ids 0..5 with keys 50, 40, 30, 20, 10, 60. In bulk: 4 -> 70 (up), 5 -> 5 (down),
  // 0 erased, 6 pushed at 25, 2 -> 45. Then, by key: 5 (5), 3 (20), 6 (25), 1 (40), 2 (45),
  // 4 (70).
  IndexedHeap<int> h;
  const int keys[] = {50, 40, 30, 20, 10, 60};
  for (std::uint32_t id = 0; id < 6; ++id) h.push(id, keys[id]);
  h.begin_bulk();
  h.set(4, 70);
  h.update(5, 5);
  EXPECT_TRUE(h.erase(0));
  h.push(6, 25);
  h.set(2, 45);
  h.end_bulk();
  EXPECT_EQ(drain(h), (std::vector<std::uint32_t>{5, 3, 6, 1, 2, 4}));
}

TEST(IndexedHeap, BulkChangesMatchASortedReference) {
  // Property: rounds of many changes in bulk (most keys moved, some erased or added) leave the
  // heap popping in the order of a sorted list of the live (key, id) pairs.
  std::mt19937 rng(11);
  for (int round = 0; round < 50; ++round) {
    IndexedHeap<int> h;
    std::vector<int> key(300, -1);
    for (std::uint32_t id = 0; id < key.size(); id += 2) {
      key[id] = static_cast<int>(rng() % 1000) * 1000 + static_cast<int>(id);
      h.push(id, key[id]);
    }
    h.begin_bulk();
    for (int step = 0; step < 400; ++step) {
      const auto id = static_cast<std::uint32_t>(rng() % key.size());
      if (rng() % 5 == 0) {
        EXPECT_EQ(h.erase(id), key[id] >= 0);
        key[id] = -1;
      } else {
        key[id] = static_cast<int>(rng() % 1000) * 1000 + static_cast<int>(id);
        h.set(id, key[id]);
      }
    }
    h.end_bulk();
    std::vector<std::pair<int, std::uint32_t>> live;
    for (std::uint32_t id = 0; id < key.size(); ++id)
      if (key[id] >= 0) live.emplace_back(key[id], id);
    std::sort(live.begin(), live.end());
    std::vector<std::uint32_t> want;
    for (const auto& [k, id] : live) want.push_back(id);
    ASSERT_EQ(drain(h), want) << "round " << round;
  }
}
