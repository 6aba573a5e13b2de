// Runs the built `mlsim` program as a user would: exit statuses, error messages, and that an
// input error writes nothing.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/registry.hpp"
#include "tests/support/program_runner.hpp"
#include "tests/support/serving_scenarios.hpp"

using mlsim::testing::read_file;
using mlsim::testing::run_mlsim;
using mlsim::testing::TempDir;

namespace {

// A scenario that is valid up to the model section; models are checked where they land.
const char* kScenario = R"({
  "name": "cli_test",
  "include": ["../../workloads/hardware/gpus.json"],
  "topology": {"kind": "ring", "hosts": 4, "link": {"bandwidth": "50GB/s", "latency": "500ns"}},
  "network": {"backend": "flow"},
  "system": {"model": "no_such_model"}
})";

std::string scenario_in(const TempDir& dir) {
  // Placed two levels below a copy of workloads/hardware so the include resolves.
  const auto hw = std::filesystem::path(MLSIM_SOURCE_DIR) / "workloads/hardware/gpus.json";
  dir.write("workloads/hardware/gpus.json", read_file(hw));
  return dir.write("a/b/scenario.json", kScenario).string();
}

}  // namespace

TEST(Cli, NoSubcommandIsAUsageError) {
  TempDir dir;
  auto o = run_mlsim(dir, "");
  EXPECT_EQ(o.status, 2);
}

TEST(Cli, UnknownModelExitsTwoWithFileAndPathAndWritesNothing) {
  TempDir dir;
  const auto file = scenario_in(dir);
  const auto out_dir = dir.path() / "results";
  auto o = run_mlsim(dir, "run " + file + " --out " + out_dir.string());
  EXPECT_EQ(o.status, 2) << o.err;
  EXPECT_EQ(o.err.rfind("error: " + file + ": system.model: ", 0), 0u) << o.err;
  EXPECT_FALSE(std::filesystem::exists(out_dir));
  EXPECT_TRUE(o.out.empty());
}

TEST(Cli, BadSetPathExitsTwo) {
  TempDir dir;
  const auto file = scenario_in(dir);
  auto o = run_mlsim(dir, "validate " + file + " --set topology..hosts=3");
  EXPECT_EQ(o.status, 2);
  EXPECT_EQ(o.err, "error: --set: malformed path \"topology..hosts\": empty key\n");
  auto p = run_mlsim(
      dir, "run " + file + " --set topology.hosts=0 --out " + (dir.path() / "r").string());
  EXPECT_EQ(p.status, 2);
  EXPECT_EQ(p.err, "error: --set: topology.hosts: expected an integer in [2, 1048576], got 0\n");
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "r"));
}

TEST(Cli, MissingScenarioFileExitsTwo) {
  TempDir dir;
  auto o = run_mlsim(dir, "validate " + (dir.path() / "nope.json").string());
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.err.find("file not found"), std::string::npos) << o.err;
}

TEST(Cli, ErrorInAnIncludedCatalogNamesThatFile) {
  TempDir dir;
  const auto file = scenario_in(dir);
  auto o =
      run_mlsim(dir, "validate " + file + " --set hardware.gpus.V100-SXM2-32GB.hbm_capacity=32");
  EXPECT_EQ(o.status, 2);
  EXPECT_EQ(o.err.rfind("error: --set: hardware.gpus.V100-SXM2-32GB.hbm_capacity: expected a "
                        "size as a string with a unit",
                        0),
            0u)
      << o.err;
  dir.write("workloads/hardware/gpus.json", R"({"hardware": {"gpus": {"X": {}}}})");
  auto p = run_mlsim(dir, "validate " + file);
  EXPECT_EQ(p.status, 2);
  const auto catalog = (dir.path() / "workloads/hardware/gpus.json").lexically_normal().string();
  EXPECT_EQ(p.err.rfind("error: " + catalog + ": hardware.gpus.X._source: missing", 0), 0u)
      << p.err;
}

TEST(Cli, OutputPathThatIsAFileIsRefusedBeforeRunning) {
  TempDir dir;
  const auto file = scenario_in(dir);
  dir.write("taken", "x");
  auto o = run_mlsim(dir, "run " + file + " --set system.model=no_such_model --out " +
                              (dir.path() / "taken").string());
  EXPECT_EQ(o.status, 2);
  EXPECT_EQ(read_file(dir.path() / "taken"), "x");
}

