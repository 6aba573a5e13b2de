#pragma once
// The operators of one training micro-batch of a decoder-only transformer on one GPU of a
// tensor-parallel group, as platform OperatorWork under the operator names the cost providers
// price (Vidur's profile columns and the roofline calibration: input_layernorm, attn_pre_proj,
// attn_rope, attn_prefill, attn_post_proj, post_attention_layernorm, mlp_up_proj, mlp_act,
// mlp_down_proj, add, emb, final_norm, lm_head).
//
// Two architectures: "gpt" (GPT-3, Brown et al. 2020: LayerNorm, learned positions, a GeLU MLP
// of one up projection) and "llama" (Llama 2, Touvron et al. 2023: RMSNorm, rotary positions,
// grouped-query attention, a SwiGLU MLP whose gate and up projections are fused). Megatron's
// tensor split (Shoeybi et al. 2019): QKV and up projections column-parallel, attention output
// and down projection row-parallel, norms and residual adds replicated.
//
// Backward: every forward operator run twice ([assumed] the standard rule that a backward pass
// costs two forward passes, one GEMM for the input gradient and one for the weight gradient:
// Kaplan et al. 2020, "Scaling laws", section 2.1; Narayanan et al. SC'21, section 5.1, count
// training FLOPs as 3x forward, 4x with recomputation). Two kernels rather than one of doubled
// FLOPs, so that measured tables keyed by operator and token count charge it twice as well.
#include <cstdint>
#include <string>

#include "models/llm_training/megatron_source.hpp"

namespace mlsim::llm_training {

struct TransformerShape {
  std::string name;
  bool llama = false;  // false: gpt
  int layers = 0, hidden = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0, sequence = 0;

  // Parameters of one decoder layer, and those one GPU holds at tensor-parallel degree tp.
  double layer_parameters() const;
  double layer_parameters_per_gpu(int tp) const;
  // Word (and, for gpt, position) embedding parameters on one GPU.
  double embedding_parameters_per_gpu(int tp) const;
};

// One micro-batch of `micro_batch` sequences; fp16 throughout.
StageKernels transformer_kernels(const TransformerShape& m, int micro_batch, int tp);

// FLOPs of one micro-batch's forward pass through the whole model on all GPUs together (for
// reporting model FLOPs utilisation): the sum of the kernels' FLOPs x tp x layers.
double forward_flops(const TransformerShape& m, int micro_batch);

}  // namespace mlsim::llm_training
