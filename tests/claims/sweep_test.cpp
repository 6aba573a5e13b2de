#include "sim_core/experiments/sweep.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "sim_core/base/error.hpp"
#include "sim_core/experiments/child_runs.hpp"
#include "sim_core/experiments/process_pool.hpp"

using namespace mlsim;
namespace fs = std::filesystem;

namespace {

// A fresh folder per test, removed afterwards.
class SweepTempDir {
 public:
  SweepTempDir() {
    path_ = fs::temp_directory_path() /
            ("mlsim-sweep-test-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~SweepTempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::size_t lines(const fs::path& p) {
  std::ifstream in(p);
  std::size_t n = 0;
  for (std::string l; std::getline(in, l);) ++n;
  return n;
}

const fs::path kFake = fs::path(MLSIM_SOURCE_DIR) / "tests/claims/fake_mlsim.sh";

// 2 x 3 grid crossed with two explicit points: 12 runs of the fake mlsim.
SweepSpec grid_spec(const fs::path& dir) {
  return parse_sweep_text(R"({
    "scenario": "scenario.json",
    "set": {"c": "fixed"},
    "grid": {"a": [1, 2], "b": [10, 20, 30]},
    "points": [{"d": "x"}, {"d": "y"}]
  })",
                          dir / "sweep.json");
}

}  // namespace

TEST(Sweep, ExpandsTheGridInFileOrderLastDimensionFastest) {
  const auto spec = parse_sweep_text(R"({"scenario": "s.json", "variants": ["v1", "v2"],
      "grid": {"z": [1, 2], "a": ["x", "y"]}, "set": {"k": true}})",
                                     "/d/sweep.json");
  EXPECT_EQ(spec.scenario, fs::path("/d/s.json"));
  const auto points = expand_sweep(spec);
  ASSERT_EQ(points.size(), 8u);
  std::vector<std::string> got;
  for (const auto& p : points) {
    std::string s = *p.request.variant;
    for (const auto& [path, v] : p.parameters) s += " " + path + "=" + v.dump();
    got.push_back(s);
  }
  EXPECT_EQ(got[0], "v1 variant=\"v1\" z=1 a=\"x\"");
  EXPECT_EQ(got[1], "v1 variant=\"v1\" z=1 a=\"y\"");
  EXPECT_EQ(got[2], "v1 variant=\"v1\" z=2 a=\"x\"");
  EXPECT_EQ(got[7], "v2 variant=\"v2\" z=2 a=\"y\"");
  EXPECT_EQ(points[0].request.overrides.front().first, "k");  // fixed overrides first
  EXPECT_EQ(parameter_columns(spec), (std::vector<std::string>{"variant", "z", "a"}));
  std::set<std::string> ids;
  for (const auto& p : points) ids.insert(p.id);
  EXPECT_EQ(ids.size(), points.size());
}

TEST(Sweep, PointIdsSurviveAGrowingGrid) {
  const auto before = expand_sweep(
      parse_sweep_text(R"({"scenario": "s.json", "grid": {"a": [1, 2]}})", "/d/x.json"));
  const auto after = expand_sweep(
      parse_sweep_text(R"({"scenario": "s.json", "grid": {"a": [0, 1, 2]}})", "/d/x.json"));
  EXPECT_EQ(before[0].id, after[1].id);
  EXPECT_EQ(before[1].id, after[2].id);
}

TEST(Sweep, ASweepSectionInsideAScenarioSweepsThatScenario) {
  const auto spec = parse_sweep_text(
      R"({"name": "q", "topology": {}, "sweep": {"grid": {"a": [1]}}})", "/d/q.json");
  EXPECT_EQ(spec.scenario, fs::path("/d/q.json"));
  EXPECT_EQ(expand_sweep(spec).size(), 1u);
}

