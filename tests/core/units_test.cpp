#include "sim_core/base/units.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "sim_core/base/error.hpp"

using namespace mlsim;

TEST(Units, BytesDecimalAndBinary) {
  EXPECT_EQ(parse_bytes("80GiB").count, 80LL << 30);
  EXPECT_EQ(parse_bytes("1MiB").count, 1 << 20);
  EXPECT_EQ(parse_bytes("64MB").count, 64'000'000);
  EXPECT_EQ(parse_bytes("0.5KiB").count, 512);
  EXPECT_EQ(parse_bytes("1.5 GB").count, 1'500'000'000);
  EXPECT_EQ(parse_bytes("2e3B").count, 2000);
  EXPECT_THROW(parse_bytes("1.5B"), InputError);  // not whole
  EXPECT_THROW(parse_bytes("10"), InputError);    // missing unit
  EXPECT_THROW(parse_bytes("-1MB"), InputError);
  EXPECT_THROW(parse_bytes("10XB"), InputError);
  EXPECT_THROW(parse_bytes("99999999999TB"), InputError);
}

TEST(Units, BandwidthBitsAndBytes) {
  EXPECT_EQ(parse_bandwidth("100Gbps").bytes_per_s, 12.5e9);
  EXPECT_EQ(parse_bandwidth("12.5GB/s").bytes_per_s, 12.5e9);
  EXPECT_EQ(parse_bandwidth("50GB/s").bytes_per_s, 50e9);
  EXPECT_EQ(parse_bandwidth("1GiB/s").bytes_per_s, 1073741824.0);
  EXPECT_EQ(parse_bandwidth("0.1Gbps").bytes_per_s, 12.5e6);
  EXPECT_THROW(parse_bandwidth("100Gb"), InputError);
}

TEST(Units, TimeExactNanoseconds) {
  EXPECT_EQ(parse_time("1.5us"), Time::ns(1500));
  EXPECT_EQ(parse_time("500ns"), Time::ns(500));
  EXPECT_EQ(parse_time("2min"), Time::s(120));
  EXPECT_EQ(parse_time("1h"), Time::s(3600));
  EXPECT_EQ(parse_time("0.000001s"), Time::ns(1000));
  EXPECT_THROW(parse_time("0.5ns"), InputError);
  EXPECT_THROW(parse_time("abc"), InputError);
}

TEST(Units, FlopRate) {
  EXPECT_EQ(parse_flop_rate("312TFLOPS").flops_per_s, 312e12);
  EXPECT_EQ(parse_flop_rate("1.979PFLOPS").flops_per_s, 1.979e15);
}

TEST(Units, ErrorNamesThePathAndUnits) {
  try {
    parse_bytes("12 apples", "system.bytes");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "system.bytes");
    EXPECT_NE(std::string(e.what()).find("GiB"), std::string::npos);
  }
}

TEST(Units, TransferTimeRoundsUp) {
  EXPECT_EQ(transfer_time(Bytes{1000}, Bandwidth{1e9}), Time::ns(1000));
  EXPECT_EQ(transfer_time(Bytes{1001}, Bandwidth{1e12}), Time::ns(2));
}

// Issue 17, defect 1: time arithmetic used to wrap around (a 2^63-1 ns latency gave a completion
// earlier than 0 ns latency). Every operation now throws ClockOverflow at the int64 edge.
TEST(TimeArithmetic, OverflowThrowsInsteadOfWrapping) {
  const Time big = Time::ns(INT64_MAX - 10);
  EXPECT_EQ(big + Time::ns(10), Time::max());       // exactly at the edge: fine
  EXPECT_THROW(big + Time::ns(11), ClockOverflow);  // one past it
  EXPECT_THROW(Time::ns(INT64_MIN) - Time::ns(1), ClockOverflow);
  Time t = big;
  EXPECT_THROW(t += Time::ns(11), ClockOverflow);
  EXPECT_EQ(t, big);  // unchanged after the failed +=
  // 9223372036 s = 9.223372036e18 ns fits; x2 does not.
  EXPECT_EQ(Time::s(9'223'372'036).count_ns(), 9'223'372'036'000'000'000);
  EXPECT_THROW(Time::s(9'223'372'036) * 2, ClockOverflow);
  EXPECT_THROW(Time::s(9'223'372'037), ClockOverflow);
  EXPECT_THROW(Time::us(INT64_MAX / 1000 + 1), ClockOverflow);
}

TEST(TimeArithmetic, ConversionsFromSecondsAreChecked) {
  EXPECT_EQ(Time::from_seconds(1.4e-9), Time::ns(1));  // to the nearest nanosecond
  EXPECT_EQ(Time::from_seconds(-1.6e-9), Time::ns(-2));
  EXPECT_EQ(Time::from_seconds(2.5), Time::ns(2'500'000'000));
  EXPECT_EQ(Time::from_seconds_ceil(1.001e-9), Time::ns(2));
  // Rounding up (truncate, then step up past a cut-off fraction): whole nanoseconds stay, a
  // negative time rounds towards zero, and 1e-6 ns of floating-point noise is forgiven.
  EXPECT_EQ(Time::from_seconds_ceil(2e-9), Time::ns(2));
  EXPECT_EQ(Time::from_seconds_ceil(0), Time::ns(0));
  EXPECT_EQ(Time::from_seconds_ceil(1e-16), Time::ns(0));
  EXPECT_EQ(Time::from_seconds_ceil(-1.5e-9), Time::ns(-1));
  EXPECT_EQ(Time::from_seconds_ceil(-2.5e-9), Time::ns(-2));
  EXPECT_EQ(Time::from_seconds_ceil(9.2e9), Time::ns(9'200'000'000'000'000'000));
  EXPECT_THROW(Time::from_seconds_ceil(9.3e9), ClockOverflow);
  // 2^63 ns = 9.223372036854775808e9 s does not fit; 9.2e9 s does.
  EXPECT_EQ(Time::from_seconds(9.2e9), Time::ns(9'200'000'000'000'000'000));
  EXPECT_THROW(Time::from_seconds(9.3e9), ClockOverflow);
  EXPECT_THROW(Time::from_seconds_ceil(std::numeric_limits<double>::infinity()), ClockOverflow);
  EXPECT_THROW(Time::from_seconds(std::nan("")), InvariantError);  // a bug, not an input limit
  // 1 GiB over 1e-3 bps (the case) is 8.6e12 s: refused instead of a negative time.
  EXPECT_THROW(transfer_time(Bytes{1LL << 30}, Bandwidth{1e-3 / 8}), ClockOverflow);
}
