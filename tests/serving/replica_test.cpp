// Hand-worked schedules of one replica: continuous batching of three requests step by step, a
// KV exhaustion that preempts a request and later resumes it, static batching and chunked
// prefill.
#include "models/serving/replica.hpp"
#include "models/serving/policies.hpp"

#include <gtest/gtest.h>

#include <map>

#include "test_support.hpp"

using namespace mlsim;
using namespace mlsim::serving;

namespace {

struct Step {
  Time start, end;
  // (request id, tokens, decode?) in batch order
  std::vector<std::tuple<std::uint64_t, int, bool>> work;
};

class Recorder : public fixtures::TimesRecorder {
 public:
  using TimesRecorder::TimesRecorder;
  void on_iteration(Replica& rep) override {
    Step s;
    s.end = engine_.now();
    for (const auto& e : rep.last_batch().entries)
      s.work.emplace_back(e.request->spec.id, e.work.tokens, e.work.decode);
    steps.push_back(s);
  }
  std::vector<Step> steps;
};

using fixtures::toy_gpu;

TransformerShape one_layer() {
  return fixtures::toy_transformer(1, "toy");
}

struct ReplicaHarness {
  Engine engine;
  Recorder rec{engine};
  fixtures::Platform platform{engine, toy_gpu(), 1, {0}};
  OperatorTimer timer{platform.costs, platform.gpu, Dtype::kFp16};
  std::unique_ptr<Replica> replica;
  std::vector<std::unique_ptr<Request>> requests;

  ReplicaHarness(const TransformerShape& m, std::int64_t kv_blocks, std::int32_t block_tokens,
                 const std::string& scheduler, BatchLimits limits = {}) {
    ReplicaConfig cfg;
    cfg.name = "r0";
    cfg.gpus = {0};
    replica = std::make_unique<Replica>(
        engine, *platform.compute, cfg,
        std::make_unique<IterationCostModel>(m, 1, timer, std::vector<std::int32_t>{m.layers}),
        KvBlockPool(kv_blocks, block_tokens), std::vector<std::int32_t>{m.layers}, 0, limits,
        make_scheduler(scheduler, "test"), rec);
  }
  Request& add(std::uint64_t id, Time at, int prompt, int output) {
    auto r = std::make_unique<Request>();
    r->spec = {id, at, prompt, output, 0, -1, {}};
    Request& ref = *r;
    requests.push_back(std::move(r));
    engine.schedule_at(at, [this, &ref] { replica->submit(ref); });
    return ref;
  }
  double cost_of(std::vector<WorkItem> items) {
    return replica->cost_model().cost(items).compute_s;
  }
};

WorkItem prefill(int tokens, int cached, int layers) {
  return {tokens, cached, false, true, 0, layers};
}
WorkItem decode(int cached, int layers) {
  return {1, cached, true, true, 0, layers};
}

using W = std::vector<std::tuple<std::uint64_t, int, bool>>;

}  // namespace

// A(prompt 3, 3 tokens) and B(prompt 5, 2 tokens) arrive at 0; C(prompt 2, 2 tokens) arrives
// during the second iteration. vLLM's policy, worked by hand:
//   1: prefill A(3) + B(5)        -> A and B sample their first token
//   2: decode A, B                -> B has its 2 tokens: done
//   3: prefill C(2)               -> admitted prefills go first, decodes wait one iteration
//   4: decode A, C                -> A has 3 tokens, C has 2: both done
TEST(ContinuousBatching, ThreeRequestsStepByStep) {
  const auto m = one_layer();
  ReplicaHarness h(m, 1000, 16, "continuous");
  h.add(1, Time::zero(), 3, 3);
  h.add(2, Time::zero(), 5, 2);
  // Iteration 1 costs t1; C arrives 1 ns into iteration 2.
  const Time t1 = Time::from_seconds_ceil(h.cost_of({prefill(3, 0, 1), prefill(5, 0, 1)}));
  h.add(3, t1 + Time::ns(1), 2, 2);
  h.engine.run();

  ASSERT_EQ(h.rec.steps.size(), 4u);
  EXPECT_EQ(h.rec.steps[0].work, (W{{1, 3, false}, {2, 5, false}}));
  EXPECT_EQ(h.rec.steps[1].work, (W{{1, 1, true}, {2, 1, true}}));
  EXPECT_EQ(h.rec.steps[2].work, (W{{3, 2, false}}));
  EXPECT_EQ(h.rec.steps[3].work, (W{{1, 1, true}, {3, 1, true}}));
  // Iterations run back to back; each lasts what the cost model says for its batch.
  const Time t2 = t1 + Time::from_seconds_ceil(h.cost_of({decode(3, 1), decode(5, 1)}));
  const Time t3 = t2 + Time::from_seconds_ceil(h.cost_of({prefill(2, 0, 1)}));
  const Time t4 = t3 + Time::from_seconds_ceil(h.cost_of({decode(4, 1), decode(2, 1)}));
  EXPECT_EQ(h.rec.steps[0].end, t1);
  EXPECT_EQ(h.rec.first[1], t1);
  EXPECT_EQ(h.rec.done[2], t2);
  EXPECT_EQ(h.rec.first[3], t3);
  EXPECT_EQ(h.rec.done[1], t4);
  EXPECT_EQ(h.rec.done[3], t4);
  EXPECT_EQ(h.replica->kv().used(), 0);
  EXPECT_EQ(h.replica->preemptions(), 0u);
}

