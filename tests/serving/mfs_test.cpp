// MFS mechanisms worked by hand: a tier exit inside a batch, multi-level sampling, and an
// escalation that reuses the lower tier's KV.
#include <gtest/gtest.h>

#include "models/serving/policies.hpp"
#include "models/serving/replica.hpp"
#include "models/serving/serving_scenario.hpp"
#include "test_support.hpp"

using namespace mlsim;
using namespace mlsim::serving;

namespace {

using fixtures::toy_gpu;

TransformerShape four_layers() {
  return fixtures::toy_transformer(4, "toy4");
}

struct Log : ReplicaObserver {
  Engine& engine;
  explicit Log(Engine& e) : engine(e) {}
  std::vector<std::vector<WorkItem>> batches;
  std::vector<std::int64_t> kv_after;
  std::map<std::uint64_t, Time> done;
  void on_first_token(Replica&, Request&) override {}
  void on_answer_done(Replica&, Request& r) override { done[r.spec.id] = engine.now(); }
  void on_dropped(Replica&, Request&) override { FAIL() << "unexpected drop"; }
  void on_iteration(Replica& rep) override {
    std::vector<WorkItem> items;
    for (const auto& e : rep.last_batch().entries) items.push_back(e.work);
    batches.push_back(items);
    kv_after.push_back(rep.kv().used());
  }
};

struct MfsHarness {
  Engine engine;
  Log log{engine};
  fixtures::Platform platform{engine, toy_gpu(), 1, {0}};
  OperatorTimer timer{platform.costs, platform.gpu, Dtype::kFp16};
  std::unique_ptr<Replica> replica;
  std::vector<std::unique_ptr<Request>> requests;
  // Two tiers: tier 0 exits after layer 1, tier 1 runs all 4 layers.
  explicit MfsHarness(bool multi_level_sampling = true, Time sampling_pass = Time::zero(),
                      std::int64_t kv_blocks = 1000) {
    ReplicaConfig cfg;
    cfg.name = "mfs";
    cfg.reuse_across_tiers = true;
    cfg.multi_level_sampling = multi_level_sampling;
    cfg.sampling_pass_overhead = sampling_pass;
    cfg.gpus = {0};
    const auto m = four_layers();
    replica = std::make_unique<Replica>(
        engine, *platform.compute, cfg,
        std::make_unique<IterationCostModel>(m, 1, timer, std::vector<std::int32_t>{1, 4}),
        KvBlockPool(kv_blocks, 2), std::vector<std::int32_t>{1, 4}, /*feature_layers=*/1,
        BatchLimits{}, make_scheduler("continuous", "test"), log);
  }
  Request& add(std::uint64_t id, int prompt, int output, int tier, int escalate_to = -1) {
    auto r = std::make_unique<Request>();
    r->spec = {id, Time::zero(), prompt, output, tier, escalate_to, {}};
    r->tier = tier;
    Request& ref = *r;
    requests.push_back(std::move(r));
    engine.schedule_at(Time::zero(), [this, &ref] { replica->submit(ref); });
    return ref;
  }
};

}  // namespace

// A (tier 0, exit after layer 1) and B (tier 1, all 4 layers), prompt 2, 2 tokens each, batched
// together. By hand, iteration 1 (prefill of both):
//   embedding of 4 tokens; layer 1 runs 4 tokens (both prompts attend causally: 3 pairs each);
//   layers 2-4 run only B's 2 tokens; A's head samples at layer 1, B's at layer 4 (one token each).
// KV after it: A holds ceil(2/2)*1 = 1 layer-block + 1 feature block (its prompt's hidden states
// at its exit, for escalation); B holds ceil(2/2)*4 = 4.
TEST(Mfs, TierExitInsideABatch) {
  MfsHarness h;
  h.add(1, 2, 2, 0);
  h.add(2, 2, 2, 1);
  h.engine.run();
  ASSERT_EQ(h.log.batches.size(), 2u);
  ASSERT_EQ(h.log.batches[0].size(), 2u);
  EXPECT_EQ(h.log.batches[0][0].last_layer, 1);
  EXPECT_EQ(h.log.batches[0][1].last_layer, 4);
  EXPECT_EQ(h.log.kv_after[0], 1 + 1 + 4);

  const auto m = four_layers();
  const auto& t = h.timer;
  const OperatorShape shape = h.replica->cost_model().shape();
  auto attn = [&](std::vector<std::pair<int, int>> chunks) {
    AttentionLoad a;
    for (auto [cached, n] : chunks) a.add_prefill_chunk(cached, n);
    return t.seconds(Op::kAttnPrefill, attention_prefill_work(m, a, 1), a.prefill_tokens, shape);
  };
  auto token_ops = [&](int tokens) {
    double s = 0;
    for (Op op : kLayerOps)
      if (op != Op::kAttnPrefill && op != Op::kAttnDecode)
        s += t.seconds(op, token_op_work(op, m, tokens, 1), tokens, shape);
    return s;
  };
  auto head = [&](int tokens) {
    return t.seconds(Op::kFinalNorm, token_op_work(Op::kFinalNorm, m, tokens, 1), tokens, shape) +
           t.seconds(Op::kLmHead, token_op_work(Op::kLmHead, m, tokens, 1), tokens, shape);
  };
  const double by_hand =
      t.seconds(Op::kEmbedding, token_op_work(Op::kEmbedding, m, 4, 1), 4, shape) +
      1 * (token_ops(4) + attn({{0, 2}, {0, 2}})) + 3 * (token_ops(2) + attn({{0, 2}})) + head(1) +
      head(1);
  const auto cost =
      h.replica->cost_model().cost(std::vector<WorkItem>{h.log.batches[0][0], h.log.batches[0][1]});
  EXPECT_DOUBLE_EQ(cost.compute_s, by_hand);
  EXPECT_EQ(cost.exits_sampled, 2);
  // Both finish in the second iteration (a decode step of each, again exiting at 1 and 4).
  EXPECT_EQ(h.log.done[1], h.log.done[2]);
  EXPECT_EQ(h.replica->kv().used(), 0);
}

