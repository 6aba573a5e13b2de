// The serving model prices its operators through the platform's cost providers: by hand.
#include <gtest/gtest.h>

#include "models/serving/compute_model.hpp"
#include "sim_core/base/error.hpp"
#include "test_support.hpp"

using namespace mlsim;
using namespace mlsim::serving;

TEST(OperatorTimer, RooflineByHand) {
  const GpuSpec g = fixtures::toy_gpu();  // 100 TFLOP/s fp16, 1 TB/s
  CostModel costs;
  auto roofline = fixtures::ideal_roofline("toy");
  roofline->add("toy", "mlp_down_proj", {RooflineRegime{0, true, 0.5, 0.8, 2e-6, 1}});
  costs.add(std::move(roofline));
  const OperatorTimer t(costs, g, Dtype::kFp16);
  const OperatorShape shape{512, 8, 8, 1024, 1};
  // Compute bound: 1e12 FLOPs at 50 TFLOP/s = 20 ms (bytes 1e9 at 0.8 TB/s = 1.25 ms), + 2 us.
  EXPECT_DOUBLE_EQ(t.seconds(Op::kMlpDown, {1e12, 1e9}, 4096, shape), 0.02 + 2e-6);
  // Memory bound: 8e9 bytes at 0.8 TB/s = 10 ms.
  EXPECT_DOUBLE_EQ(t.seconds(Op::kMlpDown, {1e9, 8e9}, 4096, shape), 0.01 + 2e-6);
  EXPECT_DOUBLE_EQ(t.seconds(Op::kResidualAdd, {0, 1e12}, 4096, shape), 1.0);  // 1 TB at 1 TB/s
}

TEST(OperatorTimer, ProfiledShapeComesFromTheTableOthersFromTheRoofline) {
  const GpuSpec g = fixtures::toy_gpu();
  CostModel costs;
  auto profiles = std::make_unique<ProfileTableProvider>();
  const OperatorShape measured{512, 8, 8, 1024, 1};
  profiles->add_point("toy", "mlp_act", measured, 16, 4e-6);
  profiles->add_point("toy", "mlp_act", measured, 32, 6e-6);
  costs.add(std::move(profiles));
  costs.add(fixtures::ideal_roofline("toy"));
  const OperatorTimer t(costs, g, Dtype::kFp16);
  // 24 tokens of the measured shape: halfway between 4 and 6 us.
  EXPECT_NEAR(t.seconds(Op::kMlpAct, {1e6, 1e6}, 24, measured), 5e-6, 1e-18);
  // TP 2 is not measured: the ideal roofline, 1e6 bytes at 1 TB/s = 1 us.
  EXPECT_NEAR(t.seconds(Op::kMlpAct, {1e6, 1e6}, 24, OperatorShape{512, 8, 8, 1024, 2}), 1e-6,
              1e-18);
  // Every serving operator is priced on the toy GPU; on another GPU it is an InputError.
  OperatorTimer::check(costs, g, "compute");
  GpuSpec other = g;
  other.name = "other";
  EXPECT_THROW(OperatorTimer::check(costs, other, "compute"), InputError);
}

// Prefill attention priced by a FLOP efficiency by sequence length (the shape of FlashAttention's
// published speed by length): a toy curve of 20% of peak at 512 and 40% at 2048, linear in
// log(length) between, clamped outside; bandwidth 0.8, 10 us per launch, toy GPU (100 TFLOP/s,
// 1 TB/s). One prefill of L tokens on the toy transformer (hidden 512, 8 KV heads of 64, fp16,
// TP 1), no cache, per layer:
//   L = 1024: pairs 1024 x 1025 / 2 = 524,800; FLOPs 4 x 524,800 x 512 = 1,074,790,400;
//             efficiency halfway in log2 between 512 and 2048 = 0.3 -> 30 TFLOP/s -> 35.8263 us
//             (bytes 2 x (2 x 1024 x 512 x 3) = 6,291,456 at 0.8 TB/s = 7.86 us: compute bound);
//             + 10 us = 45.8263 us.
//   L = 4096: pairs 8,390,656; FLOPs 17,184,063,488; past 2048, clamped at 0.4 -> 40 TFLOP/s ->
//             429.6016 us; + 10 us = 439.6016 us.
// With one efficiency for every length (the regime's 0.6) they would be 27.91 and 296.40 us.
TEST(AttentionBySequenceLength, PrefillIterationAtTwoLengthsByHand) {
  const GpuSpec g = fixtures::toy_gpu();
  auto roofline = fixtures::ideal_roofline("toy");
  roofline->add("toy", "attn_prefill", {RooflineRegime{0, true, 0.6, 0.8, 10e-6, 1}});
  roofline->add_seq_len_efficiency("toy", "attn_prefill",
                                   SeqLenEfficiency{{512, 2048}, {0.2, 0.4}});
  CostModel costs;
  costs.add(std::move(roofline));
  const OperatorTimer timer(costs, g, Dtype::kFp16);
  const auto m = fixtures::toy_transformer(2, "toy2");
  const IterationCostModel model(m, 1, timer, {2});
  auto attention_of_iteration = [&](std::int32_t prompt) {
    // The iteration's compute less everything but the two layers' prefill attention.
    const std::vector<WorkItem> items{{prompt, 0, false, true, 0, 2}};
    const auto& s = model.shape();
    const double rest =
        timer.seconds(Op::kEmbedding, token_op_work(Op::kEmbedding, m, prompt, 1), prompt, s) +
        2 * model.token_ops_seconds(prompt) +
        timer.seconds(Op::kFinalNorm, token_op_work(Op::kFinalNorm, m, 1, 1), 1, s) +
        timer.seconds(Op::kLmHead, token_op_work(Op::kLmHead, m, 1, 1), 1, s);
    return (model.cost(items).compute_s - rest) / 2;  // per layer
  };
  EXPECT_NEAR(attention_of_iteration(1024), 45.8263467e-6, 1e-12);
  EXPECT_NEAR(attention_of_iteration(4096), 439.6015872e-6, 1e-12);
  // A chunk of 1024 after 1024 cached tokens is priced at its key length, 2048 (0.4): pairs
  // 1024 x 1024 + 524,800 = 1,573,376, FLOPs 3,222,274,048 at 40 TFLOP/s = 80.5569 us + 10 us.
  AttentionLoad chunk;
  chunk.add_prefill_chunk(1024, 1024);
  EXPECT_EQ(chunk.prefill_seq_len(), 2048);
  EXPECT_NEAR(timer.seconds(Op::kAttnPrefill, attention_prefill_work(m, chunk, 1), 1024,
                            model.shape(), chunk.prefill_seq_len()),
              90.5568512e-6, 1e-12);
}
