#include "sim_core/hardware/cost_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "sim_core/base/error.hpp"
#include "sim_core/base/input_file.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim {

double ideal_roofline_seconds(double flops, double bytes, Dtype dtype, const GpuSpec& gpu,
                              const std::string& where) {
  const double compute = flops > 0 ? flops / gpu.peak_for(dtype, where).flops_per_s : 0;
  return std::max(compute, bytes / gpu.hbm_bandwidth.bytes_per_s);
}

double scale_profiled_time(double seconds, double bytes, Dtype dtype, const GpuSpec& from,
                           const GpuSpec& to, const std::string& from_where,
                           const std::string& to_where) {
  const double peak_ratio =
      from.peak_for(dtype, from_where).flops_per_s / to.peak_for(dtype, to_where).flops_per_s;
  if (!(seconds > 0)) return seconds;
  const double memory_fraction =
      bytes > 0 ? std::min(1.0, bytes / from.hbm_bandwidth.bytes_per_s / seconds) : 0.0;
  const double bandwidth_ratio = from.hbm_bandwidth.bytes_per_s / to.hbm_bandwidth.bytes_per_s;
  return seconds * (memory_fraction * bandwidth_ratio + (1 - memory_fraction) * peak_ratio);
}

// ---- roofline ----

namespace {
// Entry names of the object at `key` (annotations starting with '_' and "comment" skipped).
std::vector<std::string> entry_names(JsonReader& parent, std::string_view key) {
  auto& obj = parent.raw(key);
  if (!obj.is_object())
    throw InputError(parent.path_of(key), "expected an object, got " + json_type_name(obj));
  std::vector<std::string> out;
  for (auto it = obj.begin(); it != obj.end(); ++it)
    if (it.key() != "comment" && !(it.key().starts_with("_"))) out.push_back(it.key());
  return out;
}
}  // namespace

std::unique_ptr<RooflineProvider> RooflineProvider::load(const std::filesystem::path& file) {
  std::ifstream in = open_input_file(file, "", "roofline calibration");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(file.string(), std::string("invalid JSON: ") + e.what());
  }
  auto provider = std::make_unique<RooflineProvider>();
  JsonReader root(j, file.string());
  const auto gpu_names = entry_names(root, "gpus");
  auto gpus = root.object("gpus");
  for (const auto& gpu_name : gpu_names) {
    auto gpu = gpus.object(gpu_name);
    const auto op_names = entry_names(gpu, "ops");
    auto ops = gpu.object("ops");
    for (const auto& op_name : op_names) {
      auto op = ops.object(op_name);
      std::vector<RooflineRegime> regimes;
      for (auto& r : op.objects("regimes")) {
        RooflineRegime g;
        auto& limit = r.raw("max_tokens");
        if (limit.is_string() && limit.get<std::string>() == "none") {
          g.unbounded = true;
        } else {
          g.max_tokens = r.integer("max_tokens", 1, std::int64_t{1} << 40);
          if (!regimes.empty() && g.max_tokens <= regimes.back().max_tokens)
            throw InputError(r.path_of("max_tokens"), "regimes must have ascending max_tokens");
        }
        if (!regimes.empty() && regimes.back().unbounded)
          throw InputError(r.path(), "no regime may follow the one with \"max_tokens\": \"none\"");
        g.flops_efficiency = r.number("flops_efficiency", 1e-3, 1);
        g.bandwidth_efficiency = r.number("bandwidth_efficiency", 1e-3, 1);
        g.overhead_s = r.duration("overhead").seconds();
        g.min_tokens = r.integer_or("min_tokens", 1, 1, std::int64_t{1} << 40);
        r.finish();
        regimes.push_back(g);
      }
      if (regimes.empty() || !regimes.back().unbounded)
        throw InputError(op.path_of("regimes"),
                         "expected at least one regime, the last with \"max_tokens\": \"none\"");
      // A curve by sequence length: {"_source", "seq_len": [...], `values`: [...]}.
      auto read_curve = [](JsonReader& c, std::string_view values) {
        SeqLenEfficiency e;
        e.seq_len = c.integers("seq_len", 1, std::int64_t{1} << 40);
        e.efficiency = c.numbers(values, 1e-3, 1);
        if (e.seq_len.empty())
          throw InputError(c.path_of("seq_len"), "expected at least one sequence length");
        if (e.efficiency.size() != e.seq_len.size())
          throw InputError(c.path_of(values),
                           fmt::format("expected {} values, one per seq_len", e.seq_len.size()));
        for (std::size_t i = 1; i < e.seq_len.size(); ++i)
          if (e.seq_len[i] <= e.seq_len[i - 1])
            throw InputError(c.path_of("seq_len"), "expected ascending sequence lengths");
        return e;
      };
      std::optional<SeqLenEfficiency> curve;
      if (auto c = op.optional_object("flops_efficiency_by_seq_len")) {
        curve = read_curve(*c, "flops_efficiency");
        c->finish();
      }
      // The bandwidth curve: one object, or a list of curves by query group.
      std::vector<std::pair<std::int64_t, SeqLenEfficiency>> bandwidth_curves;
      constexpr std::string_view kBandwidthKey = "bandwidth_efficiency_by_seq_len";
      if (op.has(kBandwidthKey) && op.raw(kBandwidthKey).is_array()) {
        auto list = op.objects(kBandwidthKey);
        if (list.empty())
          throw InputError(op.path_of(kBandwidthKey), "expected at least one curve");
        for (auto& c : list) {
          const std::int64_t group = c.integer("query_group", 1, 1 << 20);
          if (!bandwidth_curves.empty() && group <= bandwidth_curves.back().first)
            throw InputError(c.path_of("query_group"), "expected ascending query groups");
          bandwidth_curves.emplace_back(group, read_curve(c, "bandwidth_efficiency"));
          c.finish();
        }
      } else if (auto c = op.optional_object(kBandwidthKey)) {
        bandwidth_curves.emplace_back(0, read_curve(*c, "bandwidth_efficiency"));
        c->finish();
      }
      op.finish();
      provider->add(gpu_name, op_name, std::move(regimes));
      if (curve) provider->add_seq_len_efficiency(gpu_name, op_name, std::move(*curve));
      for (auto& [group, c] : bandwidth_curves)
        provider->add_seq_len_bandwidth_efficiency(gpu_name, op_name, std::move(c), group);
    }
    ops.finish();
    gpu.finish();
  }
  gpus.finish();
  root.finish();
  return provider;
}

