#pragma once
// The classic "hold model" for event-set benchmarks: keep N events pending; each processed event
// schedules one new event at now + a pseudo-random increment, so the set size stays at N.
// The increment generator is shared by every implementation so they see the same key stream.
#include <cstdint>

namespace mlsim_bench {

// xorshift64*: cheap enough not to dominate the measurement.
struct HoldIncrements {
  std::uint64_t x = 0x9E3779B97F4A7C15ULL;
  // Uniform-ish in [1, 2^20] ns (about 1 ms): wide enough that the heap order is shuffled.
  std::int64_t next() {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    return static_cast<std::int64_t>(((x * 0x2545F4914F6CDD1DULL) >> 44) + 1);
  }
};

// Events processed per timed benchmark iteration.
inline constexpr std::int64_t kHoldBatch = 1'000'000;

}  // namespace mlsim_bench
