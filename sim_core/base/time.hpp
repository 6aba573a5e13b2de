#pragma once
// Simulated time: a strong type over int64 nanoseconds.
// Integer time keeps event ordering exact (no epsilon comparisons as with SimGrid's double clock)
// and 292 years of range fits year-long cluster traces.
#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>
#include <string>

namespace mlsim {

class Time {
 public:
  constexpr Time() = default;
  static constexpr Time ns(std::int64_t v) { return Time(v); }
  static constexpr Time us(std::int64_t v) { return Time(v * 1'000); }
  static constexpr Time ms(std::int64_t v) { return Time(v * 1'000'000); }
  static constexpr Time s(std::int64_t v) { return Time(v * 1'000'000'000); }
  // Rounds to the nearest nanosecond; use only where a double is the natural result
  // (e.g. bytes / rate), never for accumulating time.
  static Time from_seconds(double seconds) {
    return Time(static_cast<std::int64_t>(std::llround(seconds * 1e9)));
  }
  // Rounds up: a transfer or computation is finished only once all of it is done.
  static Time from_seconds_ceil(double seconds) {
    return Time(static_cast<std::int64_t>(std::ceil(seconds * 1e9 - 1e-6)));
  }
  static constexpr Time zero() { return Time(0); }
  static constexpr Time max() { return Time(std::numeric_limits<std::int64_t>::max()); }

  constexpr std::int64_t count_ns() const { return ns_; }
  constexpr double seconds() const { return static_cast<double>(ns_) * 1e-9; }

  constexpr auto operator<=>(const Time&) const = default;
  constexpr Time operator+(Time o) const { return Time(ns_ + o.ns_); }
  constexpr Time operator-(Time o) const { return Time(ns_ - o.ns_); }
  constexpr Time& operator+=(Time o) {
    ns_ += o.ns_;
    return *this;
  }
  constexpr Time& operator-=(Time o) {
    ns_ -= o.ns_;
    return *this;
  }
  constexpr Time operator*(std::int64_t k) const { return Time(ns_ * k); }

 private:
  constexpr explicit Time(std::int64_t v) : ns_(v) {}
  std::int64_t ns_ = 0;
};

// Human-readable form with an adaptive unit ("1.5us", "2.000s"), for logs and tables.
std::string to_string(Time t);

}  // namespace mlsim
