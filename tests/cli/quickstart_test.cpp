// The quickstart scenario through the real program: it runs, every variant runs, and the same
// scenario and seed give byte-identical summary.json apart from the "wall" object.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/support/program_runner.hpp"

using mlsim::testing::read_file;
using mlsim::testing::TempDir;

namespace {

int mlsim_status(const std::string& args, const TempDir& dir) {
  return mlsim::testing::run_mlsim(dir, args).status;
}

const std::string kQuickstartScenario =
    std::string(MLSIM_SOURCE_DIR) + "/workloads/scenarios/quickstart.json";

// summary.json without its wall-clock part, as written (the writer's own formatting).
std::string without_wall(const std::filesystem::path& summary) {
  auto j = nlohmann::json::parse(read_file(summary));
  EXPECT_TRUE(j.contains("wall"));
  j.erase("wall");
  return j.dump(2);
}

}  // namespace

TEST(Quickstart, ValidatesWithEveryVariant) {
  TempDir dir;
  EXPECT_EQ(mlsim_status("validate " + kQuickstartScenario, dir), 0)
      << read_file(dir.path() / "stderr.txt");
  EXPECT_NE(read_file(dir.path() / "stdout.txt").find("variants ps, ring, tree also valid"),
            std::string::npos);
}

TEST(Quickstart, RunsAndIsDeterministic) {
  TempDir dir;
  const auto a = dir.path() / "a";
  const auto b = dir.path() / "b";
  ASSERT_EQ(mlsim_status("run " + kQuickstartScenario + " --out " + a.string(), dir), 0)
      << read_file(dir.path() / "stderr.txt");
  EXPECT_NE(
      read_file(dir.path() / "stdout.txt").find("quickstart: model collectives, backend flow"),
      std::string::npos)
      << read_file(dir.path() / "stdout.txt");
  ASSERT_EQ(mlsim_status("run " + kQuickstartScenario + " --quiet --out " + b.string(), dir), 0);
  EXPECT_EQ(read_file(dir.path() / "stdout.txt"), "");  // --quiet
  EXPECT_EQ(without_wall(a / "summary.json"), without_wall(b / "summary.json"));
  const auto summary = nlohmann::json::parse(read_file(a / "summary.json"));
  EXPECT_EQ(summary["metrics"]["completed"], 1.0);
  EXPECT_GT(summary["run"]["events_processed"].get<long>(), 0);
  EXPECT_EQ(summary["scenario"]["system"]["algorithm"], "ring");
}

TEST(Quickstart, VariantsRunWithTheirOwnAlgorithm) {
  TempDir dir;
  for (const std::string v : {"ps", "tree"}) {
    const auto out = dir.path() / v;
    ASSERT_EQ(mlsim_status("run " + kQuickstartScenario + " --quiet --variant " + v + " --out " +
                               out.string(),
                           dir),
              0)
        << read_file(dir.path() / "stderr.txt");
    const auto summary = nlohmann::json::parse(read_file(out / "summary.json"));
    EXPECT_EQ(summary["variant"], v);
    EXPECT_EQ(summary["details"]["algorithm"], v);
  }
}
