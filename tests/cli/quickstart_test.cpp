// The quickstart scenario through the real program: it runs, every variant runs, and the same
// scenario and seed give byte-identical summary.json apart from the "wall" object.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../scenario/test_registries.hpp"

using mlsim::testing::TempDir;

namespace {

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int run_mlsim(const std::string& args, const TempDir& dir) {
  const std::string cmd = std::string(MLSIM_BINARY_DIR) + "/cli/mlsim " + args + " > " +
                          (dir.path() / "stdout.txt").string() + " 2> " +
                          (dir.path() / "stderr.txt").string();
  const int raw = std::system(cmd.c_str());
  return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
}

const std::string kQuickstart =
    std::string(MLSIM_SOURCE_DIR) + "/workloads/scenarios/quickstart.json";

// summary.json without its wall-clock part, as written (the writer's own formatting).
std::string without_wall(const std::filesystem::path& summary) {
  auto j = nlohmann::json::parse(read(summary));
  EXPECT_TRUE(j.contains("wall"));
  j.erase("wall");
  return j.dump(2);
}

}  // namespace

TEST(Quickstart, ValidatesWithEveryVariant) {
  TempDir dir;
  EXPECT_EQ(run_mlsim("validate " + kQuickstart, dir), 0) << read(dir.path() / "stderr.txt");
  EXPECT_NE(read(dir.path() / "stdout.txt").find("variants ps, ring, tree also valid"),
            std::string::npos);
}

TEST(Quickstart, RunsAndIsDeterministic) {
  TempDir dir;
  const auto a = dir.path() / "a";
  const auto b = dir.path() / "b";
  ASSERT_EQ(run_mlsim("run " + kQuickstart + " --out " + a.string(), dir), 0)
      << read(dir.path() / "stderr.txt");
  EXPECT_NE(read(dir.path() / "stdout.txt").find("quickstart: model collectives, backend flow"),
            std::string::npos)
      << read(dir.path() / "stdout.txt");
  ASSERT_EQ(run_mlsim("run " + kQuickstart + " --quiet --out " + b.string(), dir), 0);
  EXPECT_EQ(read(dir.path() / "stdout.txt"), "");  // --quiet
  EXPECT_EQ(without_wall(a / "summary.json"), without_wall(b / "summary.json"));
  const auto summary = nlohmann::json::parse(read(a / "summary.json"));
  EXPECT_EQ(summary["metrics"]["completed"], 1.0);
  EXPECT_GT(summary["run"]["events_processed"].get<long>(), 0);
  EXPECT_EQ(summary["scenario"]["system"]["algorithm"], "ring");
}

TEST(Quickstart, VariantsRunWithTheirOwnAlgorithm) {
  TempDir dir;
  for (const std::string v : {"ps", "tree"}) {
    const auto out = dir.path() / v;
    ASSERT_EQ(
        run_mlsim("run " + kQuickstart + " --quiet --variant " + v + " --out " + out.string(), dir),
        0)
        << read(dir.path() / "stderr.txt");
    const auto summary = nlohmann::json::parse(read(out / "summary.json"));
    EXPECT_EQ(summary["variant"], v);
    EXPECT_EQ(summary["details"]["algorithm"], v);
  }
}
