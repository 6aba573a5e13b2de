#include "sim_core/base/units.hpp"

#include <fmt/format.h>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "sim_core/base/error.hpp"

namespace mlsim {
namespace {

// A unit scales the number by 10^pow10 * 2^pow2 / divisor.
struct Unit {
  std::string_view name;
  int pow10;
  int pow2;
  int divisor;
};

constexpr std::array kByteUnits{
    Unit{"B", 0, 0, 1},    Unit{"KB", 3, 0, 1},   Unit{"MB", 6, 0, 1},   Unit{"GB", 9, 0, 1},
    Unit{"TB", 12, 0, 1},  Unit{"PB", 15, 0, 1},  Unit{"KiB", 0, 10, 1}, Unit{"MiB", 0, 20, 1},
    Unit{"GiB", 0, 30, 1}, Unit{"TiB", 0, 40, 1},
};
constexpr std::array kBandwidthUnits{
    Unit{"bps", 0, 0, 8},    Unit{"Kbps", 3, 0, 8},   Unit{"Mbps", 6, 0, 8},
    Unit{"Gbps", 9, 0, 8},   Unit{"Tbps", 12, 0, 8},  Unit{"B/s", 0, 0, 1},
    Unit{"KB/s", 3, 0, 1},   Unit{"MB/s", 6, 0, 1},   Unit{"GB/s", 9, 0, 1},
    Unit{"TB/s", 12, 0, 1},  Unit{"KiB/s", 0, 10, 1}, Unit{"MiB/s", 0, 20, 1},
    Unit{"GiB/s", 0, 30, 1},
};
// Time units are relative to nanoseconds.
constexpr std::array kTimeUnits{
    Unit{"ns", 0, 0, 1}, Unit{"us", 3, 0, 1},  Unit{"ms", 6, 0, 1},
    Unit{"s", 9, 0, 1},  Unit{"min", 9, 0, 1}, Unit{"h", 9, 0, 1},
};
constexpr std::array kFlopUnits{
    Unit{"FLOPS", 0, 0, 1},  Unit{"KFLOPS", 3, 0, 1},  Unit{"MFLOPS", 6, 0, 1},
    Unit{"GFLOPS", 9, 0, 1}, Unit{"TFLOPS", 12, 0, 1}, Unit{"PFLOPS", 15, 0, 1},
};

template <std::size_t N>
std::string unit_list(const std::array<Unit, N>& units) {
  std::string out;
  for (const auto& u : units) {
    if (!out.empty()) out += ", ";
    out += u.name;
  }
  return out;
}

// The decimal number split into digits and a power of ten: "12.5e3" -> digits "125", exp10 2.
struct Decimal {
  std::string digits;
  int exp10 = 0;
  bool negative = false;
};

struct Split {
  Decimal number;
  std::string_view unit;
};

std::optional<Split> split_quantity(std::string_view s) {
  Split out;
  std::size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) out.number.negative = s[i++] == '-';
  bool any = false;
  bool dot = false;
  int frac = 0;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      any = true;
      if (!(out.number.digits.empty() && c == '0')) out.number.digits += c;
      if (dot) ++frac;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (!any) return std::nullopt;
  int exp = 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E') && i + 1 < s.size() &&
      (std::isdigit(static_cast<unsigned char>(s[i + 1])) || s[i + 1] == '-' || s[i + 1] == '+')) {
    std::size_t j = i + 1;
    bool eneg = false;
    if (s[j] == '-' || s[j] == '+') eneg = s[j++] == '-';
    if (j >= s.size() || !std::isdigit(static_cast<unsigned char>(s[j]))) return std::nullopt;
    while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) {
      exp = exp * 10 + (s[j] - '0');
      if (exp > 400) return std::nullopt;
      ++j;
    }
    if (eneg) exp = -exp;
    i = j;
  }
  while (i < s.size() && s[i] == ' ') ++i;
  std::size_t end = s.size();
  while (end > i && s[end - 1] == ' ') --end;
  out.unit = s.substr(i, end - i);
  out.number.exp10 = exp - frac;
  if (out.number.digits.empty()) out.number.digits.push_back('0');
  return out;
}

template <std::size_t N>
std::pair<Decimal, Unit> parse_with(std::string_view text, const std::array<Unit, N>& units,
                                    const char* what, const std::string& where) {
  auto bad = [&](const std::string& why) {
    return InputError(
        where, fmt::format("expected {} such as \"{}{}\" (units: {}), got \"{}\"{}", what, "10",
                           units[units.size() > 3 ? 3 : 0].name, unit_list(units), text, why));
  };
  auto split = split_quantity(text);
  if (!split) throw bad("");
  for (const auto& u : units) {
    if (u.name == split->unit) {
      if (split->number.negative && split->number.digits != "0")
        throw bad(": must not be negative");
      return {split->number, u};
    }
  }
  throw bad(split->unit.empty() ? ": the unit is missing" : ": unknown unit");
}

