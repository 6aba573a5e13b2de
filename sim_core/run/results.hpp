#pragma once
// What a run produces: scalar metrics, time series and free-form JSON details. Models fill a
// Results; only the CLI's writer (results_writer.hpp) touches files, atomically.
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim_core/base/stats.hpp"

namespace mlsim {

class Results {
 public:
  // Metric names carry their unit as a suffix: "allreduce_time_s", "peak_memory_bytes",
  // "throughput_tokens_per_s". Keys are kept sorted so output is deterministic.
  void set_metric(const std::string& name, double value) { metrics_[name] = value; }
  // Adds mean/p50/p90/p99/max of a distribution as "<prefix>_mean<suffix>" etc.
  void set_summary(const std::string& prefix, const Summary& s, const std::string& unit_suffix);
  const std::map<std::string, double>& metrics() const { return metrics_; }

  // Each series becomes "<name>.csv" in the output folder.
  void add_series(TimeSeries s) { series_.push_back(std::move(s)); }
  const std::vector<TimeSeries>& series() const { return series_; }

  // Model-specific structured output (per-job tables, CDF points), kept in summary.json.
  nlohmann::json& details() { return details_; }
  const nlohmann::json& details() const { return details_; }

 private:
  std::map<std::string, double> metrics_;
  std::vector<TimeSeries> series_;
  nlohmann::json details_ = nlohmann::json::object();
};

inline void Results::set_summary(const std::string& prefix, const Summary& s,
                                 const std::string& unit_suffix) {
  set_metric(prefix + "_count", static_cast<double>(s.count));
  set_metric(prefix + "_mean" + unit_suffix, s.mean);
  set_metric(prefix + "_p50" + unit_suffix, s.p50);
  set_metric(prefix + "_p90" + unit_suffix, s.p90);
  set_metric(prefix + "_p99" + unit_suffix, s.p99);
  set_metric(prefix + "_max" + unit_suffix, s.max);
}

}  // namespace mlsim