// KV pool of 4 blocks of 2 tokens (one layer). A(prompt 4, 4 tokens), B(prompt 2, 4 tokens):
//   1: prefill A(4) [2 blocks] + B(2) [1 block]         used 3/4
//   2: A needs a 3rd block (5 tokens): takes the last. B needs a 2nd block: none left, so B, the
//      most recent, is preempted by recompute (its block freed). Batch: decode A.   used 3/4
//   3: B's recompute needs 2 blocks (prompt 2 + 1 generated = 3 tokens), 1 free: waits. decode A.
//   4: A writes its 7th token, takes the 4th block, samples its 4th token: done, all freed.
//   5: prefill B(3) (recompute)  -> B samples its 2nd token
//   6, 7: decode B               -> B done with 4 tokens
TEST(ContinuousBatching, KvExhaustionPreemptsAndResumes) {
  const auto m = one_layer();
  ReplicaHarness h(m, 4, 2, "continuous");
  auto& a = h.add(1, Time::zero(), 4, 4);
  auto& b = h.add(2, Time::zero(), 2, 4);
  h.engine.run();
  ASSERT_EQ(h.rec.steps.size(), 7u);
  EXPECT_EQ(h.rec.steps[0].work, (W{{1, 4, false}, {2, 2, false}}));
  EXPECT_EQ(h.rec.steps[1].work, (W{{1, 1, true}}));
  EXPECT_EQ(h.rec.steps[2].work, (W{{1, 1, true}}));
  EXPECT_EQ(h.rec.steps[3].work, (W{{1, 1, true}}));
  EXPECT_EQ(h.rec.steps[4].work, (W{{2, 3, false}}));
  EXPECT_EQ(h.rec.steps[5].work, (W{{2, 1, true}}));
  EXPECT_EQ(h.rec.steps[6].work, (W{{2, 1, true}}));
  EXPECT_EQ(b.preemptions, 1);
  EXPECT_EQ(a.preemptions, 0);
  EXPECT_EQ(h.replica->preemptions(), 1u);
  EXPECT_EQ(a.generated, 4);
  EXPECT_EQ(b.generated, 4);
  EXPECT_EQ(h.replica->kv().peak(), 4);
  EXPECT_EQ(h.replica->kv().used(), 0);
  EXPECT_EQ(h.rec.first[2], h.rec.steps[0].end);  // TTFT is that of the first answer token
}

TEST(ContinuousBatching, RequestLargerThanThePoolIsDropped) {
  const auto m = one_layer();
  ReplicaHarness h(m, 4, 2, "continuous");
  h.add(1, Time::zero(), 8, 2);  // 10 tokens need 5 blocks > 4
  h.add(2, Time::zero(), 2, 2);
  h.engine.run();
  EXPECT_EQ(h.rec.dropped, (std::vector<std::uint64_t>{1}));
  EXPECT_EQ(h.rec.done.count(2), 1u);
}

