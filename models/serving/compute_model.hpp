#pragma once
// GPU time of transformer operators: a roofline with per-operator efficiency factors,
//   time = max(FLOPs / (flops_efficiency * peak), bytes / (bandwidth_efficiency * HBM BW))
//          + overhead,
// calibrated per GPU on Vidur's operator profiles (tools/serving_calibrate.py writes
// workloads/serving/roofline_calibration.json; tests/serving/calibration_test.cpp reports the
// error against the tables). Then the time of one iteration of a batch, layer segment by layer
// segment, so that requests leaving at different depths (MFS tiers) are costed exactly.
#include <array>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "models/serving/model_catalog.hpp"
#include "models/serving/transformer_cost.hpp"
#include "sim_core/hardware/hardware.hpp"

namespace mlsim::serving {

struct OpEfficiency {
  double flops = 1;       // achieved / peak FLOP/s
  double bandwidth = 1;   // achieved / peak HBM bandwidth
  double overhead_s = 0;  // launch and tail cost per kernel
};

struct RooflineCalibration {
  std::array<OpEfficiency, kOpCount> ops{};
  std::string source;
  // Reads {"gpus": {GPU: {"ops": {op_name: {...}}}}} and returns the entry of `gpu`; every
  // operator must be present. InputError naming the file and path otherwise.
  // A GPU the file does not calibrate is an InputError at `gpu_where` (the scenario's gpu key).
  static RooflineCalibration load(const std::filesystem::path& file, const std::string& gpu,
                                  const std::string& gpu_where = "");
  // All factors 1, no overhead: the plain roofline.
  static RooflineCalibration ideal();
};

class OperatorTimer {
 public:
  OperatorTimer(const GpuSpec& gpu, Dtype dtype, RooflineCalibration calibration);
  double seconds(Op op, const OpWork& w) const;
  double peak_flops() const { return peak_flops_; }
  double hbm_bytes_per_s() const { return hbm_; }

 private:
  double peak_flops_;
  double hbm_;
  RooflineCalibration cal_;
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
  std::int32_t exits_sampled = 0;    // distinct exit heads that sampled a token
  std::int64_t tokens = 0;           // tokens entering the model (embedding lookups)
};

// Cost of an iteration on one replica (one model, tensor-parallel degree tp). `exits` are the
// layer counts after which a head can sample (ascending; the last is the model depth); a plain
// model has one exit.
class IterationCostModel {
 public:
  IterationCostModel(const TransformerShape& model, int tp, const OperatorTimer& timer,
                     std::vector<std::int32_t> exits);
  IterationCost cost(std::span<const WorkItem> items) const;
  // Time of the token-parallel operators of one layer for `tokens` tokens (memoised).
  double token_ops_seconds(std::int64_t tokens) const;
  const TransformerShape& model() const { return model_; }
  int tp() const { return tp_; }
  const std::vector<std::int32_t>& exits() const { return exits_; }

 private:
  std::size_t segment_of_boundary(std::int32_t layer) const;

  TransformerShape model_;
  int tp_;
  const OperatorTimer& timer_;
  std::vector<std::int32_t> exits_;
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
