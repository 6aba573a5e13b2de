#pragma once
// Exact per-interval averages of piecewise-constant quantities (allocated GPUs, queue length):
// each change adds the elapsed area to the bins it spans, so memory grows with simulated time
// divided by the interval, never with the number of jobs.
#include <string>
#include <vector>

#include "sim_core/base/stats.hpp"

namespace mlsim::cluster {

class IntervalSeries {
 public:
  IntervalSeries(std::string name, std::vector<std::string> columns, Time interval);

  // Column `c` takes `value` from `now` on.
  void set(Time now, std::size_t c, double value);
  // Closes the open bin at `end` and returns the series (the last bin averages over its part).
  TimeSeries finish(Time end);
  Time last_change() const { return last_; }

 private:
  void advance(Time now);  // adds the area of the current values up to `now`
  std::string name_;
  std::vector<std::string> columns_;
  Time interval_;
  Time last_ = Time::zero();
  std::vector<double> current_;
  std::vector<std::vector<double>> area_;  // per bin, per column: value x seconds
};

}  // namespace mlsim::cluster