RooflineProvider::Entry& RooflineProvider::entry(std::string gpu, std::string op) {
  auto& ops = index_[std::move(gpu)];
  auto [it, added] = ops.try_emplace(std::move(op), static_cast<OperatorHandle>(entries_.size()));
  if (added) entries_.emplace_back();
  return entries_[static_cast<std::size_t>(it->second)];
}

const RooflineProvider::Entry* RooflineProvider::find(std::string_view gpu,
                                                      std::string_view op) const {
  auto g = index_.find(gpu);
  if (g == index_.end()) return nullptr;
  auto o = g->second.find(op);
  return o == g->second.end() ? nullptr : &entries_[static_cast<std::size_t>(o->second)];
}

void RooflineProvider::add(std::string gpu, std::string op, std::vector<RooflineRegime> regimes) {
  MLSIM_CHECK(!regimes.empty() && regimes.back().unbounded, "roofline regimes must end unbounded");
  entry(std::move(gpu), std::move(op)).regimes = std::move(regimes);
}

double SeqLenEfficiency::at(std::int64_t len) const {
  MLSIM_CHECK(!seq_len.empty() && seq_len.size() == efficiency.size(), "an empty efficiency curve");
  if (len <= seq_len.front()) return efficiency.front();
  if (len >= seq_len.back()) return efficiency.back();
  const auto hi = static_cast<std::size_t>(std::upper_bound(seq_len.begin(), seq_len.end(), len) -
                                           seq_len.begin());
  const std::size_t lo = hi - 1;
  const double f = std::log(static_cast<double>(len) / static_cast<double>(seq_len[lo])) /
                   std::log(static_cast<double>(seq_len[hi]) / static_cast<double>(seq_len[lo]));
  return efficiency[lo] + f * (efficiency[hi] - efficiency[lo]);
}

void RooflineProvider::add_seq_len_efficiency(std::string gpu, std::string op,
                                              SeqLenEfficiency curve) {
  MLSIM_CHECK(!curve.seq_len.empty() && curve.seq_len.size() == curve.efficiency.size(),
              "an efficiency curve needs one efficiency per sequence length");
  entry(std::move(gpu), std::move(op)).flops_curve = std::move(curve);
}

