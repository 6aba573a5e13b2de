#pragma once
// How long work takes on a GPU at nominal speed: cost providers tried in the order the scenario's
// "compute" section lists them (docs/hardware.md), then scaling from another catalog GPU.
//
//  - ProfileTableProvider: measured operator times (Vidur's tables), linear interpolation in the
//    token count between measured points of the same operator, model shape and TP degree; nothing
//    outside the measured range or for an unmeasured shape;
//  - RooflineProvider: max(FLOPs / (flops_efficiency * peak), bytes / (bandwidth_efficiency *
//    HBM bandwidth)) + overhead, with factors per operator, GPU and token regime, and a token
//    floor for element-wise kernels (tools/compute_calibrate.py fits them; a single fit over all
//    token counts misses decode). An operator may instead take its flops_efficiency and/or its
//    bandwidth_efficiency from a curve by sequence length (attention kernels: a paper's speed
//    by sequence length; prefill by FLOP/s, decode by KV bytes read per second), used for work
//    that gives its seq_len;
//  - scaling between catalog GPUs: an operator costed on `scale_from` is scaled by the ratio of
//    the two GPUs' ideal rooflines for its FLOPs and bytes; a profiled layer time by
//    scale_profiled_time below.
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim_core/hardware/compute_work.hpp"
#include "sim_core/hardware/hardware.hpp"

namespace mlsim {

// An operator name on a GPU resolved by a provider once, at set-up (CostProvider::resolve): a
// small index into the provider's own table, so that pricing work per iteration compares no
// strings (the string-keyed lookups were about a quarter of a serving run's instructions).
using OperatorHandle = std::int32_t;
// The provider prices no work of that operator on that GPU.
inline constexpr OperatorHandle kUnpricedOperator = -1;

class CostProvider {
 public:
  virtual ~CostProvider() = default;
  virtual std::string_view name() const = 0;
  // Seconds of `w` on `gpu` at speed 1, or nothing when this provider cannot price it.
  virtual std::optional<double> operator_seconds(const OperatorWork& w,
                                                 const GpuSpec& gpu) const = 0;
  // `op` on `gpu` resolved once: a handle for resolved_seconds, or kUnpricedOperator when this
  // provider prices no work of `op` on `gpu`. A handle stays valid while the provider lives and
  // sees points and curves added to its operator later; an operator first added after resolving
  // is not seen (resolve once the provider is loaded). The default prices by name.
  virtual OperatorHandle resolve(const GpuSpec& /*gpu*/, std::string_view /*op*/) const {
    return 0;
  }
  // operator_seconds(w, gpu) for work whose `op` on `gpu` resolved to `handle` (not
  // kUnpricedOperator): the same result, without looking the name up.
  virtual std::optional<double> resolved_seconds(OperatorHandle /*handle*/, const OperatorWork& w,
                                                 const GpuSpec& gpu) const {
    return operator_seconds(w, gpu);
  }
  // Whether the provider prices every operator `op` on `gpu` (whatever its shape and token
  // count): the prepare-time check that work will never go unpriced.
  virtual bool total_for(const GpuSpec& gpu, std::string_view op) const = 0;
};

// max(F / peak(dtype), B / HBM bandwidth): the datasheet lower bound. InputError at `where` when
// the GPU has no rate for the dtype.
double ideal_roofline_seconds(double flops, double bytes, Dtype dtype, const GpuSpec& gpu,
                              const std::string& where = "");

// A time measured on `from` scaled to `to`. With the HBM bytes of the work known, the fraction of
// the measured time that those bytes take at `from`'s peak bandwidth (at most all of it) is
// taken as memory-bound and scaled by the HBM bandwidth ratio, the rest as compute-bound and
// scaled by the peak ratio for `dtype`; without bytes, all of it by the peak ratio. [assumed: the
// two parts do not overlap; an upper bound on the speed-up when they do.] InputError at
// `to_where` when `to` has no rate for the dtype.
double scale_profiled_time(double seconds, double bytes, Dtype dtype, const GpuSpec& from,
                           const GpuSpec& to, const std::string& from_where,
                           const std::string& to_where);

struct RooflineRegime {
  std::int64_t max_tokens = 0;  // this regime covers tokens up to here; the last has no limit
  bool unbounded = false;
  double flops_efficiency = 1;
  double bandwidth_efficiency = 1;
  double overhead_s = 0;
  // Fewer tokens are priced as this many (FLOPs and bytes scaled up in proportion): an
  // element-wise kernel's time stops shrinking below some size. 1 for GEMMs, whose weight bytes
  // do not scale with tokens.
  std::int64_t min_tokens = 1;
};

// FLOP efficiency of a kernel by sequence length: measured points (ascending lengths),
// piecewise linear in log(length) between them, the end points' values outside (clamped).
struct SeqLenEfficiency {
  std::vector<std::int64_t> seq_len;
  std::vector<double> efficiency;
  double at(std::int64_t len) const;
};

class RooflineProvider final : public CostProvider {
 public:
  // Reads {"gpus": {GPU: {"_source", "ops": {op: {"regimes": [{"max_tokens": N | "none",
  // "flops_efficiency", "bandwidth_efficiency", "overhead"}, ...], optionally
  // "flops_efficiency_by_seq_len": {"_source", "seq_len": [...], "flops_efficiency": [...]} and
  // "bandwidth_efficiency_by_seq_len": {"_source", "seq_len": [...],
  // "bandwidth_efficiency": [...]} or a list of such curves, each with a "query_group" (query heads
  // per KV head), ascending}}}}}.
  // InputError naming the file and JSON path on anything wrong (regimes not ascending, the last
  // not "none", lengths not ascending, ...).
  static std::unique_ptr<RooflineProvider> load(const std::filesystem::path& file);
  void add(std::string gpu, std::string op, std::vector<RooflineRegime> regimes);
  // Work of `op` on `gpu` that gives its seq_len takes its FLOP efficiency from `curve` (the
  // regime's bandwidth efficiency and overhead still apply).
  void add_seq_len_efficiency(std::string gpu, std::string op, SeqLenEfficiency curve);
  const SeqLenEfficiency* seq_len_efficiency(std::string_view gpu, std::string_view op) const;
  // Likewise for the bandwidth efficiency (a memory-bound kernel's achieved share of HBM
  // bandwidth by sequence length: decode attention); the regime's FLOP efficiency and overhead
  // still apply. `query_group` (query heads per KV head) 0: one curve for every shape; > 0: one
  // of several curves, one per group. Work whose shape's group (heads / kv_heads; 1 when the
  // shape gives no KV heads) lies between two curves' groups takes the efficiency interpolated
  // linearly in log(group) between theirs at its length, outside them the nearest curve's.
  void add_seq_len_bandwidth_efficiency(std::string gpu, std::string op, SeqLenEfficiency curve,
                                        std::int64_t query_group = 0);
  // The curve of exactly `query_group` (0: the curve for every shape), or nullptr.
  const SeqLenEfficiency* seq_len_bandwidth_efficiency(std::string_view gpu, std::string_view op,
                                                       std::int64_t query_group = 0) const;
  // The bandwidth efficiency of `op` on `gpu` at `seq_len` for a kernel of `query_group` query
  // heads per KV head, or nothing when `op` has no bandwidth curve.
  std::optional<double> bandwidth_efficiency_at(std::string_view gpu, std::string_view op,
                                                std::int64_t seq_len, double query_group) const;

