#include "sim_core/base/stats.hpp"

#include <algorithm>
#include <cmath>

#include "sim_core/base/error.hpp"

namespace mlsim {

void ExactQuantiles::add(double v) {
  if (!values_.empty() && v < values_.back()) sorted_ = false;
  values_.push_back(v);
  sum_ += v;
}

const std::vector<double>& ExactQuantiles::sorted() const {
  if (!sorted_) {
    std::sort(values_.begin(), values_.end());
    sorted_ = true;
  }
  return values_;
}

double ExactQuantiles::quantile(double q) const {
  if (values_.empty()) return 0;
  const auto& v = sorted();
  q = std::clamp(q, 0.0, 1.0);
  auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  if (rank == 0) rank = 1;
  return v[rank - 1];
}

Summary ExactQuantiles::summary() const {
  Summary s;
  s.count = count();
  if (!s.count) return s;
  const auto& v = sorted();
  s.mean = mean();
  s.min = v.front();
  s.max = v.back();
  s.p50 = quantile(0.5);
  s.p90 = quantile(0.9);
  s.p99 = quantile(0.99);
  return s;
}

LogHistogram::LogHistogram(int precision_bits) : bits_(precision_bits) {
  MLSIM_CHECK(bits_ >= 1 && bits_ <= 20, "LogHistogram precision out of range");
}

int LogHistogram::bucket_of(double v) const {
  if (v <= 0) return INT32_MIN;
  int e = 0;
  double m = std::frexp(v, &e);  // v = m * 2^e, m in [0.5, 1)
  int sub = static_cast<int>((m - 0.5) * 2 * (1 << bits_));
  return e * (1 << bits_) + sub;
}

double LogHistogram::bucket_mid(int b) const {
  if (b == INT32_MIN) return 0;
  const int per = 1 << bits_;
  int e = b >= 0 ? b / per : -((-b + per - 1) / per);
  int sub = b - e * per;
  double lo = std::ldexp(0.5 + 0.5 * sub / per, e);
  double hi = std::ldexp(0.5 + 0.5 * (sub + 1) / per, e);
  return 0.5 * (lo + hi);
}

double LogHistogram::relative_error() const {
  return 1.0 / (1 << bits_);
}

void LogHistogram::add(double v, std::uint64_t times) {
  MLSIM_CHECK(v >= 0 && std::isfinite(v), "LogHistogram takes finite values >= 0");
  buckets_[bucket_of(v)] += times;
  if (count_ == 0) min_ = max_ = v;
  min_ = std::min(min_, v);
  max_ = std::max(max_, v);
  count_ += times;
  sum_ += v * static_cast<double>(times);
}

double LogHistogram::quantile(double q) const {
  if (!count_) return 0;
  auto rank = static_cast<std::uint64_t>(std::ceil(std::clamp(q, 0.0, 1.0) * count_));
  if (rank == 0) rank = 1;
  std::uint64_t seen = 0;
  for (const auto& [b, n] : buckets_) {
    seen += n;
    if (seen >= rank) return std::clamp(bucket_mid(b), min_, max_);
  }
  return max_;
}

Summary LogHistogram::summary() const {
  Summary s;
  s.count = count_;
  if (!count_) return s;
  s.mean = mean();
  s.min = min_;
  s.max = max_;
  s.p50 = quantile(0.5);
  s.p90 = quantile(0.9);
  s.p99 = quantile(0.99);
  return s;
}

void TimeAverage::set(Time now, double value) {
  if (!started_) {
    started_ = true;
    start_ = last_ = now;
  }
  area_ += value_ * (now - last_).seconds();
  last_ = now;
  value_ = value;
  peak_ = std::max(peak_, value);
}

double TimeAverage::average(Time now) const {
  if (!started_) return 0;
  const double span = (now - start_).seconds();
  if (span <= 0) return value_;
  return (area_ + value_ * (now - last_).seconds()) / span;
}

}  // namespace mlsim