void RooflineProvider::add_seq_len_bandwidth_efficiency(std::string gpu, std::string op,
                                                        SeqLenEfficiency curve,
                                                        std::int64_t query_group) {
  MLSIM_CHECK(!curve.seq_len.empty() && curve.seq_len.size() == curve.efficiency.size(),
              "an efficiency curve needs one efficiency per sequence length");
  MLSIM_CHECK(query_group >= 0, "a query group is positive (0: every shape)");
  auto& by_group = entry(std::move(gpu), std::move(op)).bandwidth_curves;
  MLSIM_CHECK(
      by_group.empty() || (query_group == 0) == by_group.contains(0),
      "an operator has either one bandwidth curve for every shape or curves by query group");
  by_group[query_group] = std::move(curve);
}

const SeqLenEfficiency* RooflineProvider::seq_len_efficiency(std::string_view gpu,
                                                             std::string_view op) const {
  const Entry* e = find(gpu, op);
  return e && e->flops_curve ? &*e->flops_curve : nullptr;
}

const SeqLenEfficiency* RooflineProvider::seq_len_bandwidth_efficiency(
    std::string_view gpu, std::string_view op, std::int64_t query_group) const {
  const Entry* e = find(gpu, op);
  if (e == nullptr) return nullptr;
  auto c = e->bandwidth_curves.find(query_group);
  return c == e->bandwidth_curves.end() ? nullptr : &c->second;
}

std::optional<double> RooflineProvider::bandwidth_efficiency_at(std::string_view gpu,
                                                                std::string_view op,
                                                                std::int64_t seq_len,
                                                                double query_group) const {
  const Entry* e = find(gpu, op);
  return e ? bandwidth_efficiency_of(*e, seq_len, query_group) : std::nullopt;
}

std::optional<double> RooflineProvider::bandwidth_efficiency_of(const Entry& e,
                                                                std::int64_t seq_len,
                                                                double query_group) {
  const auto& by_group = e.bandwidth_curves;
  if (by_group.empty()) return std::nullopt;
  if (by_group.size() == 1) return by_group.begin()->second.at(seq_len);
  const auto first = by_group.begin();
  const auto last = std::prev(by_group.end());
  if (query_group <= static_cast<double>(first->first)) return first->second.at(seq_len);
  if (query_group >= static_cast<double>(last->first)) return last->second.at(seq_len);
  // The first curve of a larger group, and the one before it.
  auto hi = by_group.upper_bound(static_cast<std::int64_t>(query_group));
  auto lo = std::prev(hi);
  const double e_lo = lo->second.at(seq_len), e_hi = hi->second.at(seq_len);
  const double f = std::log(query_group / static_cast<double>(lo->first)) /
                   std::log(static_cast<double>(hi->first) / static_cast<double>(lo->first));
  return e_lo + f * (e_hi - e_lo);
}

const RooflineRegime* RooflineProvider::regime_of(const Entry& e, std::int64_t tokens) {
  for (const auto& r : e.regimes)
    if (r.unbounded || tokens <= r.max_tokens) return &r;
  return nullptr;
}

const RooflineRegime* RooflineProvider::regime(std::string_view gpu, std::string_view op,
                                               std::int64_t tokens) const {
  const Entry* e = find(gpu, op);
  return e ? regime_of(*e, tokens) : nullptr;
}

OperatorHandle RooflineProvider::resolve(const GpuSpec& gpu, std::string_view op) const {
  auto g = index_.find(gpu.name);
  if (g == index_.end()) return kUnpricedOperator;
  auto o = g->second.find(op);
  return o == g->second.end() ? kUnpricedOperator : o->second;
}

std::optional<double> RooflineProvider::operator_seconds(const OperatorWork& w,
                                                         const GpuSpec& gpu) const {
  const OperatorHandle h = resolve(gpu, w.op);
  if (h == kUnpricedOperator) return std::nullopt;
  return resolved_seconds(h, w, gpu);
}

