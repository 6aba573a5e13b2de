// Prefix caching worked by hand: LRU eviction order (deepest block of a prefix first, referenced
// blocks never), and two requests sharing a prefix through a replica (the second prefill is
// shorter by exactly the shared tokens); the Mooncake trace reader.
#include "models/serving/prefix_cache.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "models/serving/policies.hpp"
#include "models/serving/replica.hpp"
#include "models/serving/request_source.hpp"
#include "test_support.hpp"

using namespace mlsim;
using namespace mlsim::serving;

namespace {

std::vector<std::uint64_t> ids(std::initializer_list<std::uint64_t> v) {
  return v;
}

}  // namespace

// Pool of 5 layer-blocks, one per cached block. Request A publishes blocks 1, 2, 3 (a prefix
// chain) and leaves; then B publishes 7 and leaves. Released last block first, the LRU order is
// 3, 2, 1, 7 (3 least recent):
//   make_room(2): 1 free -> evicts 3                      -> 2 free
//   B references 1 again; make_room(4): 2 free + 2, 7 evictable = 4 -> evicts 2, then 7; 1 stays
//   make_room(5): 4 free + nothing evictable < 5 -> false, nothing evicted
TEST(PrefixCache, EvictsLeastRecentlyUsedDeepestFirstNeverReferenced) {
  KvBlockPool pool(5, 512);
  PrefixCache cache(pool, 512, 1);
  std::int64_t a = 0, b = 0;
  ASSERT_TRUE(pool.resize(a, 3));
  for (auto h : ids({1, 2, 3})) cache.publish(h, a);
  EXPECT_EQ(a, 0);
  EXPECT_EQ(cache.held_layer_blocks(), 3);
  EXPECT_EQ(cache.total_references(), 3);
  cache.release(ids({1, 2, 3}));
  ASSERT_TRUE(pool.resize(b, 1));
  cache.publish(7, b);
  cache.release(ids({7}));
  EXPECT_EQ(pool.used(), 4);
  EXPECT_EQ(cache.evictable_blocks(), 4u);

  EXPECT_TRUE(cache.make_room(2));
  EXPECT_EQ(cache.match(ids({1, 2, 3}), 3), 2);  // 3 is gone, 1 and 2 remain
  EXPECT_EQ(cache.evicted_blocks(), 1u);

  cache.acquire(ids({1}));
  EXPECT_TRUE(cache.make_room(4));
  EXPECT_EQ(cache.match(ids({1, 2}), 2), 1);  // 2 evicted, 1 referenced and kept
  EXPECT_EQ(cache.match(ids({7}), 1), 0);
  EXPECT_EQ(cache.references(1), 1);
  EXPECT_EQ(pool.free(), 4);

  EXPECT_FALSE(cache.make_room(5));
  EXPECT_EQ(cache.blocks(), 1u);
  cache.release(ids({1}));
  EXPECT_EQ(cache.total_references(), 0);
}

// Publishing content another request published meanwhile keeps one copy: the second request's
// block is freed and it references the cached one.
TEST(PrefixCache, SameContentComputedTwiceKeepsOneCopy) {
  KvBlockPool pool(4, 512);
  PrefixCache cache(pool, 512, 2);
  std::int64_t a = 0, b = 0;
  ASSERT_TRUE(pool.resize(a, 2));
  ASSERT_TRUE(pool.resize(b, 2));
  cache.publish(5, a);
  cache.publish(5, b);
  EXPECT_EQ(pool.used(), 2);
  EXPECT_EQ(cache.references(5), 2);
  cache.release(ids({5}));
  cache.release(ids({5}));
  EXPECT_EQ(cache.references(5), 0);
  EXPECT_EQ(cache.evictable_blocks(), 1u);
}

namespace {

struct PrefixLog : ReplicaObserver {
  std::vector<std::vector<WorkItem>> batches;
  std::vector<std::uint64_t> done;
  void on_first_token(Replica&, Request&) override {}
  void on_answer_done(Replica&, Request& r) override { done.push_back(r.spec.id); }
  void on_dropped(Replica&, Request&) override { FAIL() << "unexpected drop"; }
  void on_iteration(Replica& rep) override {
    std::vector<WorkItem> items;
    for (const auto& e : rep.last_batch().entries) items.push_back(e.work);
    batches.push_back(items);
  }
};

// One toy replica (one layer, 100 KV blocks of 2 tokens) serving the two requests of the tests
// below: A (prompt 10 = content blocks 1, 2, 3; 2 output tokens) at 0 and B (prompt 9 = blocks
// 1, 2, 9; 1 output token) at 1 s. `prefix_block_tokens` 0 turns prefix caching off.
struct TwoRequestsOnOneReplica {
  Engine engine;
  PrefixLog log;
  fixtures::Platform platform{engine, fixtures::toy_gpu(), 1, {0}};
  OperatorTimer timer{platform.costs, platform.gpu, Dtype::kFp16};
  Replica replica;
  Request a, b;

  explicit TwoRequestsOnOneReplica(std::int32_t prefix_block_tokens)
      : replica(engine, *platform.compute, config(prefix_block_tokens),
                std::make_unique<IterationCostModel>(fixtures::toy_transformer(1, "toy"), 1, timer,
                                                     std::vector<std::int32_t>{1}),
                KvBlockPool(100, 2), std::vector<std::int32_t>{1}, 0, BatchLimits{},
                make_scheduler("continuous", "test"), log) {
    a.spec = {0, Time::zero(), 10, 2, 0, -1, {1, 2, 3}};
    b.spec = {1, Time::s(1), 9, 1, 0, -1, {1, 2, 9}};
    engine.schedule_at(Time::zero(), [this] { replica.submit(a); });
    engine.schedule_at(Time::s(1), [this] { replica.submit(b); });
    engine.run();
  }