TEST(Sweep, MalformedSweepFilesNameThePath) {
  auto error = [](const std::string& text) {
    try {
      parse_sweep_text(text, "sw.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(error(R"({"grid": {"a": [1]}})"),
            "sw.json: scenario: missing (required): the scenario file to sweep over");
  EXPECT_EQ(error(R"({"scenario": "s", "grid": {"a": []}})"),
            "sw.json: grid.a: expected a non-empty array of values");
  EXPECT_EQ(error(R"({"scenario": "s"})"),
            "sw.json: (root): nothing to sweep: give \"grid\", \"points\" or \"variants\"");
  EXPECT_NE(error(R"({"scenario": "s", "grid": {"a": [1]}, "gird": 1})")
                .find("sw.json: gird: expected a non-empty array of values (a grid path)"),
            std::string::npos);
  EXPECT_NE(error(R"({"scenario": "s", "points": [{"a": 1}, 3]})").find("points[1]"),
            std::string::npos);
  EXPECT_NE(error(R"({"scenario": "s", "grid": {"a.": [1]}})").find("malformed path"),
            std::string::npos);
  EXPECT_NE(error(R"({"name": "q", "sweep": {"scenario": "x", "grid": {"a": [1]}}})")
                .find("sw.json: sweep.scenario: a sweep inside a scenario sweeps that scenario"),
            std::string::npos);
  EXPECT_NE(error("{").find("invalid JSON"), std::string::npos);
}

TEST(Sweep, ShorthandGridPathsAtTheTopOfTheSection) {
  const auto spec = parse_sweep_text(
      R"({"name": "q", "sweep": {"system.memory": ["1MiB", "2MiB"], "system.policy": ["a", "b"],
          "set": {"seed": 2}}})",
      "/d/q.json");
  ASSERT_EQ(spec.grid.size(), 2u);
  EXPECT_EQ(spec.grid[0].first, "system.memory");  // file order
  EXPECT_EQ(spec.grid[1].first, "system.policy");
  EXPECT_EQ(expand_sweep(spec).size(), 4u);
  EXPECT_EQ(spec.set.size(), 1u);
}

TEST(Sweep, TidyCsvByHand) {
  const auto spec = parse_sweep_text(
      R"({"scenario": "s.json", "grid": {"name": ["a,b", "plain"]}, "points": [{"n": 1}]})",
      "/d/x.json");
  const auto points = expand_sweep(spec);
  std::map<std::size_t, RunOutcome> outcomes;
  outcomes[0].metrics = {{"t_s", 0.1}, {"z", 3}};
  outcomes[1].metrics = {{"t_s", 1e-9}};
  EXPECT_EQ(tidy_csv(spec, points, outcomes),
            "name,n,t_s,z\n"
            "\"a,b\",1,0.1,3\n"
            "plain,1,1e-09,\n");
  outcomes.erase(0);
  EXPECT_EQ(tidy_csv(spec, points, outcomes), "name,n,t_s\nplain,1,1e-09\n");
}

TEST(Sweep, RunsEveryPointInParallelIntoOneTidyCsv) {
  SweepTempDir tmp;
  const auto calls = tmp.path() / "calls";
  ::setenv("FAKE_MLSIM_CALLS", calls.c_str(), 1);
  const auto spec = grid_spec(tmp.path());
  const auto report = run_sweep(spec, tmp.path() / "out", kFake, 3, true);
  EXPECT_EQ(report.total, 12u);
  EXPECT_EQ(report.ran, 12u);
  EXPECT_TRUE(report.failed.empty());
  EXPECT_TRUE(report.missing.empty());
  const auto csv = read(tmp.path() / "out/sweep.csv");
  std::istringstream in(csv);
  std::string header, first, last, line;
  std::getline(in, header);
  std::getline(in, first);
  while (std::getline(in, line)) last = line;
  EXPECT_EQ(header, "a,b,d,product,sum,variant_len");
  EXPECT_EQ(first, "1,10,x,10,11,0");
  EXPECT_EQ(last, "2,30,y,60,32,0");
  EXPECT_EQ(lines(tmp.path() / "out/sweep.csv"), 13u);
  EXPECT_EQ(lines(calls), 12u);
}