std::optional<double> RooflineProvider::resolved_seconds(OperatorHandle handle,
                                                         const OperatorWork& w,
                                                         const GpuSpec& gpu) const {
  MLSIM_CHECK(handle >= 0 && static_cast<std::size_t>(handle) < entries_.size(),
              "a roofline operator handle from another provider");
  const Entry& e = entries_[static_cast<std::size_t>(handle)];
  const RooflineRegime* r = regime_of(e, w.tokens);
  if (!r) return std::nullopt;
  if (w.flops <= 0 && w.bytes <= 0) return 0.0;
  const double peak = gpu.peak_for(w.dtype, "compute").flops_per_s;
  const double floor = w.tokens > 0 && w.tokens < r->min_tokens
                           ? static_cast<double>(r->min_tokens) / static_cast<double>(w.tokens)
                           : 1.0;
  double flops_efficiency = r->flops_efficiency;
  double bandwidth_efficiency = r->bandwidth_efficiency;
  if (w.seq_len > 0) {
    if (e.flops_curve) flops_efficiency = e.flops_curve->at(w.seq_len);
    const double group = w.shape.kv_heads > 0 ? static_cast<double>(w.shape.heads) /
                                                    static_cast<double>(w.shape.kv_heads)
                                              : 1.0;
    if (auto b = bandwidth_efficiency_of(e, w.seq_len, group)) bandwidth_efficiency = *b;
  }
  return std::max(floor * w.flops / (flops_efficiency * peak),
                  floor * w.bytes / (bandwidth_efficiency * gpu.hbm_bandwidth.bytes_per_s)) +
         r->overhead_s;
}

bool RooflineProvider::total_for(const GpuSpec& gpu, std::string_view op) const {
  const Entry* e = find(gpu.name, op);
  return e != nullptr && !e->regimes.empty();
}

// ---- profile tables ----

namespace {

// Splits `line` at commas into views of it; "a,,b," gives four cells, the last one empty.
void split_csv_line(std::string_view line, std::vector<std::string_view>& cells) {
  cells.clear();
  std::size_t start = 0;
  for (std::size_t comma; (comma = line.find(',', start)) != std::string_view::npos;
       start = comma + 1)
    cells.push_back(line.substr(start, comma - start));
  cells.push_back(line.substr(start));
}

// The whole cell as a number (std::from_chars: no locale, no copy). `where` is formatted only
// for the error: the tables have tens of thousands of cells, and a run reads them at start-up.
template <typename Where>
double parse_double(std::string_view text, const Where& where) {
  double v = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (error != std::errc{} || end != text.data() + text.size() || text.empty())
    throw InputError(where(), fmt::format("expected a number, got \"{}\"", text));
  return v;
}

}  // namespace

std::unique_ptr<ProfileTableProvider> ProfileTableProvider::load_vidur(
    const std::filesystem::path& dir, const std::map<std::string, std::string>& folders,
    const std::string& where) {
  auto provider = std::make_unique<ProfileTableProvider>();
  std::vector<std::string_view> cells;
  for (const auto& [folder, gpu] : folders) {
    const auto root = dir / folder;
    if (!std::filesystem::is_directory(root))
      throw InputError(where, fmt::format("no profile folder {}", root.string()));
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::recursive_directory_iterator(root))
      if (e.is_regular_file() && e.path().filename() == "mlp.csv") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    if (files.empty()) throw InputError(where, fmt::format("no mlp.csv under {}", root.string()));
    for (const auto& file : files) {
      std::ifstream in(file);
      std::string line;
      std::getline(in, line);
      cells.clear();
      if (!line.empty()) split_csv_line(line, cells);
      const std::vector<std::string> header(cells.begin(), cells.end());
      auto column = [&](const std::string& name) -> std::optional<std::size_t> {
        auto it = std::find(header.begin(), header.end(), name);
        if (it == header.end()) return std::nullopt;
        return static_cast<std::size_t>(it - header.begin());
      };
      auto required = [&](const std::string& name) {
        auto c = column(name);
        if (!c) throw InputError(file.string(), fmt::format("no column \"{}\"", name));
        return *c;
      };
      const auto c_tokens = required("num_tokens"), c_tp = required("num_tensor_parallel_workers"),
                 c_h = required("n_embd"), c_heads = required("n_head"),
                 c_kv = required("n_kv_head"), c_ffn = required("n_expanded_embd");
      // Operators: every "time_stats.<op>.median" column, each with its curve for the shape of
      // the rows being read. Rows of one shape come together, so the map is searched once per
      // shape and operator rather than once per cell.
      struct OpColumn {
        std::string op;
        std::size_t column;
        std::vector<Point>* curve = nullptr;
      };
      std::vector<OpColumn> ops;
      const std::string prefix = "time_stats.", suffix = ".median";
      for (std::size_t i = 0; i < header.size(); ++i) {
        const auto& h = header[i];
        if (h.size() > prefix.size() + suffix.size() && h.starts_with(prefix) &&
            h.ends_with(suffix))
          ops.push_back({h.substr(prefix.size(), h.size() - prefix.size() - suffix.size()), i});
      }
      std::optional<OperatorShape> curves_shape;
      std::size_t row = 1;
      while (std::getline(in, line)) {
        ++row;
        if (line.empty()) continue;
        split_csv_line(line, cells);
        const auto here = [&] { return fmt::format("{}:{}", file.string(), row); };
        if (cells.size() != header.size())
          throw InputError(here(),
                           fmt::format("expected {} cells, got {}", header.size(), cells.size()));
        OperatorShape shape;
        shape.hidden = static_cast<std::int32_t>(parse_double(cells[c_h], here));
        shape.heads = static_cast<std::int32_t>(parse_double(cells[c_heads], here));
        shape.kv_heads = static_cast<std::int32_t>(parse_double(cells[c_kv], here));
        shape.ffn = static_cast<std::int32_t>(parse_double(cells[c_ffn], here));
        shape.tp = static_cast<std::int32_t>(parse_double(cells[c_tp], here));
        const auto tokens = static_cast<std::int64_t>(parse_double(cells[c_tokens], here));
        if (curves_shape != shape) {
          for (auto& o : ops) o.curve = nullptr;
          curves_shape = shape;
        }
        for (auto& o : ops) {
          if (cells[o.column].empty()) continue;
          const double ms = parse_double(cells[o.column], here);
          if (!(ms > 0)) throw InputError(here(), fmt::format("non-positive time for {}", o.op));
          if (!o.curve) o.curve = &provider->curves(gpu, o.op)[shape];
          provider->points_ += add_to_curve(*o.curve, tokens, ms * 1e-3);
        }
      }
    }
  }
  return provider;
}

