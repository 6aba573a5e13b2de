// `mlsim check`, `compare` and `sweep` run as a user would run them, on a small INA scenario
// (two 2-worker ResNet-50 jobs, two iterations each: a fraction of a second per run).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/program_runner.hpp"

using mlsim::testing::read_file;
using mlsim::testing::run_in;
using mlsim::testing::run_mlsim;
using mlsim::testing::TempDir;
namespace fs = std::filesystem;

namespace {

void write_scenario(const TempDir& dir) {
  const std::string src = MLSIM_SOURCE_DIR;
  dir.write("small.json", R"({
    "name": "ina_small",
    "include": [")" + src + R"(/workloads/hardware/switches.json", ")" +
                              src +
                              R"(/workloads/hardware/gpus.json"],
    "topology": {"kind": "star", "hosts": 6, "link": {"bandwidth": "100Gbps", "latency": "500ns"},
                 "hardware": {"gpu": "V100-SXM2-32GB"}},
    "system": {"model": "ina", "policy": "dsa", "switch": "tofino-32x100g-atp",
               "aggregator_memory": "256KiB", "burst_values": 9920},
    "workload": {"profiled_on": "V100-SXM2-32GB",
                 "jobs": [{"model": "resnet50", "workers": 2, "iterations": 2, "count": 2,
                           "profile": ")" +
                              src + R"(/workloads/dnn/pipedream/resnet50/graph.txt"}],
                 "arrivals": {"process": "poisson", "mean_interarrival": "10ms"}},
    "variants": {"atp": {"system.policy": "atp"}, "dsa": {}},
    "baseline": "atp"
  })");
}

// Two claims on the scenario: the speedup of DSA over ATP in JCT, once with a band that holds
// the simulated figure and once with a band that excludes it.
void write_claims(const TempDir& dir, const std::string& in_band, const std::string& out_band) {
  auto claim = [](const std::string& id, const std::string& band) {
    return R"({"id": ")" + id + R"(", "paper": {"title": "t", "venue": "v"}, "figure": "f",
      "conditions": "c", "scenario": "small.json", "metric": "jct_mean_s",
      "compute": "speedup", "variant": "dsa", "baseline": "atp", "band": )" +
           band + R"(, "status": "reproduced"})";
  };
  dir.write("claims.json",
            R"({"claims": [)" + claim("holds", in_band) + "," + claim("leaves", out_band) + "]}");
}

std::string sweep_file() {
  return R"({"scenario": "small.json", "variants": ["atp", "dsa"],
             "grid": {"system.aggregator_memory": ["64KiB", "256KiB", "1MiB"]}})";
}

}  // namespace

TEST(CheckCommand, AFigureOutsideItsBandMakesCheckFail) {
  TempDir dir;
  write_scenario(dir);
  // With the two policies' JCT within 1% of each other on this uncontended setup, the speedup is
  // in [0.5, 2] and never in [3, 4].
  write_claims(dir, R"({"min": 0.5, "max": 2})", R"({"min": 3, "max": 4})");
  auto o = run_mlsim(dir, "check --claims claims.json --only holds");
  EXPECT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("holds"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("pass"), std::string::npos) << o.out;

  o = run_mlsim(dir, "check --claims claims.json -j 2");
  EXPECT_EQ(o.status, 1) << o.out << o.err;
  EXPECT_NE(o.out.find("FAIL"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("leaves: "), std::string::npos) << o.out;
  EXPECT_NE(o.err.find("2 claims, 2 runs"), std::string::npos) << o.err;  // runs shared
}

TEST(CheckCommand, BadClaimsAreInputErrors) {
  TempDir dir;
  write_scenario(dir);
  EXPECT_EQ(run_mlsim(dir, "check --claims missing.json").status, 2);
  write_claims(dir, R"({"min": 2, "max": 1})", R"({"max": 4})");
  auto o = run_mlsim(dir, "check --claims claims.json");
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.err.find("claims.json: claims[0].band: min 2 is greater than max 1"),
            std::string::npos)
      << o.err;
  write_claims(dir, R"({"max": 4})", R"({"max": 4})");
  EXPECT_EQ(run_mlsim(dir, "check --claims claims.json --only nope").status, 2);
  // A claim whose run cannot load (bad override) is reported before anything runs.
  dir.write("claims.json", R"({"claims": [{"id": "x", "paper": {"title": "t", "venue": "v"},
      "figure": "f", "conditions": "c", "scenario": "small.json", "metric": "jct_mean_s",
      "compute": "value", "set": {"system.aggregator_memory": "lots"}, "band": {"max": 1},
      "status": "reproduced"}]})");
  o = run_mlsim(dir, "check --claims claims.json");
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.err.find("system.aggregator_memory"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("(claim x)"), std::string::npos) << o.err;
}

