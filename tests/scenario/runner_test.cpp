#include "sim_core/run/runner.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "sim_core/base/error.hpp"
#include "sim_core/run/results_writer.hpp"
#include "test_registries.hpp"

using namespace mlsim;
using mlsim::testing::TempDir;
using nlohmann::json;

namespace {

const char* kProbeScenario = R"({
  "name": "probe_run",
  "seed": 42,
  "topology": {"kind": "star", "hosts": 2, "link": {"bandwidth": "1Gbps", "latency": "0ns"}},
  "network": {"backend": "flow", "delay": "1us"},
  "system": {"model": "probe", "bytes": "1KiB"}
})";

LoadedScenario load(const TempDir& dir, std::vector<std::string> sets = {}) {
  const auto file = dir.write("probe.json", kProbeScenario);
  ScenarioRequest req{file, {}, {}};
  for (const auto& s : sets) req.overrides.push_back(parse_set_option(s));
  static const auto registries = mlsim::testing::make_test_registries();
  return load_scenario(req, registries);
}

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST(Runner, RunsTheModelToIdleWithHandComputedTimes) {
  TempDir dir;
  const auto registries = mlsim::testing::make_test_registries();
  auto s = load(dir);
  auto out = run_scenario(s, registries);
  // Three messages, one after the other, each delivered 1 us after it starts.
  EXPECT_EQ(out.results.metrics().at("messages_delivered"), 3);
  EXPECT_DOUBLE_EQ(out.results.metrics().at("finish_time_s"), 3e-6);
  EXPECT_EQ(out.info.events_processed, 3u);
  EXPECT_EQ(out.info.simulated_time, Time::us(3));
  EXPECT_FALSE(out.info.hit_time_limit);
  EXPECT_EQ(out.info.seed, 42u);
  EXPECT_EQ(out.info.backend, "flow");
  EXPECT_EQ(out.info.network.transfers_delivered, 3u);
  EXPECT_EQ(out.info.network.bytes_delivered.count, 3 * 1024);
  // The model's default for "messages" is echoed in the resolved scenario.
  EXPECT_EQ(out.resolved_scenario["system"]["messages"], 3);
  EXPECT_EQ(out.resolved_scenario["network"]["delay"], "1us");
}

TEST(Runner, TimeLimitCutsTheRun) {
  TempDir dir;
  const auto registries = mlsim::testing::make_test_registries();
  auto s = load(dir, {"run.time_limit=2500ns"});
  auto out = run_scenario(s, registries);
  EXPECT_EQ(out.results.metrics().at("messages_delivered"), 2);
  EXPECT_TRUE(out.info.hit_time_limit);
  EXPECT_EQ(out.info.simulated_time, Time::ns(2500));
}

TEST(Runner, ProgressReportsUseTheModelsFraction) {
  TempDir dir;
  const auto registries = mlsim::testing::make_test_registries();
  auto s = load(dir);
  std::vector<ProgressReport> reports;
  RunOptions opt;
  opt.progress_every = 1;
  opt.on_progress = [&](const ProgressReport& r) { reports.push_back(r); };
  run_scenario(s, registries, opt);
  ASSERT_EQ(reports.size(), 3u);
  EXPECT_DOUBLE_EQ(reports[0].fraction_done, 1.0 / 3);
  EXPECT_EQ(reports[0].events, 1u);
  EXPECT_EQ(reports[1].simulated, Time::us(2));
  EXPECT_DOUBLE_EQ(reports[2].fraction_done, 1.0);
  EXPECT_TRUE(reports[2].eta_seconds.has_value());
}

TEST(Runner, ModelSectionErrorsArriveBeforeTheRunWithTheFile) {
  TempDir dir;
  const auto registries = mlsim::testing::make_test_registries();
  auto s = load(dir, {"system.bytess=3"});
  try {
    PreparedRun prepared(s, registries);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "--set");
    EXPECT_EQ(e.path(), "system.bytess");
    EXPECT_NE(e.message().find("unknown key"), std::string::npos);
  }
  auto t = load(dir, {"system.messages=0"});
  try {
    PreparedRun prepared(t, registries);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "system.messages");
  }
}

TEST(ResultsWriter, WritesSummaryAndExactCsv) {
  TempDir dir;
  const auto registries = mlsim::testing::make_test_registries();
  auto out = run_scenario(load(dir), registries);
  const auto target = dir.path() / "out" / "probe";
  const auto files = write_results(out, target);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(read(target / "deliveries.csv"),
            "time_s,count\n0.000001000,1\n0.000002000,2\n0.000003000,3\n");
  const auto summary = json::parse(read(target / "summary.json"));
  EXPECT_EQ(summary["name"], "probe_run");
  EXPECT_EQ(summary["seed"], 42);
  EXPECT_EQ(summary["metrics"]["messages_delivered"], 3.0);
  EXPECT_EQ(summary["run"]["events_processed"], 3);
  EXPECT_EQ(summary["run"]["simulated_time_ns"], 3000);
  EXPECT_EQ(summary["series"], json::array({"deliveries.csv"}));
  EXPECT_EQ(summary["scenario"]["system"]["bytes"], "1KiB");
  EXPECT_TRUE(summary["wall"].contains("wall_time_s"));
  EXPECT_EQ(summary["details"]["network_backend"], "fixed");
  // No temporary file is left behind.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(target)) ++entries;
  EXPECT_EQ(entries, 2);
}

