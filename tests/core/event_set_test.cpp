#include "sim_core/engine/event_set.hpp"

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

// The imminent hook (the engine prefetches callback slots with it) reports a key at most once and
// only before the key is taken out; keys that spill from the 256 ns level become imminent.
TEST(EventSet, ImminentHookReportsEachKeyOnceBeforeItIsTaken) {
  struct Seen {
    std::vector<int> reported;  // by sequence: 0 never, 1 reported, 2 taken
    int twice = 0, after_pop = 0;
  } seen;
  seen.reported.assign(5001, 0);
  EventSet s;
  s.set_imminent_hook(
      [](void* c, const EventKey& k) {
        auto& st = *static_cast<Seen*>(c);
        int& r = st.reported[k.seq_slot];
        if (r == 1) ++st.twice;
        if (r == 2) ++st.after_pop;
        r = 1;
      },
      &seen);
  std::uint64_t x = 12345;
  for (std::uint64_t seq = 1; seq <= 5000; ++seq)
    s.push({static_cast<std::int64_t>(next_rand(x) >> 48), seq});  // times up to 65535 ns
  int reported_before_pop = 0;
  while (!s.empty()) {
    const auto seq = s.top().seq_slot;
    if (seen.reported[seq] == 1) ++reported_before_pop;
    seen.reported[seq] = 2;
    s.pop();
  }
  EXPECT_EQ(seen.twice, 0);
  EXPECT_EQ(seen.after_pop, 0);
  // Every key lies on level 1 (times below 2^16), so every key but those at the base spills.
  EXPECT_GT(reported_before_pop, 4900);
}