// Without multi-level sampling every extra exit head that samples costs a separate pass.
TEST(Mfs, MultiLevelSamplingSavesSamplingPasses) {
  MfsHarness fused(true, Time::ms(1));
  fused.add(1, 2, 2, 0);
  fused.add(2, 2, 2, 1);
  fused.engine.run();
  MfsHarness separate(false, Time::ms(1));
  separate.add(1, 2, 2, 0);
  separate.add(2, 2, 2, 1);
  separate.engine.run();
  // Two iterations, each sampling at two exits: one extra pass of 1 ms per iteration.
  EXPECT_EQ(separate.log.done[2] - fused.log.done[2], Time::ms(2));
}

// A (tier 0, prompt 4, 2 tokens) escalates to tier 1. Worked by hand:
//   1: prefill A(4) through layer 1                 KV: 2 blocks (layer 1) + 2 feature blocks
//   2: decode A at layer 1 -> tier-0 answer done. The prompt's KV of layer 1 is kept (2 blocks),
//      the answer's is dropped, the features are released.
//   3: prefill A's prompt (4 tokens) in layers 2-4 only (first_layer 1), from the stored features
//                                                   KV: 2 * 4 = 8 blocks
//   4: decode A through all 4 layers -> tier-1 answer done.
TEST(Mfs, EscalationReusesLowerTierKv) {
  MfsHarness h;
  auto& a = h.add(1, 4, 2, 0, 1);
  h.engine.run();
  ASSERT_EQ(h.log.batches.size(), 4u);
  EXPECT_EQ(h.log.batches[0][0].last_layer, 1);
  EXPECT_EQ(h.log.kv_after[0], 2 + 2);
  EXPECT_EQ(h.log.batches[2][0].first_layer, 1);
  EXPECT_EQ(h.log.batches[2][0].last_layer, 4);
  EXPECT_EQ(h.log.batches[2][0].tokens, 4);
  EXPECT_EQ(h.log.kv_after[2], 8);
  EXPECT_EQ(h.log.batches[3][0].first_layer, 0);
  EXPECT_TRUE(h.log.batches[3][0].decode);
  EXPECT_EQ(h.log.batches[3][0].cached, 4);
  EXPECT_TRUE(a.escalated);
  EXPECT_EQ(a.tier, 1);
  EXPECT_EQ(h.log.done.size(), 1u);  // only the final answer is reported
  EXPECT_EQ(h.replica->kv().used(), 0);
}

// With a 10-block pool the tier-0 answer fits (3 blocks for 6 tokens in 1 layer + 2 feature
// blocks) but the escalated one would need 3 * 4 = 12: it is handed back to the system (which
// reports it dropped) instead of waiting forever.
TEST(Mfs, EscalationThatCanNeverFitIsHandedBack) {
  MfsHarness h(true, Time::zero(), 10);
  auto& a = h.add(1, 4, 2, 0, 1);
  h.engine.run();
  EXPECT_EQ(h.log.batches.size(), 2u);
  EXPECT_FALSE(a.escalated);
  EXPECT_EQ(h.log.done.count(1), 1u);
  EXPECT_EQ(h.replica->kv().used(), 0);
}

TEST(Mfs, TierDepthRules) {
  const auto c = fixtures::llama2();
  const auto& big = c.get("llama-2-70b", "");
  // Decoder-layer parameters: 7B 32 * 202,383,360; 13B 40 * 317,204,480; 70B 855,654,400 per
  // layer -> 7.57 and 14.83 layers.
  EXPECT_EQ(tier_depth(c.get("llama-2-7b", ""), big, "equal_parameters"), 8);
  EXPECT_EQ(tier_depth(c.get("llama-2-13b", ""), big, "equal_parameters"), 15);
  EXPECT_EQ(tier_depth(big, big, "equal_parameters"), 80);
  EXPECT_EQ(tier_depth(c.get("llama-2-13b", ""), big, "equal_layers"), 40);
}
