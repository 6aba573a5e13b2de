#pragma once
// Statistics: exact quantiles (values kept; for per-request metrics of bounded runs), a
// log-bucketed histogram with bounded memory and a guaranteed relative error (HDR-style, for
// per-packet or per-event metrics of arbitrarily long runs), and time series for CSV output.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim_core/base/time.hpp"

namespace mlsim {

struct Summary {
  std::uint64_t count = 0;
  double mean = 0, min = 0, max = 0, p50 = 0, p90 = 0, p99 = 0;
};

class ExactQuantiles {
 public:
  void add(double v);
  std::uint64_t count() const { return values_.size(); }
  double mean() const { return values_.empty() ? 0 : sum_ / static_cast<double>(values_.size()); }
  // Nearest-rank quantile of q in [0, 1]; 0 when empty.
  double quantile(double q) const;
  Summary summary() const;
  // The sorted values, for CDF output.
  const std::vector<double>& sorted() const;

 private:
  mutable std::vector<double> values_;
  mutable bool sorted_ = true;
  double sum_ = 0;
};

// Values >= 0 in buckets whose width is at most value * 2^-precision_bits; memory grows with the
// logarithm of the value range, not with the number of values.
class LogHistogram {
 public:
  explicit LogHistogram(int precision_bits = 7);
  void add(double v, std::uint64_t times = 1);
  std::uint64_t count() const { return count_; }
  double mean() const { return count_ ? sum_ / static_cast<double>(count_) : 0; }
  double quantile(double q) const;
  Summary summary() const;
  double relative_error() const;

 private:
  int bucket_of(double v) const;
  double bucket_mid(int b) const;
  int bits_;
  std::map<int, std::uint64_t> buckets_;
  std::uint64_t count_ = 0;
  double sum_ = 0, min_ = 0, max_ = 0;
};

// A named series of (time, value) samples, written as CSV by the results writer.
struct TimeSeries {
  std::string name;
  std::vector<std::string> columns;  // value column names; the time column is always first
  std::vector<std::pair<Time, std::vector<double>>> rows;
  void add(Time t, std::vector<double> values) { rows.emplace_back(t, std::move(values)); }
};

// Time-weighted average of a piecewise-constant quantity (queue length, memory in use).
class TimeAverage {
 public:
  void set(Time now, double value);
  double average(Time now) const;
  double peak() const { return peak_; }
  double current() const { return value_; }

 private:
  Time last_ = Time::zero();
  Time start_ = Time::zero();
  bool started_ = false;
  double value_ = 0, area_ = 0, peak_ = 0;
};

}  // namespace mlsim