TEST(CompareCommand, WritesTheTableJsonAndCsv) {
  TempDir dir;
  write_scenario(dir);
  const auto o =
      run_mlsim(dir, "compare small.json --out cmp -j 2 --set system.aggregator_memory=1MiB");
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("atp (baseline)"), std::string::npos) << o.out;
  const auto j = nlohmann::json::parse(read_file(dir.path() / "cmp/compare.json"));
  EXPECT_EQ(j["baseline"], "atp");
  EXPECT_EQ(j["variants"], nlohmann::json({"atp", "dsa"}));
  EXPECT_EQ(j["metrics"]["jct_mean_s"]["atp"]["ratio"], 1.0);
  const auto dsa = nlohmann::json::parse(read_file(dir.path() / "cmp/variants/dsa/summary.json"));
  EXPECT_EQ(j["metrics"]["jct_mean_s"]["dsa"]["value"], dsa["metrics"]["jct_mean_s"]);
  EXPECT_EQ(dsa["scenario"]["system"]["aggregator_memory"], "1MiB");
  EXPECT_NE(read_file(dir.path() / "cmp/compare.csv").find("jct_mean_s,dsa,"), std::string::npos);
  EXPECT_EQ(run_mlsim(dir, "compare small.json --baseline nope").status, 2);
}

TEST(SweepCommand, AnInterruptedSweepResumesAndGivesTheSameCsv) {
  TempDir dir;
  write_scenario(dir);
  dir.write("sweep.json", sweep_file());
  auto o = run_mlsim(dir, "sweep sweep.json -j 2 --out ref");
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  const auto reference = read_file(dir.path() / "ref/sweep.csv");
  EXPECT_EQ(std::count(reference.begin(), reference.end(), '\n'), 7);

  // Interrupted after 2 of 6 points: only their results are there.
  std::vector<fs::path> finished;
  for (const auto& e : fs::directory_iterator(dir.path() / "ref/points"))
    if (e.is_directory() && finished.size() < 2) finished.push_back(e.path().filename());
  std::map<fs::path, fs::file_time_type> stamps;
  for (const auto& id : finished) {
    fs::create_directories(dir.path() / "out/points" / id);
    fs::copy_file(dir.path() / "ref/points" / id / "summary.json",
                  dir.path() / "out/points" / id / "summary.json");
    stamps[id] = fs::last_write_time(dir.path() / "out/points" / id / "summary.json");
  }
  o = run_mlsim(dir, "sweep sweep.json -j 2 --out out");
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_NE(o.err.find("6 points, 2 already finished, 4 to run"), std::string::npos) << o.err;
  for (const auto& [id, t] : stamps)
    EXPECT_EQ(fs::last_write_time(dir.path() / "out/points" / id / "summary.json"), t)
        << "finished point " << id << " ran again";
  EXPECT_EQ(read_file(dir.path() / "out/sweep.csv"), reference);
}