ProfileTableProvider::Curves& ProfileTableProvider::curves(const std::string& gpu,
                                                           const std::string& op) {
  auto& ops = index_[gpu];
  auto [it, added] = ops.try_emplace(op, static_cast<OperatorHandle>(curves_.size()));
  if (added) curves_.emplace_back();
  return curves_[static_cast<std::size_t>(it->second)];
}

void ProfileTableProvider::add_point(const std::string& gpu, const std::string& op,
                                     const OperatorShape& shape, std::int64_t tokens,
                                     double seconds) {
  points_ += add_to_curve(curves(gpu, op)[shape], tokens, seconds);
}

bool ProfileTableProvider::add_to_curve(std::vector<Point>& curve, std::int64_t tokens,
                                        double seconds) {
  auto it = std::lower_bound(curve.begin(), curve.end(), tokens,
                             [](const Point& p, std::int64_t t) { return p.tokens < t; });
  if (it != curve.end() && it->tokens == tokens) {
    // A repeated measurement (Vidur's tables have some): keep the mean.
    it->seconds = (it->seconds * it->samples + seconds) / (it->samples + 1);
    it->samples += 1;
    return false;
  }
  curve.insert(it, Point{tokens, seconds, 1});
  return true;
}

OperatorHandle ProfileTableProvider::resolve(const GpuSpec& gpu, std::string_view op) const {
  auto g = index_.find(gpu.name);
  if (g == index_.end()) return kUnpricedOperator;
  auto o = g->second.find(op);
  return o == g->second.end() ? kUnpricedOperator : o->second;
}

std::optional<double> ProfileTableProvider::operator_seconds(const OperatorWork& w,
                                                             const GpuSpec& gpu) const {
  const OperatorHandle h = resolve(gpu, w.op);
  if (h == kUnpricedOperator) return std::nullopt;
  return resolved_seconds(h, w, gpu);
}

std::optional<double> ProfileTableProvider::resolved_seconds(OperatorHandle handle,
                                                             const OperatorWork& w,
                                                             const GpuSpec& /*gpu*/) const {
  MLSIM_CHECK(handle >= 0 && static_cast<std::size_t>(handle) < curves_.size(),
              "a profile-table operator handle from another provider");
  const Curves& by_shape = curves_[static_cast<std::size_t>(handle)];
  auto c = by_shape.find(w.shape);
  if (c == by_shape.end()) return std::nullopt;
  const auto& curve = c->second;
  if (curve.empty() || w.tokens < curve.front().tokens || w.tokens > curve.back().tokens)
    return std::nullopt;
  auto hi = std::lower_bound(curve.begin(), curve.end(), w.tokens,
                             [](const Point& p, std::int64_t t) { return p.tokens < t; });
  if (hi->tokens == w.tokens) return hi->seconds;
  auto lo = std::prev(hi);
  const double f =
      static_cast<double>(w.tokens - lo->tokens) / static_cast<double>(hi->tokens - lo->tokens);
  return lo->seconds + f * (hi->seconds - lo->seconds);
}

