#pragma once
// A scenario's variants side by side: every metric of every variant and its ratio to the
// baseline variant's, as a terminal table, compare.json and a tidy compare.csv.
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim_core/experiments/run_request.hpp"

namespace mlsim {

struct Comparison {
  std::filesystem::path scenario;
  std::string baseline;
  std::vector<std::string> variants;           // in the scenario's order, baseline included
  std::map<std::string, RunOutcome> outcomes;  // by variant
  std::vector<std::string> overrides;          // --set arguments applied to every variant

  std::vector<std::string> metric_names() const;  // union over variants, sorted
  // value(variant) / value(baseline); NaN when either is missing or the baseline is 0.
  double ratio(const std::string& variant, const std::string& metric) const;
};

std::string comparison_table(const Comparison& c);
// {"scenario", "baseline", "variants", "overrides", "metrics": {metric: {variant: {"value",
// "ratio"}}}}; a missing value or ratio is null.
nlohmann::json comparison_json(const Comparison& c);
// One row per (metric, variant): metric,variant,value,ratio_to_baseline.
std::string comparison_csv(const Comparison& c);

}  // namespace mlsim
