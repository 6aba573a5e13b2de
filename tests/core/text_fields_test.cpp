#include "sim_core/base/text_fields.hpp"

#include <gtest/gtest.h>

using namespace mlsim;

TEST(SplitCsvLine, CellsEmptyCellsAndLineEnds) {
  EXPECT_EQ(split_csv_line("a,b,c"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(split_csv_line("a,,c\r"), (std::vector<std::string>{"a", "", "c"}));
  EXPECT_EQ(split_csv_line("a,"), (std::vector<std::string>{"a", ""}));
  EXPECT_EQ(split_csv_line(""), (std::vector<std::string>{""}));
}

TEST(ParseTimestamp, CalendarArithmeticAndFractions) {
  EXPECT_EQ(parse_timestamp_ns("1970-01-01 00:00:00"), 0);
  EXPECT_EQ(parse_timestamp_ns("1970-01-02T00:00:01.5"), 86'401'500'000'000LL);
  // 2000 is a leap year (divisible by 400): 2000-03-01 is day 11,017 since the epoch.
  EXPECT_EQ(parse_timestamp_ns("2000-03-01 00:00:00"), 11'017LL * 86'400'000'000'000LL);
  EXPECT_EQ(parse_timestamp_ns("2000-02-29 00:00:00"), 11'016LL * 86'400'000'000'000LL);
  EXPECT_FALSE(parse_timestamp_ns("1900-02-29 00:00:00"));  // 1900 is not
  EXPECT_FALSE(parse_timestamp_ns("2023-02-30 00:00:00"));
  EXPECT_FALSE(parse_timestamp_ns("2023-13-01 00:00:00"));
  EXPECT_FALSE(parse_timestamp_ns("2023-01-01 24:00:00"));
  EXPECT_FALSE(parse_timestamp_ns("2023-01-01 00:00:00."));
  EXPECT_FALSE(parse_timestamp_ns("2023-01-01 00:00:-1"));
  EXPECT_FALSE(parse_timestamp_ns("2023-01-01"));
}
