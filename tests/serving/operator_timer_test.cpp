// The serving model prices its operators through the platform's cost providers: by hand.
#include <gtest/gtest.h>

#include "models/serving/compute_model.hpp"
#include "models/serving/transformer_cost.hpp"
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

// Decode attention by KV length, on shipped data: Llama-2-70B at TP 8 on the catalog's
// A100-SXM4-80GB (2,039 GB/s, 312 TFLOP/s fp16), priced by the shipped roofline
// (workloads/hardware/roofline_calibration.json: attn_decode's bandwidth efficiency by KV length
// for query group 8, from the FlashInfer blog's Figure 9, A100 panel, Tensor-Core GQA decode,
// 0.6973 at 1024, 0.7567 at 2048, 0.7931 at 4096; Llama-2-70B's 64 query heads over 8 KV heads
// are group 8, so that curve alone; FLOP efficiency 0.6, 10 us per launch). One decode step of
// two requests whose KV lengths (cached + the new token) are 1024 and 3072; per GPU and layer,
// one KV head of 128 and 8 query heads of 128 (hidden / tp = 1024), fp16:
//   bytes = 2 x (2 x (1024 + 3072) x 128   K and V of every key
//              + 2 x 2 x 1024               Q read, output written
//              + 2 x 2 x 128)               the new K and V written
//         = 2 x (1,048,576 + 4,096 + 512) = 2,106,368 B;
//   FLOPs = 4 x 4096 x 8192 / 8 = 16,777,216 (0.09 us at 0.6 x 312 TFLOP/s: memory bound);
//   KV length priced at = exp((1024 ln 1024 + 3072 ln 3072) / 4096) = 2334.2 -> 2334 (byte-
//     weighted geometric mean); efficiency 0.7567 + log2(2334 / 2048) x (0.7931 - 0.7567)
//     = 0.7567 + 0.188589 x 0.0364 = 0.763565;
//   time = 2,106,368 / (0.763565 x 2.039e12) + 10 us = 1.35292 us + 10 us = 11.35292 us.
// Same bytes as two requests of 2048 (0.7567: 1.36519 + 10 = 11.36519 us); two of 1024 read half
// the KV at 0.6973: 1,057,792 / (0.6973 x 2.039e12) = 0.74398 + 10 = 10.74398 us. Before (the
// Flash-Decoding table, 0.685409 at 2334) the first took 11.50719 us.
TEST(AttentionByKvLength, DecodeStepOfTwoRequestsOnA100ByHand) {
  const GpuSpec gpu = fixtures::gpus().gpu("A100-SXM4-80GB", "");
  CostModel costs;
  costs.add(RooflineProvider::load(fixtures::source_dir() /
                                   "workloads/hardware/roofline_calibration.json"));
  const OperatorTimer timer(costs, gpu, Dtype::kFp16);
  const auto catalog = fixtures::llama2();  // get() returns a reference into it
  const TransformerShape& m = catalog.get("llama-2-70b", "");
  TpAllReduce link;  // the all-reduces are not part of compute_s
  link.bandwidth = Bandwidth{300e9};
  const IterationCostModel model(m, 8, timer, {m.layers}, link);
  auto attention = [&](std::int64_t a, std::int64_t b) {
    AttentionLoad load;
    load.add_decode(a);
    load.add_decode(b);
    return std::pair{load, attention_decode_work(m, load, 8)};
  };
  const auto [mixed, w] = attention(1024, 3072);
  EXPECT_EQ(mixed.decode_seq_len(), 2334);
  EXPECT_DOUBLE_EQ(w.bytes, 2106368);
  EXPECT_DOUBLE_EQ(w.flops, 16777216);
  EXPECT_NEAR(timer.seconds(Op::kAttnDecode, w, 2, model.shape(), mixed.decode_seq_len()),
              11.3529172e-6, 1e-12);
  const auto [even, we] = attention(2048, 2048);
  EXPECT_NEAR(timer.seconds(Op::kAttnDecode, we, 2, model.shape(), even.decode_seq_len()),
              11.3651906e-6, 1e-12);
  const auto [short_, ws] = attention(1024, 1024);
  EXPECT_NEAR(timer.seconds(Op::kAttnDecode, ws, 2, model.shape(), short_.decode_seq_len()),
              10.7439836e-6, 1e-12);
  // The iteration: the same two requests' token operators, so the 80 layers' compute differs
  // by exactly 80 x the attention's difference (1k + 3k against 2k + 2k: -0.9819 us).
  auto iteration = [&](std::int32_t cached_a, std::int32_t cached_b) {
    const std::vector<WorkItem> items{{1, cached_a, true, true, 0, m.layers},
                                      {1, cached_b, true, true, 0, m.layers}};
    return model.cost(items).compute_s;
  };
  EXPECT_NEAR(iteration(1023, 3071) - iteration(2047, 2047), 80 * (11.3529172e-6 - 11.3651906e-6),
              1e-11);
}

