#include "models/serving/compute_model.hpp"

#include <algorithm>
#include <cmath>

#include "sim_core/base/error.hpp"
#include "sim_core/collectives/collective.hpp"

namespace mlsim::serving {

OperatorTimer::OperatorTimer(const CostModel& costs, const GpuSpec& gpu, Dtype dtype)
    : costs_(costs), gpu_(gpu), dtype_(dtype) {
  for (std::size_t i = 0; i < kOpCount; ++i)
    bound_[i] = costs_.bind(op_name(static_cast<Op>(i)), gpu_);
}

double OperatorTimer::seconds(Op op, const OpWork& w, std::int64_t tokens,
                              const OperatorShape& shape, std::int64_t seq_len) const {
  if (w.flops <= 0 && w.bytes <= 0) return 0;
  return costs_.operator_seconds(
      bound_[static_cast<std::size_t>(op)],
      OperatorWork{op_name(op), w.flops, w.bytes, dtype_, tokens, shape, seq_len});
}

void OperatorTimer::check(const CostModel& costs, const GpuSpec& gpu, const std::string& where) {
  for (std::size_t i = 0; i < kOpCount; ++i)
    costs.check_operator(op_name(static_cast<Op>(i)), gpu, where);
}

IterationCostModel::IterationCostModel(const TransformerShape& model, int tp,
                                       const OperatorTimer& timer, std::vector<std::int32_t> exits,
                                       TpAllReduce allreduce, ExpertParallel expert)
    : model_(model),
      tp_(tp),
      shape_{model.hidden, model.heads, model.kv_heads, model.ffn, tp},
      timer_(timer),
      exits_(std::move(exits)),
      allreduce_(std::move(allreduce)),
      expert_(expert) {
  if (model_.moe()) {
    MLSIM_CHECK(expert_.ep == 1 || expert_.ep == tp_, "expert parallelism is 1 or the tp degree");
    MLSIM_CHECK(model_.experts % expert_.ep == 0, "ep must divide the experts");
    MLSIM_CHECK(expert_.imbalance >= 1, "the expert load imbalance is at least 1");
    // An expert is a gated MLP of width expert_ffn, split over the tp / ep GPUs of its group
    // (whole at ep = tp); profile tables of a dense model of that MLP shape price it (Mixtral's
    // experts have Llama-3-8B's). The router is a GEMM of width `experts`.
    expert_model_ = model_;
    expert_model_.ffn = model_.expert_ffn;
    expert_shape_ = {model.hidden, model.heads, model.kv_heads, model.expert_ffn, tp_ / expert_.ep};
    router_shape_ = {model.hidden, model.heads, model.kv_heads, model.experts, 1};
    if (expert_.capacity_factor) {
      MLSIM_CHECK(*expert_.capacity_factor > 0 && expert_.imbalance == 1,
                  "a capacity factor > 0, and no fixed imbalance with it");
      expert_order_.resize(static_cast<std::size_t>(model_.experts));
      for (std::size_t e = 0; e < expert_order_.size(); ++e)
        expert_order_[e] = static_cast<std::int32_t>(e);
      expert_counts_.assign(expert_order_.size(), 0);
    }
  }
  MLSIM_CHECK(tp_ >= 1, "tensor-parallel degree must be >= 1");
  MLSIM_CHECK(tp_ == 1 || allreduce_.bandwidth.bytes_per_s > 0,
              "tensor parallelism needs the GPUs' link bandwidth");
  MLSIM_CHECK(!exits_.empty() && std::is_sorted(exits_.begin(), exits_.end()) &&
                  exits_.front() > 0 && exits_.back() == model_.layers,
              "exits must be ascending layer counts ending at the model depth");
  bounds_.push_back(0);
  bounds_.insert(bounds_.end(), exits_.begin(), exits_.end());
  segments_.resize(exits_.size());
  sampled_.resize(exits_.size());
}

double IterationCostModel::token_ops_seconds(std::int64_t tokens) const {
  if (tokens <= 0) return 0;
  const auto i = static_cast<std::size_t>(tokens);
  if (i >= token_ops_cache_.size())
    token_ops_cache_.resize(std::max(i + 1, 2 * token_ops_cache_.size()), -1);
  double& slot = token_ops_cache_[i];
  if (slot < 0) {
    double s = 0;
    for (Op op : kLayerOps) {
      if (op == Op::kAttnPrefill || op == Op::kAttnDecode) continue;
      if (model_.moe() && (op == Op::kMlpUpGate || op == Op::kMlpAct || op == Op::kMlpDown))
        continue;  // the experts, below
      s += timer_.seconds(op, token_op_work(op, model_, tokens, tp_), tokens, shape_);
    }
    if (model_.moe()) {
      // The router: [T, hidden] x [hidden, experts] on every GPU (replicated), priced as a GEMM
      // of its own shape; the softmax and top-k over `experts` values per token are left out.
      const double T = static_cast<double>(tokens), h = model_.hidden, e = model_.experts,
                   b = model_.dtype_bytes();
      const OpWork router{2 * T * h * e, b * (T * h + h * e + T * e)};
      s += timer_.seconds(Op::kMlpUpGate, router, tokens, router_shape_);
      s += expert_seconds(tokens);
    }
    slot = s;
  }
  return slot;
}

double IterationCostModel::expert_seconds(std::int64_t tokens) const {
  if (!model_.moe() || tokens <= 0) return 0;
  const double T = static_cast<double>(tokens), E = model_.experts, k = model_.experts_per_token,
               ep = expert_.ep;
  const double local = E / ep;  // experts held by one GPU (or its share of every expert, ep 1)
  auto at = [&](std::int64_t n) {
    double s = 0;
    for (Op op : {Op::kMlpUpGate, Op::kMlpAct, Op::kMlpDown})
      s += timer_.seconds(op, token_op_work(op, expert_model_, n, expert_shape_.tp), n,
                          expert_shape_);
    return s;
  };
  // With a capacity: every expert of the GPU on its padded slots, C from each of the ep groups.
  if (expert_.capacity_factor) return local * at(expert_.ep * expert_capacity(tokens));
  // Experts of this GPU receiving at least one token, in expectation, and the busiest GPU's
  // (token, expert) pairs.
  const double touched = local * (1 - std::pow(1 - k / E, T));
  const double pairs = std::min(expert_.imbalance * T * k / ep, T * std::min(k, local));
  // Each touched expert runs its gated MLP on pairs / touched tokens (>= 1). Operators are
  // priced at whole token counts: linear between the two around it.
  const double m = pairs / touched;
  const auto lo = static_cast<std::int64_t>(std::floor(m));
  const double t_lo = at(lo);
  const double per_expert =
      m == static_cast<double>(lo) ? t_lo : t_lo + (m - lo) * (at(lo + 1) - t_lo);
  return touched * per_expert;
}

std::int64_t IterationCostModel::expert_capacity(std::int64_t tokens) const {
  MLSIM_CHECK(expert_.capacity_factor.has_value(), "a capacity needs a capacity factor");
  const std::int64_t group = (tokens + expert_.ep - 1) / expert_.ep;
  return static_cast<std::int64_t>(std::ceil(*expert_.capacity_factor * model_.experts_per_token *
                                             static_cast<double>(group) / model_.experts));
}

std::int64_t IterationCostModel::dropped_pairs(std::span<const std::int64_t> counts,
                                               std::int64_t capacity) {
  std::int64_t dropped = 0;
  for (std::int64_t c : counts) dropped += std::max<std::int64_t>(0, c - capacity);
  return dropped;
}

std::int64_t IterationCostModel::draw_dropped(std::int64_t tokens) const {
  const std::int64_t capacity = expert_capacity(tokens);
  const auto E = static_cast<std::uint64_t>(model_.experts);
  const auto k = static_cast<std::size_t>(model_.experts_per_token);
  std::int64_t dropped = 0;
  for (int g = 0; g < expert_.ep; ++g) {
    // The group's tokens: the batch split as evenly as it goes (the first tokens % ep one more).
    const std::int64_t n = tokens / expert_.ep + (g < tokens % expert_.ep ? 1 : 0);
    std::fill(expert_counts_.begin(), expert_counts_.end(), 0);
    for (std::int64_t t = 0; t < n; ++t)
      // k distinct experts, uniformly: the first k of a partial Fisher-Yates shuffle.
      for (std::size_t j = 0; j < k; ++j) {
        const std::size_t r = j + static_cast<std::size_t>(routing_->below(E - j));
        std::swap(expert_order_[j], expert_order_[r]);
        ++expert_counts_[static_cast<std::size_t>(expert_order_[j])];
      }
    dropped += dropped_pairs(expert_counts_, capacity);
  }
  return dropped;
}

std::int64_t IterationCostModel::alltoall_bytes(std::int64_t tokens) const {
  if (expert_.capacity_factor)  // the padded [experts, C, hidden] dispatch tensor
    return std::int64_t{model_.experts} * expert_capacity(tokens) * model_.hidden *
           model_.dtype_bytes();
  const std::int64_t slice = (tokens + expert_.ep - 1) / expert_.ep;
  const double bytes = static_cast<double>(slice) * model_.experts_per_token * model_.hidden *
                       model_.dtype_bytes() * expert_.imbalance;
  return static_cast<std::int64_t>(std::ceil(bytes));
}

std::size_t IterationCostModel::segment_of_boundary(std::int32_t layer) const {
  auto it = std::lower_bound(bounds_.begin(), bounds_.end(), layer);
  MLSIM_CHECK(it != bounds_.end() && *it == layer, "work item layers must be tier boundaries");
  return static_cast<std::size_t>(it - bounds_.begin());
}

IterationCost IterationCostModel::cost(std::span<const WorkItem> items, std::int32_t first_layer,
                                       std::int32_t last_layer) const {
  MLSIM_CHECK(0 <= first_layer && first_layer < last_layer && last_layer <= model_.layers,
              "a stage is a non-empty layer range of the model");
  for (auto& s : segments_) s = Segment{};
  std::fill(sampled_.begin(), sampled_.end(), 0);
  IterationCost out;
  for (const auto& it : items) {
    const auto lo = segment_of_boundary(it.first_layer);
    const auto hi = segment_of_boundary(it.last_layer);
    MLSIM_CHECK(lo < hi && it.tokens > 0, "empty work item");
    if (it.first_layer == 0) out.tokens += it.tokens;
    AttentionLoad a;
    if (it.decode)
      a.add_decode(std::int64_t{it.cached} + 1);
    else
      a.add_prefill_chunk(it.cached, it.tokens);
    for (auto s = lo; s < hi; ++s) {
      segments_[s].tokens += it.tokens;
      segments_[s].attention += a;
    }
    if (it.samples) sampled_[hi - 1] += 1;
  }
  double t =
      first_layer > 0
          ? 0
          : timer_.seconds(Op::kEmbedding, token_op_work(Op::kEmbedding, model_, out.tokens, tp_),
                           out.tokens, shape_);
  for (std::size_t s = 0; s < segments_.size(); ++s) {
    const auto& seg = segments_[s];
    if (seg.tokens == 0) continue;
    // The segment's layers inside the range.
    const int layers = std::min(bounds_[s + 1], last_layer) - std::max(bounds_[s], first_layer);
    if (layers <= 0) continue;
    const double per_layer =
        token_ops_seconds(seg.tokens) +
        timer_.seconds(Op::kAttnPrefill, attention_prefill_work(model_, seg.attention, tp_),
                       seg.attention.prefill_tokens, shape_, seg.attention.prefill_seq_len()) +
        timer_.seconds(Op::kAttnDecode, attention_decode_work(model_, seg.attention, tp_),
                       seg.attention.decode_tokens, shape_, seg.attention.decode_seq_len());
    t += layers * per_layer;
    if (model_.moe() && expert_.capacity_factor && routing_) {
      // Which assignments drop: one routing draw per MoE layer of the range.
      out.moe_routed_pairs += std::int64_t{layers} * seg.tokens * model_.experts_per_token;
      for (int l = 0; l < layers; ++l) out.moe_dropped_pairs += draw_dropped(seg.tokens);
    }
    if (tp_ > 1) {
      const std::int64_t payload = allreduce_bytes(model_, seg.tokens);
      // Expert parallelism replaces the MLP's all-reduce (class comment of ExpertParallel).
      const bool ep = model_.moe() && expert_.ep > 1;
      const int per_layer_allreduces = ep ? 1 : kAllReducesPerLayer;
      out.allreduces += per_layer_allreduces * layers;
      out.allreduce_bytes += std::int64_t{per_layer_allreduces} * layers * payload;
      out.allreduce += allreduce_.time(tp_, Bytes{payload}) * (per_layer_allreduces * layers);
      if (ep) {
        using collectives::Operation;
        const std::int64_t a2a = alltoall_bytes(seg.tokens);
        out.alltoalls += 2 * layers;
        out.alltoall_bytes += std::int64_t{2} * layers * a2a;
        out.allgathers += layers;
        out.moe_collectives +=
            (allreduce_.collective(Operation::kAllToAll, expert_.ep, Bytes{a2a}) * 2 +
             allreduce_.collective(Operation::kAllGather, expert_.ep, Bytes{payload})) *
            layers;
      }
    }
  }
  for (std::size_t s = 0; s < sampled_.size(); ++s) {
    // Exit s is after layer bounds_[s + 1]: its head runs on the range that holds that layer.
    if (sampled_[s] == 0 || bounds_[s + 1] <= first_layer || bounds_[s + 1] > last_layer) continue;
    out.exits_sampled += 1;
    t += timer_.seconds(Op::kFinalNorm, token_op_work(Op::kFinalNorm, model_, sampled_[s], tp_),
                        sampled_[s], shape_);
    t += timer_.seconds(Op::kLmHead, token_op_work(Op::kLmHead, model_, sampled_[s], tp_),
                        sampled_[s], shape_);
  }
  out.compute_s = t;
  return out;
}

}  // namespace mlsim::serving
