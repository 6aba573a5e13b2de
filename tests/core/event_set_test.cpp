#include "sim_core/event_set.hpp"

#include <gtest/gtest.h>

#include <queue>
#include <vector>

using namespace mlsim;

namespace {
std::uint64_t next_rand(std::uint64_t& x) {
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return x;
}
}  // namespace

TEST(EventSet, EqualTimesComeOutInSequenceOrder) {
  EventSet s;
  s.push({5, 3});
  s.push({5, 1});
  s.push({2, 9});
  s.push({5, 2});
  std::vector<std::uint64_t> seqs;
  while (!s.empty()) {
    seqs.push_back(s.top().seq_slot);
    s.pop();
  }
  EXPECT_EQ(seqs, (std::vector<std::uint64_t>{9, 1, 2, 3}));
}

TEST(EventSet, KeyEarlierThanAPeekedOneIsStillFirst) {
  EventSet s;
  s.push({1000, 1});
  EXPECT_EQ(s.top().time, 1000);  // peek moves the base to 1000
  s.push({400, 2});               // legal: the clock is still below 1000
  s.push({1000, 3});
  EXPECT_EQ(s.top().time, 400);
  s.pop();
  EXPECT_EQ(s.top().seq_slot, 1u);
  s.pop();
  EXPECT_EQ(s.top().seq_slot, 3u);
  s.pop();
  EXPECT_TRUE(s.empty());
}

// Property: under the discrete-event discipline (every new key >= the last key taken out, with a
// fresh sequence) plus occasional "peek then schedule earlier", the set yields exactly the order
// of a reference priority queue. Time spreads cover every byte level.
TEST(EventSet, MatchesReferencePriorityQueue) {
  for (int spread_bits : {0, 4, 12, 20, 36, 60}) {
    EventSet s;
    std::priority_queue<EventKey, std::vector<EventKey>, std::greater<EventKey>> ref;
    std::uint64_t x = 88172645463325252ULL + static_cast<std::uint64_t>(spread_bits);
    std::uint64_t seq = 1;
    std::int64_t now = 0;
    auto delta = [&] {
      if (spread_bits == 0) return std::int64_t{0};
      return static_cast<std::int64_t>(next_rand(x) >> (64 - spread_bits));
    };
    for (int i = 0; i < 2000; ++i) {
      EventKey k{now + delta(), seq++};
      s.push(k);
      ref.push(k);
    }
    for (int step = 0; step < 20000; ++step) {
      ASSERT_EQ(s.size(), ref.size());
      if (ref.empty()) break;
      const EventKey want = ref.top();
      if (next_rand(x) % 50 == 0 && want.time > now) {
        // peek, then schedule something between now and the peeked key
        ASSERT_EQ(s.top().seq_slot, want.seq_slot);
        EventKey k{now + static_cast<std::int64_t>(next_rand(x) %
                                                   static_cast<std::uint64_t>(want.time - now)),
                   seq++};
        s.push(k);
        ref.push(k);
        continue;
      }
      ASSERT_EQ(s.top().time, want.time) << "spread " << spread_bits << " step " << step;
      ASSERT_EQ(s.top().seq_slot, want.seq_slot);
      s.pop();
      ref.pop();
      now = want.time;
      const int children = static_cast<int>(next_rand(x) % 3);
      for (int c = 0; c < children; ++c) {
        EventKey k{now + delta(), seq++};
        s.push(k);
        ref.push(k);
      }
    }
  }
}
