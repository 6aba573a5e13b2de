#pragma once
// Time-weighted averages of a piecewise-constant quantity over consecutive fixed intervals
// [k w, (k+1) w): the aggregator occupancy time series. Exact (areas, not samples) and free of
// engine events: the quantity's owner reports each change, and intervals without a change get
// the value that held throughout.
#include <cstdint>
#include <vector>

#include "sim_core/base/error.hpp"
#include "sim_core/base/time.hpp"

namespace mlsim {

class IntervalAverage {
 public:
  explicit IntervalAverage(Time width) : width_(width) {
    MLSIM_CHECK(width > Time::zero(), "interval width must be positive");
  }

  // The quantity changes to `value` at `now` (times never decrease).
  void set(Time now, double value) {
    advance(now);
    value_ = value;
  }
  // Averages of every interval that started before `end`; the last one covers [k w, end).
  std::vector<double> averages(Time end) const {
    IntervalAverage copy = *this;
    copy.advance(end);
    std::vector<double> out = copy.done_;
    const std::int64_t covered = end.count_ns() - copy.bucket_start_ns();
    if (covered > 0) out.push_back(copy.area_ / static_cast<double>(covered));
    return out;
  }
  Time width() const { return width_; }

 private:
  std::int64_t bucket_start_ns() const {
    return static_cast<std::int64_t>(done_.size()) * width_.count_ns();
  }
  void advance(Time now) {
    std::int64_t t = last_ns_;
    const std::int64_t to = now.count_ns();
    MLSIM_CHECK(to >= t, "interval average fed backwards in time");
    while (true) {
      const std::int64_t bucket_end = bucket_start_ns() + width_.count_ns();
      if (to < bucket_end) break;
      area_ += value_ * static_cast<double>(bucket_end - t);
      done_.push_back(area_ / static_cast<double>(width_.count_ns()));
      area_ = 0;
      t = bucket_end;
    }
    area_ += value_ * static_cast<double>(to - t);
    last_ns_ = to;
  }

  Time width_;
  std::int64_t last_ns_ = 0;
  double value_ = 0, area_ = 0;
  std::vector<double> done_;
};

}  // namespace mlsim
