#pragma once
// Simulated time: a strong type over int64 nanoseconds.
// Integer time keeps event ordering exact (no epsilon comparisons as with SimGrid's double clock)
// and 292 years of range fits year-long cluster traces.
//
// Arithmetic is checked: a sum, difference, product or conversion that would leave the int64
// range throws ClockOverflow (error.hpp) instead of wrapping around to a time in the past. The
// scenario reader bounds every duration, size and rate it accepts (json_reader.hpp) so that
// ordinary inputs stay far from the limit; the check catches what a bound cannot see, such as a
// product of two accepted values.
#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>
#include <string>

namespace mlsim {

namespace detail {
// Out of line so the checks below stay a single predictable branch in the engine's hot path.
[[noreturn]] void throw_clock_overflow(const char* operation, double nanoseconds);
}  // namespace detail

class Time {
 public:
  constexpr Time() = default;
  static constexpr Time ns(std::int64_t v) { return Time(v); }
  static constexpr Time us(std::int64_t v) { return Time(scaled(v, 1'000, "Time::us")); }
  static constexpr Time ms(std::int64_t v) { return Time(scaled(v, 1'000'000, "Time::ms")); }
  static constexpr Time s(std::int64_t v) { return Time(scaled(v, 1'000'000'000, "Time::s")); }
  // Rounds to the nearest nanosecond; use only where a double is the natural result
  // (e.g. bytes / rate), never for accumulating time.
  static Time from_seconds(double seconds) {
    return Time(checked_ns(std::round(seconds * 1e9), "from_seconds"));
  }
  // Rounds up: a transfer or computation is finished only once all of it is done.
  static Time from_seconds_ceil(double seconds) {
    // Truncate, then step up when a fraction was cut off: cheaper than std::ceil, which GCC
    // expands to a long SSE2 sequence (the flow backend calls this once per rate change).
    const double ns = seconds * 1e9 - 1e-6;
    std::int64_t whole = checked_ns(ns, "from_seconds_ceil");
    if (static_cast<double>(whole) < ns) ++whole;  // below 2^63 by at least 1024: cannot wrap
    return Time(whole);
  }
  static constexpr Time zero() { return Time(0); }
  static constexpr Time max() { return Time(std::numeric_limits<std::int64_t>::max()); }

  constexpr std::int64_t count_ns() const { return ns_; }
  constexpr double seconds() const { return static_cast<double>(ns_) * 1e-9; }

  constexpr auto operator<=>(const Time&) const = default;
  constexpr Time operator+(Time o) const {
    std::int64_t r = 0;
    if (__builtin_add_overflow(ns_, o.ns_, &r)) [[unlikely]]
      detail::throw_clock_overflow("a sum of times", static_cast<double>(ns_) + o.ns_);
    return Time(r);
  }
  constexpr Time operator-(Time o) const {
    std::int64_t r = 0;
    if (__builtin_sub_overflow(ns_, o.ns_, &r)) [[unlikely]]
      detail::throw_clock_overflow("a difference of times", static_cast<double>(ns_) - o.ns_);
    return Time(r);
  }
  constexpr Time& operator+=(Time o) { return *this = *this + o; }
  constexpr Time& operator-=(Time o) { return *this = *this - o; }
  constexpr Time operator*(std::int64_t k) const { return Time(scaled(ns_, k, "a time times")); }

 private:
  constexpr explicit Time(std::int64_t v) : ns_(v) {}
  static constexpr std::int64_t scaled(std::int64_t v, std::int64_t k, const char* what) {
    std::int64_t r = 0;
    if (__builtin_mul_overflow(v, k, &r)) [[unlikely]]
      detail::throw_clock_overflow(what, static_cast<double>(v) * static_cast<double>(k));
    return r;
  }
  // A rounded nanosecond count as int64; NaN or out of range throws. 2^63 is exact in double,
  // and every double below it converts without overflow.
  static std::int64_t checked_ns(double ns, const char* what) {
    if (!(ns < 0x1p63 && ns >= -0x1p63)) [[unlikely]]
      detail::throw_clock_overflow(what, ns);
    return static_cast<std::int64_t>(ns);
  }
  std::int64_t ns_ = 0;
};

// Human-readable form with an adaptive unit ("1.5us", "2.000s"), for logs and tables.
std::string to_string(Time t);

}  // namespace mlsim
