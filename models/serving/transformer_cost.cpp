#include "models/serving/transformer_cost.hpp"

#include <cmath>

#include "sim_core/base/error.hpp"

namespace mlsim::serving {

namespace {
constexpr std::array<std::string_view, kOpCount> kNames = {
    "emb",          "input_layernorm", "attn_pre_proj",  "attn_rope",
    "attn_prefill", "attn_decode",     "attn_post_proj", "post_attention_layernorm",
    "mlp_up_proj",  "mlp_act",         "mlp_down_proj",  "add",
    "final_norm",   "lm_head"};

// A GEMM of [T, k] x [k, n]: 2Tkn FLOPs; reads both operands and writes the result once.
OpWork gemm(double T, double k, double n, double b) {
  return {2 * T * k * n, b * (T * k + k * n + T * n)};
}
}  // namespace

std::string_view op_name(Op op) {
  return kNames.at(static_cast<std::size_t>(op));
}

bool op_from_name(std::string_view name, Op& out) {
  for (std::size_t i = 0; i < kOpCount; ++i)
    if (kNames[i] == name) {
      out = static_cast<Op>(i);
      return true;
    }
  return false;
}

OpWork token_op_work(Op op, const TransformerShape& m, std::int64_t tokens, int tp) {
  const double T = static_cast<double>(tokens), h = m.hidden, kv = m.kv_dim(), f = m.ffn, t = tp,
               b = m.dtype_bytes();
  switch (op) {
    case Op::kEmbedding:  // gather T rows, write them
      return {0, b * 2 * T * h};
    case Op::kInputNorm:
    case Op::kPostNorm:
    case Op::kFinalNorm:  // RMSNorm: square, mean, rsqrt-scale, weight: ~4 FLOPs per element
      return {4 * T * h, b * (2 * T * h + h)};
    case Op::kQkvProj:
      return gemm(T, h, (h + 2 * kv) / t, b);
    case Op::kRope:  // rotate Q and K in place: ~6 FLOPs per element, read and write
      return {6 * T * (h + kv) / t, b * 2 * T * (h + kv) / t};
    case Op::kOutProj:
      return gemm(T, h / t, h, b);
    case Op::kMlpUpGate:
      return gemm(T, h, 2 * f / t, b);
    case Op::kMlpAct:  // SiLU(gate) * up: read two, write one
      return {5 * T * f / t, b * 3 * T * f / t};
    case Op::kMlpDown:
      return gemm(T, f / t, h, b);
    case Op::kResidualAdd:
      return {T * h, b * 3 * T * h};
    case Op::kLmHead:
      return gemm(T, h, m.vocab / t, b);
    case Op::kAttnPrefill:
    case Op::kAttnDecode:
      break;
  }
  MLSIM_CHECK(false, "token_op_work called for an attention operator");
}

void AttentionLoad::add_prefill_chunk(std::int64_t cached, std::int64_t chunk) {
  const std::int64_t pairs = chunk * cached + chunk * (chunk + 1) / 2;
  prefill_tokens += chunk;
  prefill_pairs += pairs;
  prefill_kv_read += cached + chunk;
  prefill_log_len_pairs +=
      static_cast<double>(pairs) * std::log(static_cast<double>(cached + chunk));
}

std::int64_t AttentionLoad::prefill_seq_len() const {
  if (prefill_pairs <= 0) return 0;
  return std::llround(std::exp(prefill_log_len_pairs / static_cast<double>(prefill_pairs)));
}

void AttentionLoad::add_decode(std::int64_t kv_length) {
  decode_tokens += 1;
  decode_kv_read += kv_length;
  decode_log_len_kv += static_cast<double>(kv_length) * std::log(static_cast<double>(kv_length));
}

std::int64_t AttentionLoad::decode_seq_len() const {
  if (decode_kv_read <= 0) return 0;
  return std::llround(std::exp(decode_log_len_kv / static_cast<double>(decode_kv_read)));
}

AttentionLoad& AttentionLoad::operator+=(const AttentionLoad& o) {
  prefill_tokens += o.prefill_tokens;
  prefill_pairs += o.prefill_pairs;
  prefill_kv_read += o.prefill_kv_read;
  decode_tokens += o.decode_tokens;
  decode_kv_read += o.decode_kv_read;
  prefill_log_len_pairs += o.prefill_log_len_pairs;
  decode_log_len_kv += o.decode_log_len_kv;
  return *this;
}

namespace {
// QK^T and PV: 2 * head_dim FLOPs each per (query, key) pair and head. Bytes: K and V of every
// key read once per KV head, Q read and the output written, and the new tokens' K and V written
// into the cache.
OpWork attention_work(const TransformerShape& m, std::int64_t queries, std::int64_t pairs,
                      std::int64_t kv_read, int tp) {
  const double t = tp, b = m.dtype_bytes(), h = m.hidden, kv = m.kv_dim();
  const double flops = 4.0 * static_cast<double>(pairs) * h / t;
  const double bytes = b * (2.0 * static_cast<double>(kv_read) * kv / t +
                            2.0 * static_cast<double>(queries) * h / t +
                            2.0 * static_cast<double>(queries) * kv / t);
  return {flops, bytes};
}
}  // namespace

OpWork attention_prefill_work(const TransformerShape& m, const AttentionLoad& a, int tp) {
  if (a.prefill_tokens == 0) return {};
  return attention_work(m, a.prefill_tokens, a.prefill_pairs, a.prefill_kv_read, tp);
}

OpWork attention_decode_work(const TransformerShape& m, const AttentionLoad& a, int tp) {
  if (a.decode_tokens == 0) return {};
  return attention_work(m, a.decode_tokens, a.decode_kv_read, a.decode_kv_read, tp);
}

OpWork layer_work(const TransformerShape& m, std::int64_t tokens, const AttentionLoad& a, int tp) {
  OpWork w;
  for (Op op : kLayerOps) {
    if (op == Op::kAttnPrefill)
      w += attention_prefill_work(m, a, tp);
    else if (op == Op::kAttnDecode)
      w += attention_decode_work(m, a, tp);
    else
      w += token_op_work(op, m, tokens, tp);
  }
  return w;
}

}  // namespace mlsim::serving
