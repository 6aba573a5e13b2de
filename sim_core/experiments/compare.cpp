#include "sim_core/experiments/compare.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace mlsim {
namespace {

const double* find_value(const Comparison& c, const std::string& variant,
                         const std::string& metric) {
  const auto o = c.outcomes.find(variant);
  if (o == c.outcomes.end()) return nullptr;
  const auto m = o->second.metrics.find(metric);
  return m == o->second.metrics.end() ? nullptr : &m->second;
}

std::string number(double v) {
  return fmt::format("{:.6g}", v);
}

nlohmann::json number_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json();
}

}  // namespace

std::vector<std::string> Comparison::metric_names() const {
  std::set<std::string> names;
  for (const auto& [v, o] : outcomes)
    for (const auto& [m, x] : o.metrics) names.insert(m);
  return {names.begin(), names.end()};
}

double Comparison::ratio(const std::string& variant, const std::string& metric) const {
  const double* v = find_value(*this, variant, metric);
  const double* b = find_value(*this, baseline, metric);
  if (!v || !b || *b == 0) return std::nan("");
  return *v / *b;
}

std::string comparison_table(const Comparison& c) {
  // Column 0: metric; then per variant its value and, for non-baseline variants, "(1.23x)".
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header{"metric"};
  for (const auto& v : c.variants) header.push_back(v == c.baseline ? v + " (baseline)" : v);
  rows.push_back(header);
  for (const auto& m : c.metric_names()) {
    std::vector<std::string> row{m};
    for (const auto& v : c.variants) {
      const double* x = find_value(c, v, m);
      std::string cell = x ? number(*x) : "-";
      const double r = c.ratio(v, m);
      if (v != c.baseline && std::isfinite(r)) cell += fmt::format(" ({:.3g}x)", r);
      row.push_back(cell);
    }
    rows.push_back(row);
  }
  std::vector<std::size_t> width(header.size(), 0);
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  std::string out;
  for (std::size_t k = 0; k < rows.size(); ++k) {
    for (std::size_t i = 0; i < rows[k].size(); ++i) {
      if (i) out += "  ";
      out += i == 0 ? fmt::format("{:<{}}", rows[k][i], width[i])
                    : fmt::format("{:>{}}", rows[k][i], width[i]);
    }
    out += "\n";
    if (k == 0) {
      std::size_t total = 0;
      for (auto w : width) total += w + 2;
      out += std::string(total - 2, '-') + "\n";
    }
  }
  return out;
}

nlohmann::json comparison_json(const Comparison& c) {
  nlohmann::json j;
  j["scenario"] = c.scenario.string();
  j["baseline"] = c.baseline;
  j["variants"] = c.variants;
  j["overrides"] = c.overrides;
  nlohmann::json metrics = nlohmann::json::object();
  for (const auto& m : c.metric_names()) {
    nlohmann::json per = nlohmann::json::object();
    for (const auto& v : c.variants) {
      const double* x = find_value(c, v, m);
      per[v] = {{"value", x ? number_or_null(*x) : nlohmann::json()},
                {"ratio", number_or_null(c.ratio(v, m))}};
    }
    metrics[m] = std::move(per);
  }
  j["metrics"] = std::move(metrics);
  return j;
}

std::string comparison_csv(const Comparison& c) {
  std::string out = "metric,variant,value,ratio_to_baseline\n";
  for (const auto& m : c.metric_names()) {
    for (const auto& v : c.variants) {
      const double* x = find_value(c, v, m);
      const double r = c.ratio(v, m);
      out += fmt::format("{},{},{},{}\n", m, v, x ? fmt::format("{}", *x) : "",
                         std::isfinite(r) ? fmt::format("{}", r) : "");
    }
  }
  return out;
}

}  // namespace mlsim
