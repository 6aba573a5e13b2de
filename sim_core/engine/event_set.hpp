#pragma once
// The engine's set of pending event keys, ordered by (time, sequence).
//
// A radix-256 bucket hierarchy (a hierarchical timing wheel without wrap-around): level L holds
// keys whose time first differs from the current base time in byte L, in the bucket of that
// byte's value. Insertion appends to a vector; when level 0 runs dry, the lowest non-empty bucket
// of the lowest non-empty level is spread over the levels below it, so a key moves at most a few
// times (once per byte of its distance from the base) and always through memory written
// sequentially, where a heap would sift it through a tree of scattered cache lines.
//
// Keys of one time are taken in sequence order: the bucket of the current time is sorted once
// when it becomes current, and keys added at that time later carry larger sequences, so
// appending keeps it sorted.
//
// Keys that spill into level 0 will be taken within the next 256 ns of simulated time: the set
// reports them to an optional `imminent` hook, which the engine uses to prefetch their callbacks'
// slots (a cache miss per event otherwise, when a million events are pending).
//
// Monotonicity (no key earlier than the base) holds in a discrete-event run. The one legal
// exception: after run_until() has peeked at a future key, the caller may schedule an earlier
// one; such keys go to a small side heap that is checked first.
#include <algorithm>
#include <array>
#include <cstdint>
#include <queue>
#include <vector>

namespace mlsim {

struct EventKey {
  std::int64_t time;
  std::uint64_t seq_slot;  // sequence in the high bits, slot in the low bits: unique per event
  bool operator<(const EventKey& o) const {
    return time < o.time || (time == o.time && seq_slot < o.seq_slot);
  }
  bool operator>(const EventKey& o) const { return o < *this; }
};

class EventSet {
 public:
  // Called with each key as it spills into level 0 (or the current bucket).
  using ImminentHook = void (*)(void* context, const EventKey& key);
  void set_imminent_hook(ImminentHook hook, void* context) {
    imminent_ = hook;
    imminent_context_ = context;
  }

  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }

  void push(EventKey k) {
    ++size_;
    const auto t = static_cast<std::uint64_t>(k.time);
    if (t < base_) {
      early_.push(k);
      return;
    }
    if (t == base_) {
      current_.push_back(k);  // a larger sequence than every key already there: stays sorted
      return;
    }
    const int level = level_of(t);
    const unsigned slot = (t >> (8 * level)) & 0xff;
    levels_[level].buckets[slot].push_back(k);
    levels_[level].mark(slot);
  }

  // Smallest key; the set must not be empty.
  const EventKey& top() {
    if (cursor_ >= current_.size()) advance();
    if (!early_.empty() && (cursor_ >= current_.size() || early_.top() < current_[cursor_]))
      return early_.top();
    return current_[cursor_];
  }

  void pop() {
    const EventKey& t = top();
    --size_;
    if (!early_.empty() && &t == &early_.top()) {
      early_.pop();
      return;
    }
    ++cursor_;
  }

 private:
  static constexpr int kLevels = 8;

  struct Level {
    std::array<std::vector<EventKey>, 256> buckets;
    std::array<std::uint64_t, 4> bits{};
    void mark(unsigned s) { bits[s >> 6] |= 1ULL << (s & 63); }
    void unmark(unsigned s) { bits[s >> 6] &= ~(1ULL << (s & 63)); }
    // Lowest marked slot >= from, or -1.
    int first_from(unsigned from) const {
      for (unsigned w = from >> 6; w < 4; ++w) {
        std::uint64_t m = bits[w];
        if (w == (from >> 6)) m &= ~0ULL << (from & 63);
        if (m) return static_cast<int>(w * 64 + __builtin_ctzll(m));
      }
      return -1;
    }
  };

  int level_of(std::uint64_t t) const {
    const std::uint64_t x = t ^ base_;
    return (63 - __builtin_clzll(x)) >> 3;  // x != 0 here
  }

  // Makes the bucket of the next smallest time current.
  void advance() {
    current_.clear();
    cursor_ = 0;
    for (;;) {
      // Level 0 holds times that share every byte but the lowest with the base.
      int s = levels_[0].first_from(static_cast<unsigned>(base_ & 0xff));
      if (s >= 0) {
        base_ = (base_ & ~0xffULL) | static_cast<unsigned>(s);
        current_.swap(levels_[0].buckets[s]);
        levels_[0].unmark(static_cast<unsigned>(s));
        std::sort(current_.begin(), current_.end());
        return;
      }
      int level = 1;
      for (; level < kLevels; ++level) {
        s = levels_[level].first_from(static_cast<unsigned>((base_ >> (8 * level)) & 0xff));
        if (s >= 0) break;
      }
      if (level == kLevels) return;  // nothing left but early keys
      // New base: the smallest time in the bucket. It shares every byte above `level` with the
      // old base, so keys on higher levels stay where they are; this bucket's keys spread below.
      auto& src = levels_[level].buckets[s];
      spill_.swap(src);
      levels_[level].unmark(static_cast<unsigned>(s));
      std::uint64_t min_t = ~0ULL;
      for (const EventKey& k : spill_) min_t = std::min(min_t, static_cast<std::uint64_t>(k.time));
      base_ = min_t;
      for (const EventKey& k : spill_) {
        const auto t = static_cast<std::uint64_t>(k.time);
        if (t == base_) {
          if (imminent_) imminent_(imminent_context_, k);
          current_.push_back(k);
        } else {
          const int l = level_of(t);
          if (l == 0 && imminent_) imminent_(imminent_context_, k);
          const unsigned sl = (t >> (8 * l)) & 0xff;
          levels_[l].buckets[sl].push_back(k);
          levels_[l].mark(sl);
        }
      }
      spill_.clear();
      std::sort(current_.begin(), current_.end());
      return;
    }
  }

  std::array<Level, kLevels> levels_;
  std::vector<EventKey> current_;  // keys at time base_, sorted, consumed from cursor_
  std::size_t cursor_ = 0;
  std::vector<EventKey> spill_;
  std::uint64_t base_ = 0;
  std::priority_queue<EventKey, std::vector<EventKey>, std::greater<EventKey>> early_;
  std::size_t size_ = 0;
  ImminentHook imminent_ = nullptr;
  void* imminent_context_ = nullptr;
};

}  // namespace mlsim