// Static batching: A and B form a batch; C arrives after it started and waits for the whole
// batch to finish, even though B finishes early.
TEST(StaticBatching, LaterArrivalWaitsForTheWholeBatch) {
  const auto m = one_layer();
  ReplicaHarness h(m, 1000, 16, "static");
  h.add(1, Time::zero(), 3, 3);
  h.add(2, Time::zero(), 5, 1);
  h.add(3, Time::ns(1), 2, 1);
  h.engine.run();
  ASSERT_EQ(h.rec.steps.size(), 4u);
  EXPECT_EQ(h.rec.steps[0].work, (W{{1, 3, false}, {2, 5, false}}));  // B done after prefill
  EXPECT_EQ(h.rec.steps[1].work, (W{{1, 1, true}}));
  EXPECT_EQ(h.rec.steps[2].work, (W{{1, 1, true}}));
  EXPECT_EQ(h.rec.steps[3].work, (W{{3, 2, false}}));
}

// Static batching with max_batch_tokens 6: A (prompt 3) is admitted; B (prompt 5) would bring the
// batch to 8 > 6 tokens, so the batch closes (counted) and B waits for the whole batch:
//   1: prefill A(3)   2: decode A (done)   3: prefill B(5) (done)
TEST(StaticBatching, TokenLimitClosesTheBatchAndIsCounted) {
  const auto m = one_layer();
  ReplicaHarness h(m, 1000, 16, "static", BatchLimits{256, 6});
  h.add(1, Time::zero(), 3, 2);
  h.add(2, Time::zero(), 5, 1);
  h.engine.run();
  ASSERT_EQ(h.rec.steps.size(), 3u);
  EXPECT_EQ(h.rec.steps[0].work, (W{{1, 3, false}}));
  EXPECT_EQ(h.rec.steps[1].work, (W{{1, 1, true}}));
  EXPECT_EQ(h.rec.steps[2].work, (W{{2, 5, false}}));
  EXPECT_EQ(h.replica->state().batches_cut_by_token_limit(), 1u);
}

// Chunked prefill with a 4-token budget: decodes first, then prefill chunks.
//   1: A(prompt 6) chunk 4                      2: A chunk 2 (samples), B(prompt 3) chunk 2
//   3: decode A, B chunk 1 (samples)            4: decode A, decode B
TEST(ChunkedPrefill, TokenBudgetSplitsPrompts) {
  const auto m = one_layer();
  ReplicaHarness h(m, 1000, 16, "chunked_prefill", BatchLimits{256, 4});
  h.add(1, Time::zero(), 6, 3);
  h.add(2, Time::ns(1), 3, 2);
  h.engine.run();
  ASSERT_GE(h.rec.steps.size(), 4u);
  EXPECT_EQ(h.rec.steps[0].work, (W{{1, 4, false}}));
  EXPECT_EQ(h.rec.steps[1].work, (W{{1, 2, false}, {2, 2, false}}));
  EXPECT_EQ(h.rec.steps[2].work, (W{{1, 1, true}, {2, 1, false}}));
  EXPECT_EQ(h.rec.steps[3].work, (W{{1, 1, true}, {2, 1, true}}));
  EXPECT_EQ(h.rec.steps.size(), 4u);
}

// The replica's GPU runs through the platform's Compute: a GPU at half speed from the start takes
// twice the cost model's time per iteration; halving it in the middle of the first iteration
// stretches only what remains of it.
TEST(ContinuousBatching, IterationsRunAtTheHostsSpeed) {
  const auto m = one_layer();
  {
    ReplicaHarness h(m, 1000, 16, "continuous");
    h.platform.speeds.set_speed(0, 0.5);
    h.add(1, Time::zero(), 3, 1);
    const double t1 = h.cost_of({prefill(3, 0, 1)});
    h.engine.run();
    ASSERT_EQ(h.rec.steps.size(), 1u);
    EXPECT_EQ(h.rec.steps[0].end, Time::from_seconds_ceil(2 * t1));
  }
  {
    ReplicaHarness h(m, 1000, 16, "continuous");
    h.add(1, Time::zero(), 3, 1);
    const double t1 = h.cost_of({prefill(3, 0, 1)});
    // At t1 / 4 a quarter is done; the remaining 3/4 at half speed take 1.5 t1: ends at 1.75 t1.
    const Time quarter = Time::from_seconds_ceil(t1 / 4);
    h.engine.schedule_at(quarter, [&] { h.platform.speeds.set_speed(0, 0.5); });
    h.engine.run();
    ASSERT_EQ(h.rec.steps.size(), 1u);
    const double done = quarter.seconds() + (t1 - quarter.seconds()) / 0.5;
    EXPECT_EQ(h.rec.steps[0].end, Time::from_seconds_ceil(done));
    EXPECT_NEAR(h.rec.steps[0].end.seconds(), 1.75 * t1, 2e-9);
  }
}