// Decode attention of a model without grouped-query attention, on shipped data: Llama-2-7B
// (32 query heads = 32 KV heads of 128, hidden 4096: query group 1) at TP 1 on the catalog's
// H100-SXM5-80GB (3.35 TB/s), priced by the shipped group-1 curve (the FlashInfer blog's
// Figure 6, H100 panel, batch 64: 0.8801 at 512 keys; 10 us per launch). Two requests of 512
// keys each:
//   bytes = 2 x (2 x 1024 x 4096 + 2 x 2 x 4096 + 2 x 2 x 4096) = 2 x 8,421,376 = 16,842,752 B;
//   time = 16,842,752 / (0.8801 x 3.35e12) + 10 us = 5.71263 + 10 = 15.71263 us
//   (the former [assumed] 70%: 7.18241 + 10 = 17.18241 us).
// The same step priced as if the model were grouped (the group-8 curve, 0.6168 at 512) would
// take 8.15163 + 10 us: the group selects the curve.
TEST(AttentionByKvLength, DecodeStepWithoutGqaOnH100ByHand) {
  const GpuSpec gpu = fixtures::gpus().gpu("H100-SXM5-80GB", "");
  CostModel costs;
  costs.add(RooflineProvider::load(fixtures::source_dir() /
                                   "workloads/hardware/roofline_calibration.json"));
  const OperatorTimer timer(costs, gpu, Dtype::kFp16);
  const auto catalog = fixtures::llama2();
  const TransformerShape& m = catalog.get("llama-2-7b", "");
  ASSERT_EQ(m.heads, m.kv_heads);
  const IterationCostModel model(m, 1, timer, {m.layers});
  AttentionLoad load;
  load.add_decode(512);
  load.add_decode(512);
  const OpWork w = attention_decode_work(m, load, 1);
  EXPECT_DOUBLE_EQ(w.bytes, 16842752);
  EXPECT_EQ(load.decode_seq_len(), 512);
  EXPECT_NEAR(timer.seconds(Op::kAttnDecode, w, 2, model.shape(), 512), 15.7126317e-6, 1e-12);
  OperatorShape grouped = model.shape();
  grouped.kv_heads = grouped.heads / 8;
  EXPECT_NEAR(timer.seconds(Op::kAttnDecode, w, 2, grouped, 512),
              16842752 / (0.6168 * 3.35e12) + 10e-6, 1e-12);
}

// Prefill attention on A100 by sequence length, on shipped data: Llama-2-70B at TP 8 on the
// catalog's A100-SXM4-80GB (312 TFLOP/s fp16, 2,039 GB/s), priced by the shipped curve (the
// FlashInfer blog's Figure 4, A100 panel, FlashAttention 2.4.2 causal: 173.5 TFLOP/s at 4096 ->
// 0.5561 of peak, 142.7 at 2048 -> 0.4574; bandwidth 0.8, 10 us per launch). One prompt of L
// tokens, nothing cached, per GPU and layer (hidden / tp = 1024, KV width / tp = 128):
//   L = 4096: pairs 4096 x 4097 / 2 = 8,390,656; FLOPs 4 x 8,390,656 x 1024 = 34,368,126,976;
//             at 0.5561 x 312 TFLOP/s = 173.5032 TFLOP/s: 198.08353 us (bytes 2 x (2 x 4096 x
//             128 + 2 x 4096 x 1024 + 2 x 4096 x 128) = 20,971,520 at 0.8 x 2.039 TB/s = 12.9 us:
//             compute bound); + 10 us = 208.08353 us (the former [assumed] 0.6: 193.59042 us);
//   L = 3000: pairs 4,501,500; FLOPs 18,438,144,000; efficiency 0.4574 + log2(3000 / 2048) x
//             (0.5561 - 0.4574) = 0.4574 + 0.550908 x 0.0987 = 0.511759 -> 115.47750 us + 10 us
//             = 125.47750 us.
TEST(AttentionBySequenceLength, PrefillOnA100FromThePublishedCurveByHand) {
  const GpuSpec gpu = fixtures::gpus().gpu("A100-SXM4-80GB", "");
  CostModel costs;
  costs.add(RooflineProvider::load(fixtures::source_dir() /
                                   "workloads/hardware/roofline_calibration.json"));
  const OperatorTimer timer(costs, gpu, Dtype::kFp16);
  const auto catalog = fixtures::llama2();
  const TransformerShape& m = catalog.get("llama-2-70b", "");
  TpAllReduce link;  // only the operator shape is used here
  link.bandwidth = Bandwidth{300e9};
  const IterationCostModel model(m, 8, timer, {m.layers}, link);
  auto prefill = [&](std::int64_t prompt) {
    AttentionLoad load;
    load.add_prefill_chunk(0, prompt);
    EXPECT_EQ(load.prefill_seq_len(), prompt);
    const OpWork w = attention_prefill_work(m, load, 8);
    return std::pair{w, timer.seconds(Op::kAttnPrefill, w, prompt, model.shape(), prompt)};
  };
  const auto [w4096, t4096] = prefill(4096);
  EXPECT_DOUBLE_EQ(w4096.flops, 34368126976.0);
  EXPECT_DOUBLE_EQ(w4096.bytes, 20971520);
  EXPECT_NEAR(t4096, 208.0835338e-6, 1e-12);
  const auto [w3000, t3000] = prefill(3000);
  EXPECT_DOUBLE_EQ(w3000.flops, 18438144000.0);
  EXPECT_NEAR(t3000, 125.4774985e-6, 1e-12);
}