TEST(ResultsWriter, SameScenarioAndSeedGiveIdenticalSummaryApartFromWall) {
  TempDir dir;
  const auto registries = mlsim::testing::make_test_registries();
  auto strip = [](const std::filesystem::path& p) {
    auto j = json::parse(read(p));
    j.erase("wall");
    return j.dump(2);
  };
  write_results(run_scenario(load(dir), registries), dir.path() / "a");
  write_results(run_scenario(load(dir), registries), dir.path() / "b");
  EXPECT_EQ(strip(dir.path() / "a/summary.json"), strip(dir.path() / "b/summary.json"));
  EXPECT_EQ(read(dir.path() / "a/deliveries.csv"), read(dir.path() / "b/deliveries.csv"));
  // A different seed changes the random draw, so the comparison can fail.
  write_results(run_scenario(load(dir, {"seed=43"}), registries), dir.path() / "c");
  EXPECT_NE(strip(dir.path() / "a/summary.json"), strip(dir.path() / "c/summary.json"));
}

TEST(ResultsWriter, FailureLeavesNothingBehind) {
  TempDir dir;
  const auto registries = mlsim::testing::make_test_registries();
  auto out = run_scenario(load(dir), registries);
  // A bad series name is a model bug, found before any file is created.
  out.results.add_series(TimeSeries{"../escape", {"x"}, {}});
  const auto target = dir.path() / "never";
  EXPECT_THROW(write_results(out, target), InvariantError);
  EXPECT_FALSE(std::filesystem::exists(target));
  // The target exists as a file: an error, and the file is untouched.
  RunOutput ok = run_scenario(load(dir), registries);
  dir.write("plainfile", "keep");
  EXPECT_THROW(write_results(ok, dir.path() / "plainfile"), std::runtime_error);
  EXPECT_EQ(read(dir.path() / "plainfile"), "keep");
}

TEST(ResultsWriter, CsvTimesAreExactDecimals) {
  TimeSeries s{"x", {"a", "b,c"}, {}};
  s.add(Time::ns(1'234'567'890'123), {0.1, -2});
  s.add(Time::ns(-5), {1e300, std::nan("")});
  EXPECT_EQ(series_csv(s), "time_s,a,\"b,c\"\n1234.567890123,0.1,-2\n-0.000000005,1e+300,nan\n");
}

// Issue 17, defect 7: a rerun into a folder kept the previous run's series beside the new
// summary. The previous summary.json lists its CSVs; those the new run does not write go.
TEST(ResultsWriter, RerunIntoTheSameFolderRemovesSeriesItNoLongerWrites) {
  TempDir dir;
  const auto registries = mlsim::testing::make_test_registries();
  const auto target = dir.path() / "out";
  auto first = run_scenario(load(dir), registries);
  first.results.add_series(TimeSeries{"extra", {"x"}, {}});
  write_results(first, target);
  ASSERT_TRUE(std::filesystem::exists(target / "extra.csv"));
  dir.write("out/notes.txt", "mine");  // not listed by any summary: never touched
  write_results(run_scenario(load(dir), registries), target);
  EXPECT_FALSE(std::filesystem::exists(target / "extra.csv"));
  EXPECT_TRUE(std::filesystem::exists(target / "deliveries.csv"));
  EXPECT_EQ(read(target / "notes.txt"), "mine");
}

// SIGKILL cannot be caught: a killed writer's temporaries are removed by the next writer into
// the folder, once their pid is not running. A live pid's temporary stays.
TEST(ResultsWriter, TemporariesOfADeadWriterAreRemovedByTheNext) {
  TempDir dir;
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  int status = 0;
  ::waitpid(dead, &status, 0);  // reaped: the pid is free (reuse within the test is unlikely)
  const auto target = dir.path() / "out";
  const auto stale = dir.write("out/.deliveries.csv.tmp." + std::to_string(dead), "half");
  const auto live = dir.write("out/.deliveries.csv.tmp." + std::to_string(::getppid()), "x");
  const auto registries = mlsim::testing::make_test_registries();
  write_results(run_scenario(load(dir), registries), target);
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(live));
}

// Issue 17, defect 6: `--out ''` and `--out /proc/x` simulated first and then failed with an
// internal filesystem error. OutputFolder refuses them before the run, as input errors.
TEST(OutputFolder, UnusableFoldersAreInputErrorsAndCreatedFoldersGoAgain) {
  TempDir dir;
  EXPECT_THROW(OutputFolder("", "--out"), InputError);
  try {
    OutputFolder("/proc/mlsim-no-such/x", "--out");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "--out");
    EXPECT_NE(e.message().find("cannot write results into \"/proc/mlsim-no-such/x\""),
              std::string::npos)
        << e.message();
  }
  dir.write("file", "x");
  EXPECT_THROW(OutputFolder(dir.path() / "file" / "sub", "output.dir"), InputError);
  {
    OutputFolder f(dir.path() / "a" / "b", "--out");
    EXPECT_TRUE(std::filesystem::is_directory(dir.path() / "a" / "b"));
  }  // not kept: both created levels are removed
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "a"));
  {
    OutputFolder f(dir.path() / "c", "--out");
    f.keep();
  }
  EXPECT_TRUE(std::filesystem::is_directory(dir.path() / "c"));
  // Only the probe file was written and it is gone.
  EXPECT_TRUE(std::filesystem::is_empty(dir.path() / "c"));
}