TEST(Sweep, AnInterruptedSweepResumesWithoutRerunningFinishedPoints) {
  SweepTempDir tmp;
  const auto calls = tmp.path() / "calls";
  ::setenv("FAKE_MLSIM_CALLS", calls.c_str(), 1);
  const auto spec = grid_spec(tmp.path());
  // The reference: the whole sweep in one go.
  run_sweep(spec, tmp.path() / "ref", kFake, 2, true);
  const auto reference = read(tmp.path() / "ref/sweep.csv");
  fs::remove(calls);

  // Interrupted after k = 5 points: their results exist, the rest do not (a point killed while
  // running leaves no summary.json, only maybe its log).
  const auto points = expand_sweep(spec);
  const auto out = tmp.path() / "out";
  for (std::size_t i = 0; i < 5; ++i) {
    fs::create_directories(point_dir(out, points[i]));
    fs::copy_file(point_dir(tmp.path() / "ref", points[i]) / "summary.json",
                  point_dir(out, points[i]) / "summary.json");
  }
  fs::create_directories(point_dir(out, points[5]));  // started, never finished
  const auto report = run_sweep(spec, out, kFake, 2, true);
  EXPECT_EQ(report.skipped, 5u);
  EXPECT_EQ(report.ran, 7u);
  EXPECT_EQ(lines(calls), 7u);
  // None of the finished points ran again.
  const auto called = read(calls);
  for (std::size_t i = 0; i < 5; ++i)
    EXPECT_EQ(called.find(points[i].id), std::string::npos) << "point " << i << " ran again";
  EXPECT_EQ(read(out / "sweep.csv"), reference);

  // A second rerun has nothing left to do.
  fs::remove(calls);
  EXPECT_EQ(run_sweep(spec, out, kFake, 2, true).ran, 0u);
  EXPECT_FALSE(fs::exists(calls));
  EXPECT_EQ(read(out / "sweep.csv"), reference);
}

TEST(Sweep, FailedPointsAreReportedAndLeftOutOfTheCsv) {
  SweepTempDir tmp;
  ::setenv("FAKE_MLSIM_CALLS", (tmp.path() / "calls").c_str(), 1);
  const auto spec = parse_sweep_text(R"({"scenario": "s.json", "grid": {"a": [12, 13, 14]}})",
                                     tmp.path() / "sweep.json");
  const auto report = run_sweep(spec, tmp.path() / "out", kFake, 2, true);
  ASSERT_EQ(report.failed.size(), 1u);
  EXPECT_NE(report.failed[0].find("exit status 1"), std::string::npos);
  EXPECT_NE(report.failed[0].find("fails on purpose"), std::string::npos) << report.failed[0];
  EXPECT_EQ(report.missing.size(), 1u);
  EXPECT_EQ(read(tmp.path() / "out/sweep.csv"),
            "a,product,sum,variant_len\n12,0,12,0\n14,0,14,0\n");
}

TEST(Sweep, TheEmittedJobListUnderGnuParallelGivesTheSameCsv) {
  if (std::system("parallel --version >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "GNU parallel is not installed (tools/setup-debian.sh installs it)";
  SweepTempDir tmp;
  ::setenv("FAKE_MLSIM_CALLS", (tmp.path() / "calls").c_str(), 1);
  const auto spec = grid_spec(tmp.path());
  run_sweep(spec, tmp.path() / "pool", kFake, 2, true);

  const auto jobs = tmp.path() / "jobs";
  EXPECT_EQ(emit_sweep_jobs(spec, tmp.path() / "par", kFake, jobs), 12u);
  EXPECT_EQ(lines(jobs / "jobs.txt"), 12u);
  EXPECT_NE(read(jobs / "slurm.sh").find("#SBATCH --array=0-11"), std::string::npos);
  const std::string cmd = "parallel --will-cite -j 2 --joblog " + (jobs / "joblog").string() +
                          " < " + (jobs / "jobs.txt").string() + " > " +
                          (tmp.path() / "parallel.log").string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << read(tmp.path() / "parallel.log");
  // What collect.sh does, through the library (the CLI test runs collect.sh itself).
  const auto report = collect_sweep(spec, tmp.path() / "par");
  EXPECT_TRUE(report.missing.empty());
  EXPECT_EQ(read(tmp.path() / "par/sweep.csv"), read(tmp.path() / "pool/sweep.csv"));
  // Emitting again lists only what is left to do.
  EXPECT_EQ(emit_sweep_jobs(spec, tmp.path() / "par", kFake, jobs), 0u);
}

TEST(ProcessPool, ShellQuotingRoundTrips) {
  SweepTempDir tmp;
  const std::vector<std::string> argv{"printf", "%s|", "a b", "it's", "x=\"64MiB\"", "$HOME"};
  const std::string cmd = shell_command(argv) + " > " + (tmp.path() / "o").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_EQ(read(tmp.path() / "o"), "a b|it's|x=\"64MiB\"|$HOME|");
}
