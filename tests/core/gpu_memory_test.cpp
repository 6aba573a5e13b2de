#include "sim_core/hardware/gpu_memory.hpp"

#include <gtest/gtest.h>

#include "sim_core/base/error.hpp"

using namespace mlsim;

TEST(GpuMemoryPool, AllocatesAndFreesByCategory) {
  Engine engine;
  GpuMemoryPool pool(engine, "gpu0", Bytes{1000});
  auto weights = pool.category("weights");
  auto kv = pool.category("kv");
  EXPECT_EQ(pool.category("weights"), weights);
  EXPECT_TRUE(pool.try_allocate(weights, Bytes{600}));
  EXPECT_TRUE(pool.try_allocate(kv, Bytes{400}));
  EXPECT_EQ(pool.used().count, 1000);
  EXPECT_EQ(pool.available().count, 0);
  pool.free(kv, Bytes{150});
  EXPECT_EQ(pool.used(kv).count, 250);
  EXPECT_EQ(pool.used(weights).count, 600);
  EXPECT_EQ(pool.peak().count, 1000);
  EXPECT_EQ(pool.peak(kv).count, 400);
  EXPECT_THROW(pool.free(kv, Bytes{251}), InvariantError);
  EXPECT_EQ((std::vector<std::string>{"weights", "kv"}), pool.category_names());
}

TEST(GpuMemoryPool, ExhaustionIsAnEventAndChangesNothing) {
  Engine engine;
  GpuMemoryPool pool(engine, "gpu1", Bytes{100});
  auto act = pool.category("activations");
  std::vector<MemoryExhausted> seen;
  pool.set_exhaustion_handler([&](const MemoryExhausted& e) { seen.push_back(e); });
  engine.schedule_at(Time::us(5), [&] {
    ASSERT_TRUE(pool.try_allocate(act, Bytes{70}));
    EXPECT_FALSE(pool.try_allocate(act, Bytes{31}));
    // Reported as an event, not from inside the caller's stack.
    EXPECT_TRUE(seen.empty());
  });
  engine.run();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].pool, "gpu1");
  EXPECT_EQ(seen[0].category, "activations");
  EXPECT_EQ(seen[0].requested.count, 31);
  EXPECT_EQ(seen[0].available.count, 30);
  EXPECT_EQ(seen[0].at, Time::us(5));
  EXPECT_EQ(pool.used().count, 70);
  EXPECT_EQ(pool.exhaustions(), 1u);
  EXPECT_TRUE(pool.try_allocate(act, Bytes{30}));  // exactly full is fine
}

TEST(GpuMemoryPool, TimeAverageByHand) {
  Engine engine;
  GpuMemoryPool pool(engine, "gpu", Bytes{1 << 20});
  // 0 bytes for 1 s, 300 for 2 s, 100 for 1 s, 400 of it in "kv" created at 3 s:
  // total average over 4 s = (0*1 + 300*2 + 100*1) / 4 = 175.
  auto w = pool.category("weights");
  engine.schedule_at(Time::s(1), [&] { ASSERT_TRUE(pool.try_allocate(w, Bytes{300})); });
  engine.schedule_at(Time::s(3), [&] { pool.free(w, Bytes{200}); });
  engine.run_until(Time::s(4));
  EXPECT_DOUBLE_EQ(pool.time_average(), 175.0);
  EXPECT_DOUBLE_EQ(pool.time_average(w), 175.0);
  auto kv = pool.category("kv");  // averaged over the pool's life: 0 so far
  EXPECT_DOUBLE_EQ(pool.time_average(kv), 0.0);
  EXPECT_EQ(pool.peak().count, 300);
}

TEST(GpuMemoryPool, PropertyUsedNeverExceedsCapacity) {
  Engine engine;
  GpuMemoryPool pool(engine, "gpu", Bytes{10'000});
  auto a = pool.category("a");
  auto b = pool.category("b");
  std::uint64_t state = 12345;
  std::int64_t held[2] = {0, 0};
  for (int i = 0; i < 5000; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const auto cat = (state >> 33) & 1 ? a : b;
    const std::int64_t n = static_cast<std::int64_t>((state >> 40) % 3000);
    if ((state >> 20) & 1) {
      const bool fits = n <= pool.available().count;
      EXPECT_EQ(pool.try_allocate(cat, Bytes{n}), fits);
      if (fits) held[cat] += n;
    } else {
      const auto give = std::min(n, held[cat]);
      pool.free(cat, Bytes{give});
      held[cat] -= give;
    }
    ASSERT_LE(pool.used().count, 10'000);
    ASSERT_EQ(pool.used().count, held[0] + held[1]);
  }
}
