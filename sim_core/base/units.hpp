#pragma once
// Quantities with units, parsed from strings such as "100Gbps", "12.5GB/s", "80GiB", "1.5us",
// "312TFLOPS". Parsing is exact: decimal mantissas are never rounded through binary floating point
// before the unit is applied; integer quantities (bytes, nanoseconds) must come out whole or the
// parse is an error.
#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "sim_core/base/time.hpp"

namespace mlsim {

struct Bytes {
  std::int64_t count = 0;
  constexpr auto operator<=>(const Bytes&) const = default;
  constexpr Bytes operator+(Bytes o) const { return {count + o.count}; }
  constexpr Bytes operator-(Bytes o) const { return {count - o.count}; }
  constexpr Bytes& operator+=(Bytes o) {
    count += o.count;
    return *this;
  }
  constexpr Bytes& operator-=(Bytes o) {
    count -= o.count;
    return *this;
  }
};

// Bytes per second. Link speeds in bits ("100Gbps") are converted once, here.
struct Bandwidth {
  double bytes_per_s = 0;
  constexpr auto operator<=>(const Bandwidth&) const = default;
  constexpr double bits_per_s() const { return bytes_per_s * 8; }
};

// Floating-point operations per second.
struct FlopRate {
  double flops_per_s = 0;
  constexpr auto operator<=>(const FlopRate&) const = default;
};

// Each parser throws InputError(where, ...) naming `where` (a JSON path) and listing the units it
// accepts.
Bytes parse_bytes(std::string_view text, const std::string& where = "");
Bandwidth parse_bandwidth(std::string_view text, const std::string& where = "");
Time parse_time(std::string_view text, const std::string& where = "");
FlopRate parse_flop_rate(std::string_view text, const std::string& where = "");

// Time needed to move `b` at rate `bw`, rounded up to the next nanosecond.
Time transfer_time(Bytes b, Bandwidth bw);

std::string to_string(Bytes b);
std::string to_string(Bandwidth bw);
std::string to_string(FlopRate r);

}  // namespace mlsim
