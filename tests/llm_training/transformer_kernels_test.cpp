// The training model's attention kernel gives its sequence length, so that a roofline with a
// FLOP efficiency by sequence length (cost_model.hpp) prices it by that length: by hand.
#include <gtest/gtest.h>

#include <stdexcept>
#include <variant>

#include "models/llm_training/transformer_kernels.hpp"
#include "sim_core/hardware/cost_model.hpp"

namespace mlsim::llm_training {
namespace {
TransformerShape llama_of_sequence(int sequence) {
  TransformerShape m;
  m.name = "llama-7b-like";
  m.llama = true;
  m.layers = 2;
  m.hidden = 4096;
  m.heads = 32;
  m.kv_heads = 32;
  m.ffn = 11008;
  m.vocab = 32000;
  m.sequence = sequence;
  return m;
}

const OperatorWork& attention_kernel_of(const StageKernels& k) {
  for (const Work& w : k.attention_forward)
    if (const auto* op = std::get_if<OperatorWork>(&w); op && op->op == "attn_prefill") return *op;
  throw std::logic_error("no attn_prefill kernel");
}

// A GPU of 100 TFLOP/s fp16 and 1 PB/s HBM (so that the bytes never bind), attn_prefill's regime
// 0.6 of peak and no overhead, its curve 0.2 at 512 and 0.4 at 2048 (linear in log length). One
// sequence (micro-batch 1, TP 1) of s tokens: FLOPs 4 x s^2 x 4096 (all s^2 pairs, Megatron's
// unfused attention):
//   s =  512: 4,294,967,296 FLOPs at 0.2 -> 20 TFLOP/s -> 214.748 us  (regime 0.6: 71.583 us);
//   s = 1024: 17,179,869,184 at 0.3 (half-way in log) -> 572.662 us (regime: 286.331 us);
//   s = 2048: 68,719,476,736 at 0.4 -> 1,717.987 us                   (regime: 1,145.325 us).
// Before, the kernel gave no length, so every s took the regime's 0.6 (the right-hand column).
TEST(TransformerKernels, AttentionIsPricedAtTheSequenceLength) {
  GpuSpec gpu;
  gpu.name = "A";
  gpu.peak[Dtype::kFp16] = FlopRate{100e12};
  gpu.hbm_bandwidth = Bandwidth{1e15};
  RooflineProvider roofline;
  roofline.add("A", "attn_prefill", {RooflineRegime{0, true, 0.6, 1, 0, 1}});
  roofline.add_seq_len_efficiency("A", "attn_prefill", SeqLenEfficiency{{512, 2048}, {0.2, 0.4}});
  auto seconds_at = [&](int s) {
    const StageKernels kernels = transformer_kernels(llama_of_sequence(s), 1, 1);
    const OperatorWork& w = attention_kernel_of(kernels);  // a reference into `kernels`
    EXPECT_EQ(w.seq_len, s);
    EXPECT_DOUBLE_EQ(w.flops, 4.0 * s * s * 4096);
    return *roofline.operator_seconds(w, gpu);
  };
  EXPECT_NEAR(seconds_at(512), 214.7483648e-6, 1e-12);
  EXPECT_NEAR(seconds_at(1024), 572.6623061e-6, 1e-12);
  EXPECT_NEAR(seconds_at(2048), 1717.9869184e-6, 1e-12);
  // Every other kernel gives no length (a GEMM's speed does not depend on it).
  const StageKernels k = transformer_kernels(llama_of_sequence(2048), 1, 1);
  for (const auto* group : {&k.attention_forward, &k.mlp_forward, &k.head_forward})
    for (const Work& w : *group)
      if (const auto* op = std::get_if<OperatorWork>(&w); op && op->op != "attn_prefill") {
        EXPECT_EQ(op->seq_len, 0) << op->op;
      }
}

}  // namespace
}  // namespace mlsim::llm_training
