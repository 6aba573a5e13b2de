#pragma once
// FLOPs and HBM bytes of each operator of a Llama-style decoder, per GPU under tensor
// parallelism of degree `tp` (Megatron split: QKV and gate/up column-parallel, O and down
// row-parallel; norms, embedding and residual adds replicated, as Vidur profiles them).
//
// Token-parallel operators depend only on the number of tokens in the batch. Attention depends
// on how those tokens attend: a decode token reads its whole KV history; a prefill chunk of c
// tokens after p cached ones computes c*p + c(c+1)/2 causal (query, key) pairs.
#include <array>
#include <cstdint>
#include <string_view>

#include "models/serving/model_catalog.hpp"

namespace mlsim::serving {

// Names follow Vidur's profile columns where Vidur profiles the operator.
enum class Op : std::uint8_t {
  kEmbedding,    // "emb"
  kInputNorm,    // "input_layernorm"
  kQkvProj,      // "attn_pre_proj"
  kRope,         // "attn_rope"
  kAttnPrefill,  // "attn_prefill" (not profiled in the shared data)
  kAttnDecode,   // "attn_decode" (not profiled in the shared data)
  kOutProj,      // "attn_post_proj"
  kPostNorm,     // "post_attention_layernorm"
  kMlpUpGate,    // "mlp_up_proj" (gate and up fused)
  kMlpAct,       // "mlp_act" (SiLU(gate) * up)
  kMlpDown,      // "mlp_down_proj"
  kResidualAdd,  // "add"
  kFinalNorm,    // "final_norm"
  kLmHead,       // "lm_head"
};
inline constexpr std::size_t kOpCount = 14;
std::string_view op_name(Op op);
// Inverse of op_name; returns false for an unknown name.
bool op_from_name(std::string_view name, Op& out);

struct OpWork {
  double flops = 0;
  double bytes = 0;
  OpWork& operator+=(const OpWork& o) {
    flops += o.flops;
    bytes += o.bytes;
    return *this;
  }
};

// Work of one token-parallel operator (anything but attention) over `tokens` tokens. For
// kEmbedding, kFinalNorm and kLmHead, `tokens` is the number of tokens they process (the LM head
// runs only on tokens that are sampled).
OpWork token_op_work(Op op, const TransformerShape& m, std::int64_t tokens, int tp);

// How a batch's tokens attend in one layer.
struct AttentionLoad {
  std::int64_t prefill_tokens = 0;   // query tokens of prefill chunks
  std::int64_t prefill_pairs = 0;    // causal (query, key) pairs of those chunks
  std::int64_t prefill_kv_read = 0;  // keys/values read by the chunks (cached + new)
  std::int64_t decode_tokens = 0;    // one per decoding request
  std::int64_t decode_kv_read = 0;   // sum of the decoding requests' KV lengths (incl. the new one)
  // Sum over prefill chunks of pairs x ln(key length), key length = cached + chunk: the chunks'
  // FLOP-weighted log sequence length (prefill_seq_len).
  double prefill_log_len_pairs = 0;
  // Sum over decoding requests of KV length x ln(KV length): their KV-byte-weighted log length
  // (decode_seq_len).
  double decode_log_len_kv = 0;

  void add_prefill_chunk(std::int64_t cached, std::int64_t chunk);
  // The sequence length the prefill attention kernel is priced at (its FLOP efficiency depends
  // on it, cost_model.hpp): the chunks' FLOP-weighted geometric mean key length, rounded; 0
  // without prefill. Exact for chunks of one length (the FlashAttention benchmarks' setting);
  // for mixed lengths within one linear piece of the log-length curve it gives the FLOP-weighted
  // mean efficiency, which overestimates the exact (harmonic) one by under (e1 - e2)^2 /
  // (4 e1 e2) of it [approximation: one kernel launch per iteration].
  std::int64_t prefill_seq_len() const;
  void add_decode(std::int64_t kv_length);  // kv_length includes the token being decoded
  // The KV length the decode attention kernel is priced at (its bandwidth efficiency depends on
  // it, cost_model.hpp): the decoding requests' geometric mean KV length weighted by the KV
  // bytes each reads (proportional to its length), rounded; 0 without decodes. Exact for one
  // length (the Flash-Decoding benchmark's setting); for mixed lengths within one linear piece
  // of the curve it gives the byte-weighted mean efficiency, which overstates the exact
  // (harmonic) one by under (e1 - e2)^2 / (4 e1 e2) of it [approximation: one kernel launch].
  std::int64_t decode_seq_len() const;
  AttentionLoad& operator+=(const AttentionLoad& o);
};

OpWork attention_prefill_work(const TransformerShape& m, const AttentionLoad& a, int tp);
OpWork attention_decode_work(const TransformerShape& m, const AttentionLoad& a, int tp);

// The operators of one decoder layer, in execution order (attention appears twice: prefill and
// decode kernels run separately, as in vLLM).
inline constexpr std::array<Op, 12> kLayerOps = {
    Op::kInputNorm,  Op::kQkvProj, Op::kRope,        Op::kAttnPrefill,
    Op::kAttnDecode, Op::kOutProj, Op::kPostNorm,    Op::kMlpUpGate,
    Op::kMlpAct,     Op::kMlpDown, Op::kResidualAdd, Op::kResidualAdd};

// Sum of FLOPs and bytes of one layer for a batch of `tokens` tokens attending as `a`.
OpWork layer_work(const TransformerShape& m, std::int64_t tokens, const AttentionLoad& a, int tp);

// Bytes one tensor-parallel all-reduce carries per layer-pass (after O and after down
// projection): the activations of every token in the batch.
inline std::int64_t allreduce_bytes(const TransformerShape& m, std::int64_t tokens) {
  return tokens * m.hidden * m.dtype_bytes();
}
inline constexpr int kAllReducesPerLayer = 2;

}  // namespace mlsim::serving