  std::string_view name() const override { return "roofline"; }
  std::optional<double> operator_seconds(const OperatorWork& w, const GpuSpec& gpu) const override;
  bool total_for(const GpuSpec& gpu, std::string_view op) const override;
  const RooflineRegime* regime(std::string_view gpu, std::string_view op,
                               std::int64_t tokens) const;
  OperatorHandle resolve(const GpuSpec& gpu, std::string_view op) const override;
  std::optional<double> resolved_seconds(OperatorHandle handle, const OperatorWork& w,
                                         const GpuSpec& gpu) const override;

 private:
  // Everything known of one operator on one GPU.
  struct Entry {
    std::vector<RooflineRegime> regimes;  // empty: the operator has curves but no regimes
    std::optional<SeqLenEfficiency> flops_curve;
    std::map<std::int64_t, SeqLenEfficiency> bandwidth_curves;  // query group (0: every shape)
  };
  // The entry of `op` on `gpu`, added when missing.
  Entry& entry(std::string gpu, std::string op);
  const Entry* find(std::string_view gpu, std::string_view op) const;
  static const RooflineRegime* regime_of(const Entry& e, std::int64_t tokens);
  static std::optional<double> bandwidth_efficiency_of(const Entry& e, std::int64_t seq_len,
                                                       double query_group);
  // gpu -> op -> index into entries_ (a deque: entries never move, handles are indices)
  std::map<std::string, std::map<std::string, OperatorHandle, std::less<>>, std::less<>> index_;
  std::deque<Entry> entries_;
};

class ProfileTableProvider final : public CostProvider {
 public:
  // Reads Vidur's compute profiles: `dir`/<org>/<model>/mlp.csv for each GPU folder named in
  // `folders` (folder -> catalog GPU name, e.g. "a100" -> "A100-SXM4-80GB"). InputError at
  // `where` when a folder is missing or a file is malformed.
  static std::unique_ptr<ProfileTableProvider> load_vidur(
      const std::filesystem::path& dir, const std::map<std::string, std::string>& folders,
      const std::string& where);
  // One measured point (seconds at `tokens`); a repeated point keeps the mean.
  void add_point(const std::string& gpu, const std::string& op, const OperatorShape& shape,
                 std::int64_t tokens, double seconds);

