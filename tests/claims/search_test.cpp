// Capacity search (sim_core/experiments/search.hpp): the bisection against a case worked by hand,
// the search over configurations with a fake runner whose capacities are known, strict parsing,
// and `mlsim search` on a small serving scenario as a user runs it.
#include "sim_core/experiments/search.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "sim_core/base/error.hpp"
#include "tests/support/program_runner.hpp"
#include "tests/support/serving_scenarios.hpp"

using namespace mlsim;
using mlsim::testing::read_file;
using mlsim::testing::run_mlsim;
using mlsim::testing::small_serving_scenario;
using mlsim::testing::TempDir;

namespace {

TEST(LoadBisection, FollowsTheGeometricMiddleToTheTolerance) {
  // Holds up to a load of 5, range 1-16, 5%. By hand: 1 holds, 16 fails, then the geometric
  // middles sqrt(1*16) = 4 holds, sqrt(4*16) = 8 fails, sqrt(32) = 5.65685 fails,
  // sqrt(4*5.65685) = 4.75683 holds, sqrt(4.75683*5.65685) = 5.18736 fails,
  // sqrt(4.75683*5.18736) = 4.96743 holds; 5.18736 / 4.96743 = 1.0443 <= 1.05: done.
  LoadBisection b(1, 16, 0.05);
  std::vector<double> loads;
  while (auto load = b.next()) {
    loads.push_back(*load);
    b.record(*load, *load <= 5);
  }
  const std::vector<double> want{1, 16, 4, 8, 5.65685, 4.75683, 5.18736, 4.96743};
  ASSERT_EQ(loads.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(loads[i], want[i], 1e-5) << i;
  EXPECT_NEAR(*b.capacity(), 4.96743, 1e-5);
  EXPECT_FALSE(b.at_least_high());
}

TEST(LoadBisection, EndsOfTheRange) {
  LoadBisection fails(1, 16, 0.05);
  fails.record(1, false);  // fails at the bottom: no second run, no capacity
  EXPECT_FALSE(fails.next());
  EXPECT_FALSE(fails.capacity());
  LoadBisection holds(1, 16, 0.05);
  holds.record(1, true);
  holds.record(16, true);  // holds at the top: at least 16
  EXPECT_FALSE(holds.next());
  EXPECT_EQ(*holds.capacity(), 16);
  EXPECT_TRUE(holds.at_least_high());
}

SearchSpec two_configurations(const std::string& extra = "") {
  return parse_search_text(R"({"scenario": "s.json", "grid": {"system.x": [1, 2, 0.1]},
    "search": {"load": {"path": "workload.rate", "low": 1, "high": 64, "tolerance": 0.01},
               "constraints": ["m >= 5"], "names": {"x": "system.x"}, "cost": "3 * x")" +
                               extra + "}}",
                           "search.json");
}

TEST(Search, FindsEachCapacityAndTheCheapestForTheTarget) {
  // Fake runs: metric m = 10 - load / x, so m >= 5 holds up to load 5x: capacities 5 and 10 for
  // x = 1 and 2; x = 0.1 fails at load 1 (m = 0). Target 6: only x = 2 sustains it (cost 6).
  const SearchSpec spec = two_configurations(R"(, "target_load": 6)");
  std::vector<std::size_t> batch_sizes;
  const SearchResult r = run_search(spec, [&](const std::vector<RunRequest>& batch) {
    batch_sizes.push_back(batch.size());
    std::vector<RunOutcome> out;
    for (const RunRequest& req : batch) {
      double x = 0, load = 0;
      for (const auto& [path, value] : req.overrides) {
        if (path == "system.x") x = value.get<double>();
        if (path == "workload.rate") load = value.get<double>();
      }
      RunOutcome o;
      o.metrics["m"] = 10 - load / x;
      out.push_back(o);
    }
    return out;
  });
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_LE(*r.rows[0].capacity, 5);
  EXPECT_GE(*r.rows[0].capacity, 5 / 1.01);
  EXPECT_LE(*r.rows[1].capacity, 10);
  EXPECT_GE(*r.rows[1].capacity, 10 / 1.01);
  EXPECT_FALSE(r.rows[2].capacity);
  EXPECT_EQ(r.rows[2].bound, "below_low");
  EXPECT_EQ(r.rows[2].runs, 1u);
  EXPECT_DOUBLE_EQ(*r.rows[0].cost, 3);
  EXPECT_DOUBLE_EQ(*r.rows[1].cost, 6);
  EXPECT_EQ(r.cheapest, 1u);
  // Every round runs each unfinished configuration's next load together: all three first.
  EXPECT_EQ(batch_sizes.front(), 3u);
  EXPECT_EQ(batch_sizes[1], 2u);
  const std::string csv = search_csv(spec, r);
  EXPECT_NE(csv.find("system.x,capacity,bound,cost,capacity_per_cost,runs,at_capacity: m"),
            std::string::npos);
  EXPECT_NE(csv.find("0.1,,below_low,0.30000000000000004,,1,"), std::string::npos) << csv;
}

TEST(Search, FileErrorsNameTheirPath) {
  auto error_of = [](const std::string& text) {
    try {
      parse_search_text(text, "f.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string head = R"({"scenario": "s.json", "grid": {"system.x": [1]}, )";
  EXPECT_NE(error_of(head + R"("set": {}})").find("\"search\" section"), std::string::npos);
  const std::string load = R"("load": {"path": "workload.rate", "low": 1, "high": 8})";
  EXPECT_NE(error_of(head + R"("search": {)" + load + R"(, "constraints": ["m => 1"]}})")
                .find("search.constraints[0]"),
            std::string::npos);
  EXPECT_NE(error_of(head + R"("search": {)" + load + R"(, "constraints": ["m >= (1"]}})")
                .find("search.constraints[0]"),
            std::string::npos);
  EXPECT_NE(error_of(head + R"("search": {)" + load +
                     R"(, "constraints": ["m >= 1"], "names": {"y": "system.y"}}})")
                .find("search.names.y"),
            std::string::npos);
  EXPECT_NE(
      error_of(
          head +
          R"("search": {"load": {"path": "w", "low": 8, "high": 8}, "constraints": ["m >= 1"]}})")
          .find("search.load.high"),
      std::string::npos);
  EXPECT_NE(error_of(head + R"("search": {)" + load + R"(, "constraints": ["m >= 1"], "nope": 1}})")
                .find("search.nope"),
            std::string::npos);
}

TEST(SearchCommand, SmallServingScenarioEndToEnd) {
  // Llama-2-7B on A100 with the roofline (no shared data needed), 200 requests of 1024 + 128
  // tokens; the capacity is the largest request rate keeping SLO attainment >= 0.9. More replicas
  // sustain more; a second run reuses every finished run; the same input gives the same CSV.
  TempDir dir;
  dir.write("small.json", small_serving_scenario({.gpus_per_host = 4,
                                                  .rate = 1,
                                                  .count = 200,
                                                  .prompt_tokens = 1024,
                                                  .output_tokens = 128}));
  dir.write("search.json", R"({"scenario": "small.json",
    "grid": {"system.separate[0].replicas": [1, 2]},
    "search": {"load": {"path": "workload.generator.rate", "low": 1, "high": 256},
               "constraints": ["serving_slo_attainment >= 0.9"],
               "names": {"replicas": "system.separate[0].replicas"}, "cost": "replicas",
               "target_load": 20}})");
  auto o = run_mlsim(dir, "search search.json --out out -j 2");
  ASSERT_EQ(o.status, 0) << o.err;
  const std::string csv = read_file(dir.path() / "out" / "search.csv");
  EXPECT_NE(o.out.find("<- cheapest at the target load"), std::string::npos) << o.out;
  o = run_mlsim(dir, "search search.json --out out -j 2");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.err.find("(0 reused)"), std::string::npos) << o.err;  // every run reused
  EXPECT_EQ(read_file(dir.path() / "out" / "search.csv"), csv);
  // Two replicas sustain more than one.
  const auto line = [&](int n) {
    std::size_t at = 0;
    for (int i = 0; i < n; ++i) at = csv.find('\n', at) + 1;
    return csv.substr(at, csv.find('\n', at) - at);
  };
  const double one = std::stod(line(1).substr(2)), two = std::stod(line(2).substr(2));
  EXPECT_GT(two, one);
  // A bad search file: exit status 2 and nothing written.
  dir.write("bad.json", R"({"scenario": "small.json", "grid": {"system.separate[0].replicas": [1]},
    "search": {"load": {"path": "workload.generator.rate", "low": 1, "high": 8},
               "constraints": ["serving_slo_attainment =>0.9"]}})");
  o = run_mlsim(dir, "search bad.json --out bad");
  EXPECT_EQ(o.status, 2);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "bad"));
}

}  // namespace