TEST(Cli, ListShowsBackendsAndTheShippedHardware) {
  TempDir dir;
  auto o = run_mlsim(dir, "list");
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("flow"), std::string::npos);
  EXPECT_NE(o.out.find("analytic"), std::string::npos);
  EXPECT_NE(o.out.find("H100-SXM5-80GB"), std::string::npos);
  EXPECT_NE(o.out.find("tofino-32x100g-atp"), std::string::npos);
  EXPECT_NE(o.out.find("llama-2-70b"), std::string::npos);  // the LLM model catalog
}

TEST(Cli, ListShowsEveryRegisteredPolicyWithItsDescription) {
  TempDir dir;
  auto o = run_mlsim(dir, "list");
  ASSERT_EQ(o.status, 0) << o.err;
  const mlsim::Registries registries = mlsim::make_registries();
  ASSERT_FALSE(registries.models.all().empty());
  for (const auto& m : registries.models.all())
    for (const auto& p : m.policies) {
      EXPECT_NE(o.out.find(p.name), std::string::npos) << m.name << " " << p.name;
      EXPECT_NE(o.out.find(p.description), std::string::npos) << m.name << " " << p.name;
    }
}

// Issue 17: the exact commands of its defects 1, 4, 6 and 8, as a user runs them.
namespace {
const std::string kQuickstart =
    std::string(MLSIM_SOURCE_DIR) + "/workloads/scenarios/quickstart.json";
}

TEST(Cli, TimeAndRateBoundsAreInputErrorsAtValidate) {
  TempDir dir;
  for (const char* set :
       {"topology.host_link.latency=9223372036854775807ns",
        "topology.host_link.latency=9223372036s", "topology.host_link.bandwidth=1e-3bps"}) {
    const auto o = run_mlsim(dir, "validate " + kQuickstart + " --set " + set);
    EXPECT_EQ(o.status, 2) << set << "\n" << o.err;
    EXPECT_EQ(o.err.rfind("error: --set: topology.host_link.", 0), 0u) << o.err;
  }
}

TEST(Cli, AClockOverflowMidRunStopsWithStatusOneAndWritesNothing) {
  TempDir dir;
  // 10 years per hop is accepted, but the ring's 30 steps over 2-3 hops pass 292 years.
  const auto o =
      run_mlsim(dir, "run " + kQuickstart + " --set topology.host_link.latency=87600h --out out");
  EXPECT_EQ(o.status, 1) << o.err;
  EXPECT_NE(o.err.find("error: the run stopped, nothing was written: simulated time out of "
                       "range"),
            std::string::npos)
      << o.err;
  EXPECT_EQ(o.err.find("internal error"), std::string::npos) << o.err;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "out"));
}

TEST(Cli, DeepSetPathIsRefusedAtOnce) {
  TempDir dir;
  std::string path = "_x";
  for (int i = 0; i < 20'000; ++i) path += ".a";
  const auto o = run_mlsim(dir, "run " + kQuickstart + " --out out --set " + path + "=1");
  EXPECT_EQ(o.status, 2) << o.err;
  EXPECT_NE(o.err.find("deeper than 64 levels"), std::string::npos) << o.err;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "out"));
}

TEST(Cli, UnwritableOutputIsRefusedBeforeSimulating) {
  TempDir dir;
  for (const char* out : {"/proc/x", "''"}) {
    const auto o = run_mlsim(dir, "run " + kQuickstart + " --out " + out);
    EXPECT_EQ(o.status, 2) << out << "\n" << o.err;
    EXPECT_EQ(o.err.rfind("error: --out: cannot write results into", 0), 0u) << o.err;
    EXPECT_TRUE(o.out.empty()) << o.out;  // no run summary: nothing was simulated
  }
}

TEST(Cli, AVariantsErrorNamesTheVariant) {
  TempDir dir;
  const auto o = run_mlsim(dir, "validate " + kQuickstart + " --variant ps --set system.servers=0");
  EXPECT_EQ(o.status, 2) << o.err;
  EXPECT_NE(o.err.find("(with variant \"ps\")"), std::string::npos) << o.err;
}

