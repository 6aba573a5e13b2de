// Run budgets (sim_core/run/budget.hpp): estimates refused before the run, limits watched during
// it.
#include "sim_core/run/budget.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli/registry.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/run/runner.hpp"
#include "sim_core/run/scenario.hpp"

using namespace mlsim;

namespace {

const Registries& budget_registries() {
  static const Registries r = make_registries();
  return r;
}

std::filesystem::path shipped(const std::string& name) {
  return std::filesystem::path(MLSIM_SOURCE_DIR) / "workloads/scenarios" / name;
}

LoadedScenario budget_load(const std::string& name, std::vector<std::string> sets) {
  ScenarioRequest req{shipped(name), {}, {}};
  for (const auto& s : sets) req.overrides.push_back(parse_set_option(s));
  return load_scenario(req, budget_registries());
}

// The InputError message of preparing, or "no error".
std::string prepare_error(const LoadedScenario& s, const RunBudget& budget = {}) {
  try {
    PreparedRun prepared(s, budget_registries(), budget);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(Budget, RefusesAnEstimateAboveTheBudgetAtTheLargestTermsKey) {
  RunBudget budget;
  budget.max_events = 1000;
  WorkEstimate e;
  e.events.push_back({400, "small part", "system.a"});
  e.events.push_back({500, "large part", "system.b"});
  EXPECT_NO_THROW(check_budget(e, budget));  // 900 <= 1000
  e.events.push_back({200, "third part", "system.c"});
  try {
    check_budget(e, budget);  // 1100 > 1000: the largest term (500, system.b) is named
    FAIL() << "expected an InputError";
  } catch (const InputError& err) {
    const std::string m = err.what();
    EXPECT_EQ(err.path(), "system.b");
    EXPECT_NE(m.find("about 1.1e+03 events"), std::string::npos) << m;
    EXPECT_NE(m.find("large part"), std::string::npos) << m;
    EXPECT_NE(m.find("--max-events"), std::string::npos) << m;
  }
  WorkEstimate mem;
  mem.memory.push_back({3.0 * (1 << 30), "rows", "system.rows"});
  budget.max_memory_bytes = std::int64_t{2} << 30;
  try {
    check_budget(mem, budget);
    FAIL() << "expected an InputError";
  } catch (const InputError& err) {
    EXPECT_EQ(err.path(), "system.rows");
    EXPECT_NE(std::string(err.what()).find("--max-memory"), std::string::npos) << err.what();
  }
}

TEST(Budget, JsonMemoryCountsEveryValue) {
  // An array of 1000 numbers: 1001 values of 16 bytes, no members, no strings.
  EXPECT_DOUBLE_EQ(json_memory_bytes(nlohmann::json(std::vector<int>(1000, 7))), 16016.0);
  // One member holding a number: 2 values + one map node of 64 bytes + the key's capacity.
  const nlohmann::json one = {{"k", 1}};
  const double key = static_cast<double>(one.begin().key().capacity());
  EXPECT_DOUBLE_EQ(json_memory_bytes(one), 2 * 16 + 64 + key);
}

TEST(Budget, CommschedPartitionOfOneParameterIsRefusedBeforeTheRun) {
  // VGG16 (138 M parameters) in chunks of one parameter: 1.4e8 chunks x 2 transfers x 2 workers
  // x 20 iterations = 1.1e10 transfers, above the default budget of 1e10.
  const auto s = budget_load("commsched_bytescheduler.json", {"system.partition=1"});
  const std::string m = prepare_error(s);
  EXPECT_NE(m.find("system.partition"), std::string::npos) << m;
  EXPECT_NE(m.find("--max-events"), std::string::npos) << m;
  // The shipped partition is far inside the budget, and a raised budget admits the extreme one.
  EXPECT_EQ(prepare_error(budget_load("commsched_bytescheduler.json", {})), "no error");
  RunBudget generous;
  generous.max_events = 1'000'000'000'000;
  generous.max_memory_bytes = std::int64_t{64} << 30;
  EXPECT_EQ(prepare_error(s, generous), "no error");
}

TEST(Budget, RandomFailuresAboveTheBudgetAreRefusedAtTheirMtbf) {
  // Quickstart's 4 hosts failing every 1 ns for 10 s: 4 x 1e10 failures, each with its repair.
  const auto s =
      budget_load("quickstart.json", {R"(events={"random_failures": {"mtbf": "1ns", "repair": "1ns",
                                 "until": "10s"}})"});
  const std::string m = prepare_error(s);
  EXPECT_NE(m.find("events.random_failures.mtbf"), std::string::npos) << m;
}

TEST(Budget, ALargeDocumentAboveTheMemoryBudgetIsRefusedBeforeTheRun) {
  // 100 000 numbers under an annotation key: 16 B each in the tree, held three times = 4.8 MB,
  // above a 4 MiB budget (4.19 MB); the shipped quickstart alone is a few tens of KB.
  auto s = budget_load("quickstart.json", {});
  s.resolved["_numbers"] = std::vector<int>(100'000, 1);
  RunBudget budget;
  budget.max_memory_bytes = 4 << 20;
  const std::string m = prepare_error(s, budget);
  EXPECT_NE(m.find("the scenario document"), std::string::npos) << m;
  EXPECT_NE(m.find("--max-memory"), std::string::npos) << m;
  s.resolved.erase("_numbers");
  EXPECT_EQ(prepare_error(s, budget), "no error");
}

TEST(Budget, ARunPastItsEventBudgetStopsWithALimitError) {
  // The quickstart's ring in 1024 chunks processes about 190 000 events; the budget is
  // checked every 2^16 events, so a budget of 1000 stops the run at the first check.
  const auto s = budget_load("quickstart.json", {"system.algorithm=ring", "system.chunks=1024"});
  RunBudget budget;
  budget.max_events = 1000;
  PreparedRun prepared(s, budget_registries(), budget);
  try {
    prepared.run();
    FAIL() << "expected a LimitError";
  } catch (const LimitError& e) {
    EXPECT_NE(std::string(e.what()).find("stopped after 65536 events"), std::string::npos)
        << e.what();
  }
  // Within budget, the same run completes.
  PreparedRun again(s, budget_registries());
  EXPECT_GT(again.run().info.events_processed, std::uint64_t{65536});
}

TEST(Budget, ARunPastItsMemoryBudgetStopsWithALimitError) {
  const auto s = budget_load("quickstart.json", {"system.algorithm=ring", "system.chunks=1024"});
  RunBudget budget;
  // Above the scenario document's estimate (about 9 KB), below what any process holds (the
  // test binary alone maps several MiB).
  budget.max_memory_bytes = 1 << 20;
  PreparedRun prepared(s, budget_registries(), budget);
  try {
    prepared.run();
    FAIL() << "expected a LimitError";
  } catch (const LimitError& e) {
    EXPECT_NE(std::string(e.what()).find("--max-memory"), std::string::npos) << e.what();
  }
}
