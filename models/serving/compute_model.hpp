#pragma once
// GPU time of transformer operators, priced by the platform's cost providers
// (sim_core/hardware/cost_model.hpp: Vidur profile tables where measured, the per-regime
// roofline otherwise, scaling between catalog GPUs; docs/hardware.md has their errors). Then the
// time of one iteration of a batch, layer segment by layer segment, so that requests leaving at
// different depths (MFS tiers) are costed exactly.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "models/serving/model_catalog.hpp"
#include "models/serving/tp_allreduce.hpp"
#include "models/serving/transformer_cost.hpp"
#include "sim_core/hardware/cost_model.hpp"
#include "sim_core/hardware/hardware.hpp"

namespace mlsim::serving {

// Prices one operator of a transformer of a given shape on one GPU type.
class OperatorTimer {
 public:
  // `costs` and `gpu` must outlive the timer.
  OperatorTimer(const CostModel& costs, const GpuSpec& gpu, Dtype dtype);
  // Seconds of `op` doing `w` over `tokens` tokens (the profile tables' axis) for `shape`.
  double seconds(Op op, const OpWork& w, std::int64_t tokens, const OperatorShape& shape) const;
  const GpuSpec& gpu() const { return gpu_; }
  // InputError at `where` unless every operator is priced on `gpu` (call at prepare time).
  static void check(const CostModel& costs, const GpuSpec& gpu, const std::string& where);

 private:
  const CostModel& costs_;
  const GpuSpec& gpu_;
  Dtype dtype_;
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
  std::int32_t exits_sampled = 0;    // distinct exit heads that sampled a token
  std::int64_t tokens = 0;           // tokens entering the model (embedding lookups)
};

// Cost of an iteration on one replica (one model, tensor-parallel degree tp). `exits` are the
// layer counts after which a head can sample (ascending; the last is the model depth); a plain
// model has one exit. At tp > 1 every layer pass runs two all-reduces of the tokens'
// activations, each costed by `allreduce` (the collective layer) for its own size.
class IterationCostModel {
 public:
  IterationCostModel(const TransformerShape& model, int tp, const OperatorTimer& timer,
                     std::vector<std::int32_t> exits, TpAllReduce allreduce = {});
  IterationCost cost(std::span<const WorkItem> items) const {
    return cost(items, 0, model_.layers);
  }
  // The part of the iteration that runs on layers [first_layer, last_layer) (a pipeline stage):
  // those layers' operators and all-reduces, the embedding when first_layer is 0, and a head's
  // final norm and LM head when its exit is in (first_layer, last_layer].
  IterationCost cost(std::span<const WorkItem> items, std::int32_t first_layer,
                     std::int32_t last_layer) const;
  // Time of the token-parallel operators of one layer for `tokens` tokens (memoised).
  double token_ops_seconds(std::int64_t tokens) const;
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
  std::vector<std::int32_t> bounds_;  // 0, exits...
  mutable std::vector<double> token_ops_cache_;
  // Scratch reused between calls (cost() runs once per iteration).
  struct Segment {
    std::int64_t tokens = 0;
    AttentionLoad attention;
  };
  mutable std::vector<Segment> segments_;
  mutable std::vector<std::int64_t> sampled_;
};

}  // namespace mlsim::serving