TEST(Cli, BudgetsRefuseUpFrontOrStopTheRunWithNothingWritten) {
  TempDir dir;
  const std::string q =
      (std::filesystem::path(MLSIM_SOURCE_DIR) / "workloads/scenarios/quickstart.json").string();
  const auto out_dir = dir.path() / "results";
  // A run that passes its event budget mid-way: status 1, a message naming the option, no folder.
  auto o = run_mlsim(
      dir, "run " + q + " --set system.chunks=1024 --max-events 1000 --out " + out_dir.string());
  EXPECT_EQ(o.status, 1) << o.err;
  EXPECT_NE(o.err.find("--max-events"), std::string::npos) << o.err;
  EXPECT_FALSE(std::filesystem::exists(out_dir));
  // An estimate above the budget is bad input, refused by validate as by run.
  const std::string failures =
      R"( --set 'events={"random_failures": {"mtbf": "1ns", "repair": "1ns", "until": "10s"}}')";
  auto v = run_mlsim(dir, "validate " + q + failures);
  EXPECT_EQ(v.status, 2) << v.err;
  EXPECT_NE(v.err.find("events.random_failures.mtbf"), std::string::npos) << v.err;
  auto r = run_mlsim(dir, "run " + q + failures + " --out " + out_dir.string());
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out_dir));
  // Malformed budgets.
  EXPECT_EQ(run_mlsim(dir, "validate " + q + " --max-events 0").status, 2);
  auto m = run_mlsim(dir, "validate " + q + " --max-memory lots");
  EXPECT_EQ(m.status, 2);
  EXPECT_NE(m.err.find("--max-memory"), std::string::npos) << m.err;
}

TEST(Cli, OutputTraceWritesTheIterationsAsSpansAndARerunWithoutItRemovesThem) {
  // Two requests far apart (0.001 per second) of 1024 prompt and 3 output tokens on one idle
  // Llama-2-7B replica: each is one prefill iteration (its first token) and two decodes, so the
  // trace holds 6 iteration spans, and a prefill span lasts exactly that request's TTFT.
  TempDir dir;
  dir.write("s.json", mlsim::testing::small_serving_scenario({.name = "trace_test",
                                                              .rate = 0.001,
                                                              .count = 2,
                                                              .prompt_tokens = 1024,
                                                              .output_tokens = 3}));
  auto o = run_mlsim(dir, "run s.json --quiet --out r --set output.trace=true");
  ASSERT_EQ(o.status, 0) << o.err;
  const auto trace = nlohmann::json::parse(read_file(dir.path() / "r" / "trace.json"));
  const auto summary = nlohmann::json::parse(read_file(dir.path() / "r" / "summary.json"));
  EXPECT_EQ(summary["trace"], "trace.json");
  int prefill = 0, decode = 0;
  double prefill_us = 0;
  for (const auto& e : trace) {
    if (e["ph"] != "X") continue;
    if (e["name"] == "prefill") {
      ++prefill;
      prefill_us = e["dur"].get<double>();
    }
    if (e["name"] == "decode") ++decode;
  }
  EXPECT_EQ(prefill, 2);
  EXPECT_EQ(decode, 4);
  EXPECT_NEAR(prefill_us * 1e-6, summary["metrics"]["serving_ttft_max_s"].get<double>(), 1e-9);
  // The same run writes the same bytes.
  ASSERT_EQ(run_mlsim(dir, "run s.json --quiet --out r2 --set output.trace=true").status, 0);
  EXPECT_EQ(read_file(dir.path() / "r" / "trace.json"),
            read_file(dir.path() / "r2" / "trace.json"));
  // Rerun into the same folder without a trace: the old one goes, summary.json names none.
  ASSERT_EQ(run_mlsim(dir, "run s.json --quiet --out r").status, 0);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "r" / "trace.json"));
  EXPECT_FALSE(
      nlohmann::json::parse(read_file(dir.path() / "r" / "summary.json")).contains("trace"));
}

// GPU memory in which no pipeline configuration fits: refused with the JSON path, exit 2, by
// validate and by run (which writes nothing).
TEST(Cli, PipelineMemoryThatFitsNothingIsRefusedAtItsPath) {
  TempDir dir;
  const std::string vgg =
      std::string(MLSIM_SOURCE_DIR) + "/workloads/scenarios/pipeline_vgg16_dynamic.json";
  const std::string set =
      " --variant autopipe_static --set "
      "'system.memory={\"constraint\":true,\"capacity\":\"4GiB\"}'";
  const auto v = run_mlsim(dir, "validate " + vgg + set);
  EXPECT_EQ(v.status, 2) << v.err;
  EXPECT_NE(v.err.find("system.memory.capacity: no configuration of the 40 layers on 4 hosts"),
            std::string::npos)
      << v.err;
  const auto out_dir = dir.path() / "out";
  const auto r = run_mlsim(dir, "run " + vgg + set + " --out " + out_dir.string());
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out_dir));
  // The catalog's V100-SXM2-16GB (16 GiB) fits a configuration: accepted.
  const auto ok =
      run_mlsim(dir, "validate " + vgg +
                         " --variant autopipe_static --set 'system.memory={\"constraint\":true}'"
                         " --set topology.hardware.gpu=V100-SXM2-16GB");
  EXPECT_EQ(ok.status, 0) << ok.err;
}