  std::string_view name() const override { return "profiles"; }
  std::optional<double> operator_seconds(const OperatorWork& w, const GpuSpec& gpu) const override;
  // Partial by nature: unmeasured shapes and token counts fall through.
  bool total_for(const GpuSpec&, std::string_view) const override { return false; }
  std::size_t points() const { return points_; }
  OperatorHandle resolve(const GpuSpec& gpu, std::string_view op) const override;
  std::optional<double> resolved_seconds(OperatorHandle handle, const OperatorWork& w,
                                         const GpuSpec& gpu) const override;

 private:
  struct Point {
    std::int64_t tokens;
    double seconds;
    int samples;
  };
  using Curves = std::map<OperatorShape, std::vector<Point>>;  // shape -> points by tokens
  // Adds one point to a curve kept sorted by tokens; false when it averaged into an existing one.
  static bool add_to_curve(std::vector<Point>& curve, std::int64_t tokens, double seconds);
  // The curves of `op` on `gpu`, added when missing.
  Curves& curves(const std::string& gpu, const std::string& op);
  // gpu -> op -> index into curves_ (a deque: its maps never move, handles are indices)
  std::map<std::string, std::map<std::string, OperatorHandle, std::less<>>, std::less<>> index_;
  std::deque<Curves> curves_;
  std::size_t points_ = 0;
};

class CostModel {
 public:
  void add(std::unique_ptr<CostProvider> provider);
  // A GPU the providers do not cover is priced on `gpu` and scaled (null: no scaling).
  void set_scale_from(const GpuSpec* gpu) { scale_from_ = gpu; }
  const GpuSpec* scale_from() const { return scale_from_; }
  const std::vector<std::unique_ptr<CostProvider>>& providers() const { return providers_; }

  // Seconds at speed 1 on `gpu`. FixedWork: its duration. ProfiledWork: scaled from the GPU it
  // was measured on. OperatorWork: the first provider that prices it, else scaled from
  // scale_from; InvariantError when nothing can (check_operators at prepare time prevents it).
  double seconds(const Work& work, const GpuSpec& gpu) const;
  double operator_seconds(const OperatorWork& w, const GpuSpec& gpu) const;
  // An operator on a GPU resolved by every provider (and on scale_from) once: operator_seconds
  // with it gives the same seconds as by name, without the per-call name lookups. Bind after
  // the providers and scale_from are set (checked when used).
  class BoundOperator {
   public:
    const GpuSpec& gpu() const { return *gpu_; }

   private:
    friend class CostModel;
    const GpuSpec* gpu_ = nullptr;
    const GpuSpec* scale_from_ = nullptr;
    std::vector<OperatorHandle> direct_;  // one per provider on gpu
    std::vector<OperatorHandle> scaled_;  // one per provider on scale_from (when set and other)
  };
  // `gpu` must outlive the binding.
  BoundOperator bind(std::string_view op, const GpuSpec& gpu) const;
  // `w.op` must be the bound operator's name (used only in the error when nothing prices it).
  double operator_seconds(const BoundOperator& bound, const OperatorWork& w) const;
  // Which provider priced `w` on `gpu` ("profiles", "roofline", "scaled from X"), for reports.
  std::string provenance(const OperatorWork& w, const GpuSpec& gpu) const;
  // InputError at `where` unless some provider prices every `op` on `gpu`, directly or through
  // scale_from (call at prepare time for each operator and GPU a model will use).
  void check_operator(std::string_view op, const GpuSpec& gpu, const std::string& where) const;

 private:
  std::optional<double> direct(const OperatorWork& w, const GpuSpec& gpu) const;
  std::optional<double> direct(std::span<const OperatorHandle> handles, const OperatorWork& w,
                               const GpuSpec& gpu) const;
  std::vector<std::unique_ptr<CostProvider>> providers_;
  const GpuSpec* scale_from_ = nullptr;
};

}  // namespace mlsim