// ---- the model ----

void CostModel::add(std::unique_ptr<CostProvider> provider) {
  providers_.push_back(std::move(provider));
}

std::optional<double> CostModel::direct(const OperatorWork& w, const GpuSpec& gpu) const {
  for (const auto& p : providers_)
    if (auto s = p->operator_seconds(w, gpu)) return s;
  return std::nullopt;
}

double CostModel::operator_seconds(const OperatorWork& w, const GpuSpec& gpu) const {
  if (auto s = direct(w, gpu)) return *s;
  if (scale_from_ && scale_from_ != &gpu) {
    if (auto s = direct(w, *scale_from_)) {
      const double from = ideal_roofline_seconds(w.flops, w.bytes, w.dtype, *scale_from_);
      const double to = ideal_roofline_seconds(w.flops, w.bytes, w.dtype, gpu);
      return from > 0 ? *s * to / from : *s;
    }
  }
  MLSIM_CHECK(false, fmt::format("no cost provider prices operator \"{}\" on {}", w.op, gpu.name));
}

CostModel::BoundOperator CostModel::bind(std::string_view op, const GpuSpec& gpu) const {
  BoundOperator b;
  b.gpu_ = &gpu;
  b.scale_from_ = scale_from_;
  for (const auto& p : providers_) b.direct_.push_back(p->resolve(gpu, op));
  if (scale_from_ && scale_from_ != &gpu)
    for (const auto& p : providers_) b.scaled_.push_back(p->resolve(*scale_from_, op));
  return b;
}

std::optional<double> CostModel::direct(std::span<const OperatorHandle> handles,
                                        const OperatorWork& w, const GpuSpec& gpu) const {
  for (std::size_t i = 0; i < handles.size(); ++i)
    if (handles[i] != kUnpricedOperator)
      if (auto s = providers_[i]->resolved_seconds(handles[i], w, gpu)) return s;
  return std::nullopt;
}

double CostModel::operator_seconds(const BoundOperator& bound, const OperatorWork& w) const {
  MLSIM_CHECK(bound.gpu_ != nullptr && bound.direct_.size() == providers_.size() &&
                  bound.scale_from_ == scale_from_,
              "an operator bound before the cost model's providers or scale_from changed");
  const GpuSpec& gpu = *bound.gpu_;
  if (auto s = direct(bound.direct_, w, gpu)) return *s;
  if (!bound.scaled_.empty()) {
    if (auto s = direct(bound.scaled_, w, *scale_from_)) {
      const double from = ideal_roofline_seconds(w.flops, w.bytes, w.dtype, *scale_from_);
      const double to = ideal_roofline_seconds(w.flops, w.bytes, w.dtype, gpu);
      return from > 0 ? *s * to / from : *s;
    }
  }
  MLSIM_CHECK(false, fmt::format("no cost provider prices operator \"{}\" on {}", w.op, gpu.name));
}

std::string CostModel::provenance(const OperatorWork& w, const GpuSpec& gpu) const {
  for (const auto& p : providers_)
    if (p->operator_seconds(w, gpu)) return std::string(p->name());
  if (scale_from_ && direct(w, *scale_from_)) return "scaled from " + scale_from_->name;
  return "none";
}

double CostModel::seconds(const Work& work, const GpuSpec& gpu) const {
  if (const auto* f = std::get_if<FixedWork>(&work)) return f->duration.seconds();
  if (const auto* p = std::get_if<ProfiledWork>(&work)) {
    MLSIM_CHECK(p->measured_on != nullptr, "profiled work without the GPU it was measured on");
    if (p->measured_on->name == gpu.name) return p->seconds;
    return scale_profiled_time(p->seconds, p->bytes, p->dtype, *p->measured_on, gpu, "", "");
  }
  return operator_seconds(std::get<OperatorWork>(work), gpu);
}

void CostModel::check_operator(std::string_view op, const GpuSpec& gpu,
                               const std::string& where) const {
  for (const auto& p : providers_)
    if (p->total_for(gpu, op)) return;
  if (scale_from_)
    for (const auto& p : providers_)
      if (p->total_for(*scale_from_, op)) return;
  throw InputError(where,
                   fmt::format("no cost provider prices operator \"{}\" on GPU \"{}\" (add its "
                               "roofline calibration to compute.roofline, or set "
                               "compute.scale_from to a calibrated GPU)",
                               op, gpu.name));
}

}  // namespace mlsim