// Exact integer value of digits * 10^exp10 * 2^pow2 / divisor, or an error when it is not whole or
// does not fit in int64.
std::int64_t exact_integer(const Decimal& d, const Unit& u, const char* what, std::string_view text,
                           const std::string& where) {
  using i128 = __int128;
  const i128 limit = static_cast<i128>(INT64_MAX);
  if (d.digits.size() > 30)
    throw InputError(where, fmt::format("{} \"{}\" is too large", what, text));
  i128 num = 0;
  for (char c : d.digits) num = num * 10 + (c - '0');
  int e10 = d.exp10 + u.pow10;
  i128 den = u.divisor;
  for (int k = 0; k < u.pow2; ++k) {
    num *= 2;
    if (num > limit * 1000)
      throw InputError(where, fmt::format("{} \"{}\" is too large", what, text));
  }
  for (; e10 > 0; --e10) {
    num *= 10;
    if (num > limit * 1000)
      throw InputError(where, fmt::format("{} \"{}\" is too large", what, text));
  }
  for (; e10 < 0; ++e10) {
    den *= 10;
    if (den > limit)
      throw InputError(where, fmt::format("{} \"{}\" is not a whole number", what, text));
  }
  if (num % den != 0)
    throw InputError(where,
                     fmt::format("{} \"{}\" is not a whole number of {}", what, text,
                                 std::string_view(what) == "a duration" ? "nanoseconds" : "bytes"));
  i128 v = num / den;
  if (v > limit) throw InputError(where, fmt::format("{} \"{}\" is too large", what, text));
  return static_cast<std::int64_t>(v);
}

// Correctly rounded double: the unit's power of ten is folded into the decimal exponent before
// strtod, and the power-of-two factors are exact in binary.
double exact_double(const Decimal& d, const Unit& u) {
  std::string s = d.digits + "e" + std::to_string(d.exp10 + u.pow10);
  double v = std::strtod(s.c_str(), nullptr);
  v = std::ldexp(v, u.pow2);
  return v / u.divisor;
}

}  // namespace

Bytes parse_bytes(std::string_view text, const std::string& where) {
  auto [d, u] = parse_with(text, kByteUnits, "a size", where);
  return Bytes{exact_integer(d, u, "a size", text, where)};
}

Bandwidth parse_bandwidth(std::string_view text, const std::string& where) {
  auto [d, u] = parse_with(text, kBandwidthUnits, "a bandwidth", where);
  double v = exact_double(d, u);
  if (!std::isfinite(v))
    throw InputError(where, fmt::format("bandwidth \"{}\" is too large", text));
  return Bandwidth{v};
}

Time parse_time(std::string_view text, const std::string& where) {
  auto [d, u] = parse_with(text, kTimeUnits, "a duration", where);
  std::int64_t ns = exact_integer(d, u, "a duration", text, where);
  std::int64_t mult = u.name == "min" ? 60 : u.name == "h" ? 3600 : 1;
  if (mult > 1 && ns > INT64_MAX / mult)
    throw InputError(where, fmt::format("duration \"{}\" is too large", text));
  return Time::ns(ns * mult);
}

FlopRate parse_flop_rate(std::string_view text, const std::string& where) {
  auto [d, u] = parse_with(text, kFlopUnits, "a compute rate", where);
  double v = exact_double(d, u);
  if (!std::isfinite(v)) throw InputError(where, fmt::format("rate \"{}\" is too large", text));
  return FlopRate{v};
}

Time transfer_time(Bytes b, Bandwidth bw) {
  MLSIM_CHECK(bw.bytes_per_s > 0, "transfer_time with zero bandwidth");
  return Time::from_seconds_ceil(static_cast<double>(b.count) / bw.bytes_per_s);
}

namespace detail {
void throw_clock_overflow(const char* operation, double nanoseconds) {
  if (std::isnan(nanoseconds))
    throw InvariantError(fmt::format("{} is not a number (NaN nanoseconds)", operation));
  throw ClockOverflow(fmt::format(
      "simulated time out of range: {} gives {:.4g} s, beyond the clock's +-292 years; a "
      "duration, a count of steps, or a size over a bandwidth in the scenario is too large",
      operation, nanoseconds * 1e-9));
}
}  // namespace detail

std::string to_string(Time t) {
  const double ns = static_cast<double>(t.count_ns());
  const double a = std::fabs(ns);
  if (a < 1e3) return fmt::format("{}ns", t.count_ns());
  if (a < 1e6) return fmt::format("{:.3g}us", ns / 1e3);
  if (a < 1e9) return fmt::format("{:.4g}ms", ns / 1e6);
  return fmt::format("{:.6g}s", ns / 1e9);
}

std::string to_string(Bytes b) {
  const double v = static_cast<double>(b.count);
  if (b.count < 1024) return fmt::format("{}B", b.count);
  if (b.count < (1LL << 20)) return fmt::format("{:.4g}KiB", v / 1024);
  if (b.count < (1LL << 30)) return fmt::format("{:.4g}MiB", v / (1 << 20));
  return fmt::format("{:.4g}GiB", v / (1LL << 30));
}

std::string to_string(Bandwidth bw) {
  return fmt::format("{:.4g}Gbps", bw.bits_per_s() / 1e9);
}

std::string to_string(FlopRate r) {
  return fmt::format("{:.4g}TFLOPS", r.flops_per_s / 1e12);
}

}  // namespace mlsim