  static ReplicaConfig config(std::int32_t prefix_block_tokens) {
    ReplicaConfig cfg;
    cfg.name = "r";
    cfg.gpus = {0};
    cfg.prefix_block_tokens = prefix_block_tokens;
    return cfg;
  }
};

}  // namespace

// Prefix blocks of 4 tokens, KV blocks of 2 tokens, one layer (a cached block is 2 layer-blocks).
//   A: prompt 10 = blocks 1, 2 (full) and 3 (2 tokens), 2 output tokens, at t = 0.
//   B: prompt 9 = blocks 1, 2 (full) and 9 (1 token), 1 output token, after A's prefill.
// By hand: iteration 1 prefills A's 10 tokens; A's full blocks 1 and 2 go to the cache (its
// private KV: 5 layer-blocks - 2 x 2 = 1). B finds 1 and 2 cached: 8 tokens, so its prefill is
// 9 - 8 = 1 token attending to 8 cached ones (shorter by exactly the shared 8 tokens). At the end
// the cache holds blocks 1 and 2 (4 layer-blocks), unreferenced, and nothing else is in the pool.
TEST(PrefixCaching, SecondRequestReusesTheSharedPrefix) {
  TwoRequestsOnOneReplica run(4);
  const auto& log = run.log;
  const auto& replica = run.replica;
  ASSERT_EQ(log.batches.size(), 3u);  // prefill A, decode A, prefill B
  ASSERT_EQ(log.batches[0].size(), 1u);
  EXPECT_EQ(log.batches[0][0].tokens, 10);
  EXPECT_EQ(log.batches[0][0].cached, 0);
  ASSERT_EQ(log.batches[2].size(), 1u);
  EXPECT_EQ(log.batches[2][0].tokens, 1);
  EXPECT_EQ(log.batches[2][0].cached, 8);
  const auto& st = replica.state();
  EXPECT_EQ(st.prefix_hit_tokens_total(), 8);
  EXPECT_EQ(st.prefix_lookup_tokens(), 19);  // 10 + 9
  EXPECT_EQ(st.prefix_hit_requests(), 1u);
  EXPECT_EQ(st.prefix_cache()->blocks(), 2u);
  EXPECT_EQ(st.prefix_cache()->total_references(), 0);
  EXPECT_EQ(replica.kv().used(), 4);
  EXPECT_EQ(run.a.kv_blocks + run.b.kv_blocks, 0);
}

// Without prefix caching the same two requests prefill 10 and 9 tokens.
TEST(PrefixCaching, OffPrefillsEverything) {
  TwoRequestsOnOneReplica run(0);
  const auto& log = run.log;
  ASSERT_EQ(log.batches.size(), 3u);
  EXPECT_EQ(log.batches[2][0].tokens, 9);
  EXPECT_EQ(run.replica.kv().used(), 0);
}

TEST(MooncakeTrace, ReadsLinesWithTheirBlockIds) {
  const auto dir = std::filesystem::temp_directory_path() / "mlsim_mooncake_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "t.jsonl")
      << R"({"timestamp": 0, "input_length": 1024, "output_length": 6, "hash_ids": [0, 1]})"
      << "\n"
      << R"({"timestamp": 40, "input_length": 513, "output_length": 0, "hash_ids": [0, 7]})"
      << "\n"
      << R"({"timestamp": 41, "input_length": 513, "output_length": 1, "hash_ids": [0]})"
      << "\n";
  MooncakeTraceSource src(dir / "t.jsonl", 2.0);
  EXPECT_EQ(src.hash_block_tokens(), 512);
  auto a = src.next();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->prompt_tokens, 1024);
  EXPECT_EQ(a->block_hashes, ids({0, 1}));
  auto b = src.next();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->arrival, Time::ms(20));  // 40 ms at twice the rate
  EXPECT_EQ(b->output_tokens, 1);       // 0 read as 1
  try {
    (void)src.next();  // 513 tokens need 2 blocks
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("t.jsonl:3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected 2 ids"), std::string::npos) << e.what();
  }
  std::ofstream(dir / "u.jsonl") << R"({"timestamp": 0, "input_len": 1, "output_length": 1})";
  MooncakeTraceSource bad(dir / "u.jsonl");
  EXPECT_THROW((void)bad.next(), InputError);
  std::filesystem::remove_all(dir);
}

// The shared Mooncake trace: 3,993 requests, one id per 512-token block, 64% of the blocks repeat
// an earlier id.
TEST(MooncakeTrace, WholeSyntheticTrace) {
  const auto file = fixtures::shared_data_dir() / "llm_traces/mooncake/synthetic_trace.jsonl";
  if (!std::filesystem::exists(file)) GTEST_SKIP() << "Mooncake trace not found: " << file;
  MooncakeTraceSource src(file);
  std::int64_t n = 0, blocks = 0;
  Time last;
  while (auto r = src.next()) {
    ++n;
    blocks += static_cast<std::int64_t>(r->block_hashes.size());
    last = r->arrival;
  }
  EXPECT_EQ(n, 3993);
  EXPECT_EQ(blocks, 121877);
  EXPECT_EQ(last, Time::ms(1022025));
}