TEST(SweepCommand, TheJobListUnderGnuParallelGivesTheSameCsvAsJobs) {
  if (std::system("parallel --version >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "GNU parallel is not installed (tools/setup-debian.sh installs it)";
  TempDir dir;
  write_scenario(dir);
  dir.write("sweep.json", sweep_file());
  ASSERT_EQ(run_mlsim(dir, "sweep sweep.json -j 2 --out ref").status, 0);
  auto o = run_mlsim(dir, "sweep sweep.json --out par --emit-jobs jobs");
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("6 jobs"), std::string::npos) << o.out;
  EXPECT_FALSE(fs::exists(dir.path() / "par/sweep.csv"));  // nothing ran
  EXPECT_NE(read_file(dir.path() / "jobs/slurm.sh").find("--array=0-5"), std::string::npos);
  // Collecting before the jobs ran reports the missing points.
  EXPECT_EQ(run_in(dir, "sh jobs/collect.sh").status, 1);
  o = run_in(dir, "sh jobs/parallel.sh --will-cite -j 2");
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_EQ(read_file(dir.path() / "par/sweep.csv"), read_file(dir.path() / "ref/sweep.csv"));
}

TEST(SweepCommand, BadPointsAreInputErrorsBeforeAnythingRuns) {
  TempDir dir;
  write_scenario(dir);
  dir.write("sweep.json",
            R"({"scenario": "small.json", "grid": {"system.aggregator_memory": ["1MiB", "x"]}})");
  const auto o = run_mlsim(dir, "sweep sweep.json --out out");
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.err.find("system.aggregator_memory"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("in sweep point 1"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(dir.path() / "out/points"));
}

namespace {

// The DSA study's sweeps over what its paper does not state (issue 14; docs/ina.md, "Arrival
// rate, job mix, workers per job and seeds"): every setting runs under DSA, ATP and SwitchML with
// the same 3 seeds, so each setting's gain has a spread over seeds. `jobs` is the sweep's job list;
// returns the number of settings (0 after a failed check).
int expect_three_policies_and_three_seeds_per_setting(const std::string& name,
                                                      const std::string& jobs) {
  std::map<std::string, int> per_policy_seed;
  int runs = 0;
  std::istringstream in(jobs);
  for (std::string line; std::getline(in, line); ++runs)
    for (const char* policy : {"switchml", "atp", "dsa"})
      for (const char* seed : {"1", "2", "3"})
        if (line.find(std::string(" --set system.policy=") + policy) != std::string::npos &&
            line.find(std::string(" --set seed=") + seed + " ") != std::string::npos)
          ++per_policy_seed[std::string(policy) + "/" + seed];
  EXPECT_EQ(per_policy_seed.size(), 9u) << name << "\n" << jobs;
  if (per_policy_seed.size() != 9u) return 0;
  const int settings = per_policy_seed.begin()->second;
  EXPECT_GE(settings, 3) << name;
  for (const auto& [key, count] : per_policy_seed) EXPECT_EQ(count, settings) << name << " " << key;
  EXPECT_EQ(runs, 9 * settings) << name;
  return settings;
}

}  // namespace

// Every sweep file shipped in workloads/sweeps/ expands and validates (each point's overrides on
// its scenario, as `mlsim sweep` checks them before running) without running anything, so a sweep
// whose scenario moved on under it fails here rather than an hour into its run. Files whose
// scenario mentions ../shared/data are skipped when that folder is absent, as in
// tests/cli/validate_agrees_with_run_test.cpp.
TEST(SweepCommand, EveryShippedSweepFileValidatesWithoutRunning) {
  const fs::path sweeps = fs::path(MLSIM_SOURCE_DIR) / "workloads/sweeps";
  const bool have_shared = fs::exists(fs::path(MLSIM_SHARED_DATA_DIR) / "llm_traces");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(sweeps))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  TempDir dir;
  int checked = 0, dsa_sweeps = 0;
  std::map<std::string, int> dsa_settings;  // per DSA sweep file: its settings
  for (const fs::path& file : files) {
    const auto sweep = nlohmann::json::parse(read_file(file));
    const auto scenario = file.parent_path() / sweep.at("scenario").get<std::string>();
    if (!have_shared && read_file(scenario).find("shared/data") != std::string::npos) continue;
    const std::string name = file.stem().string();
    const auto o = run_mlsim(
        dir, "sweep " + file.string() + " --out out/" + name + " --emit-jobs jobs/" + name);
    ASSERT_EQ(o.status, 0) << file << "\n" << o.out << o.err;
    const std::string jobs = read_file(dir.path() / "jobs" / name / "jobs.txt");
    const auto n = std::count(jobs.begin(), jobs.end(), '\n');
    EXPECT_GT(n, 0) << file;
    EXPECT_NE(o.out.find(std::to_string(n) + " jobs (0 points finished already)"),
              std::string::npos)
        << file << "\n"
        << o.out;
    EXPECT_FALSE(fs::exists(dir.path() / "out" / name / "points")) << file;  // nothing ran
    if (name.rfind("ina_dsa_", 0) == 0) {
      dsa_settings[name] = expect_three_policies_and_three_seeds_per_setting(name, jobs);
      ++dsa_sweeps;
    }
    ++checked;
  }
  EXPECT_GE(checked, 20);
  // Arrivals, job mix, workers per job: each at 3 iterations per job and at full size (`_full`:
  // the scenario's 20 iterations, so no job is cut to 3), the latter over the same settings.
  EXPECT_EQ(dsa_sweeps, 6);
  for (const char* lever : {"ina_dsa_arrivals", "ina_dsa_job_mix", "ina_dsa_workers"}) {
    const std::string full = std::string(lever) + "_full";
    ASSERT_TRUE(dsa_settings.count(lever) && dsa_settings.count(full)) << lever;
    EXPECT_EQ(dsa_settings[full], dsa_settings[lever]) << full;
    const std::string jobs = read_file(dir.path() / "jobs" / full / "jobs.txt");
    EXPECT_EQ(jobs.find("iterations=3"), std::string::npos) << full;
    EXPECT_EQ(jobs.find("\"iterations\":3"), std::string::npos) << full;
  }
}
