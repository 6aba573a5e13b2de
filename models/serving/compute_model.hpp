#pragma once
// GPU time of transformer operators, priced by the platform's cost providers
// (sim_core/hardware/cost_model.hpp: Vidur profile tables where measured, the per-regime
// roofline otherwise, scaling between catalog GPUs; docs/hardware.md has their errors). Then the
// time of one iteration of a batch, layer segment by layer segment, so that requests leaving at
// different depths (MFS tiers) are costed exactly.
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "models/serving/model_catalog.hpp"
#include "models/serving/tp_allreduce.hpp"
#include "models/serving/transformer_cost.hpp"
#include "sim_core/engine/random.hpp"
#include "sim_core/hardware/cost_model.hpp"
#include "sim_core/hardware/hardware.hpp"

namespace mlsim::serving {

// Prices one operator of a transformer of a given shape on one GPU type.
class OperatorTimer {
 public:
  // `costs` and `gpu` must outlive the timer. Every operator's name is resolved here, once
  // (CostModel::bind): the cost model's providers must be complete.
  OperatorTimer(const CostModel& costs, const GpuSpec& gpu, Dtype dtype);
  // Seconds of `op` doing `w` over `tokens` tokens (the profile tables' axis) for `shape`;
  // `seq_len` (attention kernels; 0: none) selects a FLOP or bandwidth efficiency by sequence
  // length where the roofline has one (cost_model.hpp): prefill by key length, decode by KV length.
  double seconds(Op op, const OpWork& w, std::int64_t tokens, const OperatorShape& shape,
                 std::int64_t seq_len = 0) const;
  const GpuSpec& gpu() const { return gpu_; }
  // InputError at `where` unless every operator is priced on `gpu` (call at prepare time).
  static void check(const CostModel& costs, const GpuSpec& gpu, const std::string& where);

