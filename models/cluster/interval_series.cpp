#include "models/cluster/interval_series.hpp"

#include <algorithm>

#include "sim_core/base/error.hpp"

namespace mlsim::cluster {

IntervalSeries::IntervalSeries(std::string name, std::vector<std::string> columns, Time interval)
    : name_(std::move(name)),
      columns_(std::move(columns)),
      interval_(interval),
      current_(columns_.size(), 0.0) {
  MLSIM_CHECK(interval_ > Time::zero(), "series interval must be positive");
}

void IntervalSeries::advance(Time now) {
  MLSIM_CHECK(now >= last_, "series time goes backwards");
  while (last_ < now) {
    const auto bin = static_cast<std::size_t>(last_.count_ns() / interval_.count_ns());
    const Time bin_end = interval_ * static_cast<std::int64_t>(bin + 1);
    const Time upto = std::min(now, bin_end);
    if (area_.size() <= bin) area_.resize(bin + 1, std::vector<double>(columns_.size(), 0.0));
    const double dt = (upto - last_).seconds();
    for (std::size_t c = 0; c < columns_.size(); ++c) area_[bin][c] += current_[c] * dt;
    last_ = upto;
  }
}

void IntervalSeries::set(Time now, std::size_t c, double value) {
  advance(now);
  current_[c] = value;
}

TimeSeries IntervalSeries::finish(Time end) {
  advance(end);
  TimeSeries s{name_, columns_, {}};
  for (std::size_t b = 0; b < area_.size(); ++b) {
    const Time begin = interval_ * static_cast<std::int64_t>(b);
    const double width = (std::min(end, begin + interval_) - begin).seconds();
    std::vector<double> row(columns_.size(), 0.0);
    if (width > 0)
      for (std::size_t c = 0; c < columns_.size(); ++c) row[c] = area_[b][c] / width;
    s.add(begin, std::move(row));
  }
  return s;
}

}  // namespace mlsim::cluster
