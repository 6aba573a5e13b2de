#include "sim_core/experiments/compare.hpp"

#include <gtest/gtest.h>

#include <cmath>

using namespace mlsim;

namespace {
Comparison example() {
  Comparison c;
  c.scenario = "s.json";
  c.baseline = "ring";
  c.variants = {"ps", "ring"};
  c.outcomes["ring"].metrics = {{"time_s", 2.0}, {"bytes", 0}};
  c.outcomes["ps"].metrics = {{"time_s", 3.0}, {"bytes", 5}, {"extra", 1}};
  return c;
}
}  // namespace

TEST(Compare, RatiosAgainstTheBaselineByHand) {
  const auto c = example();
  EXPECT_DOUBLE_EQ(c.ratio("ps", "time_s"), 1.5);
  EXPECT_DOUBLE_EQ(c.ratio("ring", "time_s"), 1.0);
  EXPECT_TRUE(std::isnan(c.ratio("ps", "bytes")));  // baseline 0
  EXPECT_TRUE(std::isnan(c.ratio("ps", "extra")));  // baseline lacks it
  EXPECT_EQ(c.metric_names(), (std::vector<std::string>{"bytes", "extra", "time_s"}));
}

TEST(Compare, CsvAndJson) {
  const auto c = example();
  EXPECT_EQ(comparison_csv(c),
            "metric,variant,value,ratio_to_baseline\n"
            "bytes,ps,5,\nbytes,ring,0,\n"
            "extra,ps,1,\nextra,ring,,\n"
            "time_s,ps,3,1.5\ntime_s,ring,2,1\n");
  const auto j = comparison_json(c);
  EXPECT_EQ(j["baseline"], "ring");
  EXPECT_EQ(j["metrics"]["time_s"]["ps"]["ratio"], 1.5);
  EXPECT_TRUE(j["metrics"]["extra"]["ring"]["value"].is_null());
}

TEST(Compare, TableShowsRatiosForNonBaselineVariants) {
  const auto t = comparison_table(example());
  EXPECT_NE(t.find("ring (baseline)"), std::string::npos) << t;
  EXPECT_NE(t.find("3 (1.5x)"), std::string::npos) << t;
  EXPECT_EQ(t.find("2 (1x)"), std::string::npos) << t;
}