 private:
  const CostModel& costs_;
  const GpuSpec& gpu_;
  Dtype dtype_;
  std::array<CostModel::BoundOperator, kOpCount> bound_;  // by Op
};

// New tokens of one request in one iteration, passing through layers [first_layer, last_layer).
// `cached` tokens of this request are already in the KV cache of those layers.
struct WorkItem {
  std::int32_t tokens = 0;
  std::int32_t cached = 0;
  bool decode = false;   // one token attending to cached + 1 keys
  bool samples = false;  // the iteration samples a token for this request at last_layer
  std::int32_t first_layer = 0;
  std::int32_t last_layer = 0;
};

struct IterationCost {
  double compute_s = 0;
  std::int64_t allreduce_bytes = 0;  // sum over all all-reduces of their payload
  std::int32_t allreduces = 0;       // how many all-reduces run, in sequence
  Time allreduce;                    // their time, one after another (each costed on its own)
  // Expert parallelism (MoE layers at ep > 1): the dispatch and combine all-to-alls and the
  // all-gather of each MoE layer, after the all-reduces, one after another.
  std::int32_t alltoalls = 0;
  std::int64_t alltoall_bytes = 0;  // sum over the all-to-alls of each GPU's send buffer
  std::int32_t allgathers = 0;
  Time moe_collectives;
  // With a capacity factor and a routing stream: (token, expert) assignments routed and dropped
  // over capacity, summed over the MoE layers.
  std::int64_t moe_routed_pairs = 0;
  std::int64_t moe_dropped_pairs = 0;
  std::int32_t exits_sampled = 0;  // distinct exit heads that sampled a token
  std::int64_t tokens = 0;         // tokens entering the model (embedding lookups)
};

// How a mixture-of-experts model's expert layers are split over a replica's tp GPUs (ignored for
// a dense model).
//   ep 1:  every expert is split over the tp GPUs like a dense MLP (tensor parallel; Megatron
//          column/row split), and the layer ends with the MLP's all-reduce, as a dense layer does.
//   ep tp: expert parallelism over the same GPUs (Megatron-style MoE; the attention stays tensor
//          parallel): each GPU holds experts/ep whole experts. After the attention's all-reduce
//          every GPU has every token; it keeps its 1/ep slice of them, sends each (token, chosen
//          expert) pair's hidden state to the GPU holding that expert (dispatch all-to-all),
//          runs its experts, sends the results back (combine all-to-all), and the GPUs all-gather
//          the slices for the next layer's tensor-parallel attention. Per MoE layer: one
//          all-reduce, two all-to-alls and one all-gather, instead of a dense layer's two
//          all-reduces.
// Token-to-expert routing [assumed]: each token picks its experts_per_token experts uniformly
// and independently, so in expectation a GPU receives T k / ep pairs of a batch of T tokens and
// (experts/ep)(1 - (1 - k/E)^T) of its experts receive at least one (only those read their
// weights: a small decode batch touches few experts). `imbalance` (>= 1) is the busiest GPU's
// pairs over that mean (at most T min(k, experts/ep)); the iteration, in lock-step, waits for
// the busiest GPU's experts and its all-to-all share (the all-to-all's buffer scaled by it).
//
// Capacity (`capacity_factor`; none: dropless, as above). GShard (Lepikhin et al., arXiv
// 2006.16668, section 2.2 and Algorithm 1) and the Switch Transformer (Fedus et al., arXiv
// 2101.03961, section 2.2, "expert capacity") give every expert a fixed number of slots per group
// of tokens; a (token, expert) assignment past an expert's slots is dropped (the token skips that
// expert: the residual carries it on), and the experts and all-to-alls work on the padded
// [experts, capacity, hidden] tensor whatever the routing. Here a group is one GPU's ceil(T/ep)
// tokens (the whole batch at ep 1) and an expert's capacity per group is
//   C = ceil(capacity_factor x k x ceil(T/ep) / experts)
// (Switch: tokens per batch / experts x capacity factor; top-k as DeepSpeed's sharded_moe.py
// `_capacity`, called with capacity_factor x 2 by its top-2 gate, rounding up). So a GPU runs its
// experts/ep experts on ep x C slots each (all its experts, padded), the all-to-all send buffer
// is experts x C x hidden x dtype bytes, and `imbalance` does not apply. Which assignments drop
// is drawn per batch, per MoE layer and per group: each token picks k distinct experts uniformly
// (the routing stream, set_routing_stream; the scenario's seed), an expert over C drops the
// excess.
struct ExpertParallel {
  int ep = 1;
  double imbalance = 1.0;
  std::optional<double> capacity_factor;
};

// Cost of an iteration on one replica (one model, tensor-parallel degree tp). `exits` are the
// layer counts after which a head can sample (ascending; the last is the model depth); a plain
// model has one exit. At tp > 1 every layer pass runs two all-reduces of the tokens'
// activations, each costed by `allreduce` (the collective layer) for its own size.
class IterationCostModel {
 public:
  IterationCostModel(const TransformerShape& model, int tp, const OperatorTimer& timer,
                     std::vector<std::int32_t> exits, TpAllReduce allreduce = {},
                     ExpertParallel expert = {});
  IterationCost cost(std::span<const WorkItem> items) const {
    return cost(items, 0, model_.layers);
  }
  // The part of the iteration that runs on layers [first_layer, last_layer) (a pipeline stage):
  // those layers' operators and all-reduces, the embedding when first_layer is 0, and a head's
  // final norm and LM head when its exit is in (first_layer, last_layer].
  IterationCost cost(std::span<const WorkItem> items, std::int32_t first_layer,
                     std::int32_t last_layer) const;
  // Time of the token-parallel operators of one layer for `tokens` tokens (memoised); for a
  // MoE model, the router's GEMM and the busiest GPU's experts in place of the MLP.
  double token_ops_seconds(std::int64_t tokens) const;
  // MoE: the busiest GPU's expert FFN time in one layer for a batch of `tokens` tokens.
  double expert_seconds(std::int64_t tokens) const;
  // MoE at ep > 1: one GPU's all-to-all send buffer for a batch of `tokens` tokens: its
  // ceil(tokens / ep) tokens' hidden states once per chosen expert, x imbalance.
  std::int64_t alltoall_bytes(std::int64_t tokens) const;
  // With a capacity factor: an expert's slots per group for a batch of `tokens` tokens,
  // ceil(capacity_factor x k x ceil(tokens / ep) / experts) (ExpertParallel).
  std::int64_t expert_capacity(std::int64_t tokens) const;
  // Assignments over capacity: the sum over experts of max(0, counts[e] - capacity).
  static std::int64_t dropped_pairs(std::span<const std::int64_t> counts, std::int64_t capacity);
  // The stream the per-batch routing draws come from (capacity factor only); without one, cost()
  // draws nothing and reports no drops.
  void set_routing_stream(RandomStream stream) { routing_.emplace(stream); }
  const ExpertParallel& expert_parallel() const { return expert_; }
  const TransformerShape& model() const { return model_; }
  const OperatorShape& shape() const { return shape_; }
  int tp() const { return tp_; }
  const std::vector<std::int32_t>& exits() const { return exits_; }

 private:
  std::size_t segment_of_boundary(std::int32_t layer) const;

  TransformerShape model_;
  int tp_;
  OperatorShape shape_;
  const OperatorTimer& timer_;
  std::vector<std::int32_t> exits_;
  TpAllReduce allreduce_;
  ExpertParallel expert_;
  OperatorShape expert_shape_, router_shape_;
  TransformerShape expert_model_;     // one expert as a dense MLP (ffn = expert_ffn)
  std::vector<std::int32_t> bounds_;  // 0, exits...
  mutable std::vector<double> token_ops_cache_;
  // Scratch reused between calls (cost() runs once per iteration).
  struct Segment {
    std::int64_t tokens = 0;
    AttentionLoad attention;
  };
  mutable std::vector<Segment> segments_;
  mutable std::vector<std::int64_t> sampled_;
  // Routing draws (capacity factor): the stream, a permutation of the experts and their counts.
  mutable std::optional<RandomStream> routing_;
  mutable std::vector<std::int32_t> expert_order_;
  mutable std::vector<std::int64_t> expert_counts_;
  // Draws one MoE layer's routing of `tokens` tokens; returns the assignments dropped.
  std::int64_t draw_dropped(std::int64_t tokens) const;
};

}  // namespace mlsim::serving
