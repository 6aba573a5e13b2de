// Every way a scenario can be wrong that we promise to catch, each with the exact file, JSON path
// and message it must produce, before anything is simulated.
#include <gtest/gtest.h>

#include <functional>

#include "sim_core/base/error.hpp"
#include "sim_core/run/scenario.hpp"
#include "test_registries.hpp"

using namespace mlsim;
using mlsim::testing::TempDir;
using nlohmann::json;

namespace {

json valid_scenario() {
  return json::parse(R"({
    "name": "t",
    "seed": 7,
    "include": ["hw.json"],
    "topology": {"kind": "ring", "hosts": 4, "link": {"bandwidth": "50GB/s", "latency": "500ns"}},
    "network": {"backend": "flow"},
    "system": {"model": "probe", "bytes": "1MiB"},
    "variants": {"big": {"system.bytes": "2MiB"}},
    "baseline": "big"
  })");
}

json valid_hardware() {
  return json::parse(R"({"hardware": {"gpus": {"G": {"_source": "test",
      "peak": {"fp16": "100TFLOPS"}, "hbm_bandwidth": "1TB/s", "hbm_capacity": "16GiB"}}}})");
}

struct MalformedCase {
  std::string name;
  std::function<void(json& scenario, json& hardware)> mutate;
  std::vector<std::string> sets = {};
  std::optional<std::string> variant = {};
  std::string file = "scenario.json";  // file name the error must name
  std::string path;                    // JSON path it must name
  std::string fragment;                // part of the message
  std::string raw_text = {};           // replaces the scenario file's text when set
};

// Test names, not a byte dump, when a case fails.
void PrintTo(const MalformedCase& c, std::ostream* os) {
  *os << c.name;
}

void set(json& j, const char* pointer, json v) {
  j[json::json_pointer(pointer)] = std::move(v);
}

std::vector<MalformedCase> malformed_cases() {
  return {
      {"unknown top-level key",
       [](json& s, json&) { s["nmae"] = "x"; },
       {},
       {},
       "scenario.json",
       "nmae",
       "unknown key (known keys here:"},
      {"missing name",
       [](json& s, json&) { s.erase("name"); },
       {},
       {},
       "scenario.json",
       "name",
       "missing (required)"},
      {"name not usable as a folder",
       [](json& s, json&) { s["name"] = "a/b"; },
       {},
       {},
       "scenario.json",
       "name",
       "expected a name of letters, digits"},
      {"seed of wrong type",
       [](json& s, json&) { s["seed"] = "7"; },
       {},
       {},
       "scenario.json",
       "seed",
       "expected an integer in [0, 9223372036854775807], got the string \"7\""},
      {"negative seed",
       [](json& s, json&) { s["seed"] = -1; },
       {},
       {},
       "scenario.json",
       "seed",
       "expected an integer in [0, 9223372036854775807], got -1"},
      {"unknown key in topology",
       [](json& s, json&) { s["topology"]["host"] = 4; },
       {},
       {},
       "scenario.json",
       "topology.host",
       "unknown key"},
      {"unknown topology kind",
       [](json& s, json&) { s["topology"]["kind"] = "torus"; },
       {},
       {},
       "scenario.json",
       "topology.kind",
       "expected one of \"star\", \"ring\""},
      {"zero hosts in a ring",
       [](json& s, json&) { s["topology"]["hosts"] = 0; },
       {},
       {},
       "scenario.json",
       "topology.hosts",
       "expected an integer in [2, 1048576], got 0"},
      {"zero hosts on a star",
       [](json& s, json&) {
         s["topology"]["kind"] = "star";
         s["topology"]["hosts"] = 0;
       },
       {},
       {},
       "scenario.json",
       "topology.hosts",
       "expected an integer in [1, 1048576], got 0"},
      {"hosts of wrong type",
       [](json& s, json&) { s["topology"]["hosts"] = "4"; },
       {},
       {},
       "scenario.json",
       "topology.hosts",
       "got the string \"4\""},
      {"negative bandwidth",
       [](json& s, json&) { set(s, "/topology/link/bandwidth", "-50GB/s"); },
       {},
       {},
       "scenario.json",
       "topology.link.bandwidth",
       "must not be negative"},
      {"zero bandwidth",
       [](json& s, json&) { set(s, "/topology/link/bandwidth", "0Gbps"); },
       {},
       {},
       "scenario.json",
       "topology.link.bandwidth",
       "must be at least 1Kbps"},
      {"bandwidth without unit",
       [](json& s, json&) { set(s, "/topology/link/bandwidth", "50"); },
       {},
       {},
       "scenario.json",
       "topology.link.bandwidth",
       "the unit is missing"},
      {"bandwidth as a bare number",
       [](json& s, json&) { set(s, "/topology/link/bandwidth", 50); },
       {},
       {},
       "scenario.json",
       "topology.link.bandwidth",
       "expected a bandwidth as a string with a unit, got the number 50"},
      {"bandwidth with a size unit",
       [](json& s, json&) { set(s, "/topology/link/bandwidth", "50GB"); },
       {},
       {},
       "scenario.json",
       "topology.link.bandwidth",
       "unknown unit"},
      {"negative latency",
       [](json& s, json&) { set(s, "/topology/link/latency", "-1us"); },
       {},
       {},
       "scenario.json",
       "topology.link.latency",
       "must not be negative"},
      {"odd fat-tree k",
       [](json& s, json&) {
         s["topology"] = {{"kind", "fat_tree"}, {"k", 5}, {"link", s["topology"]["link"]}};
       },
       {},
       {},
       "scenario.json",
       "topology.k",
       "expected an even k"},
      {"fat-tree k too large",
       [](json& s, json&) {
         s["topology"] = {{"kind", "fat_tree"}, {"k", 66}, {"link", s["topology"]["link"]}};
       },
       {},
       {},
       "scenario.json",
       "topology.k",
       "expected an integer in [2, 64], got 66"},
      {"several leaves without a spine",
       [](json& s, json&) {
         s["topology"] = json::parse(R"({"kind": "leaf_spine", "leaves": 2, "hosts_per_leaf": 2,
             "spines": 0, "uplink_latency": "1us",
             "host_link": {"bandwidth": "100Gbps", "latency": "1us"}})");
       },
       {},
       {},
       "scenario.json",
       "topology.spines",
       "expected an integer in [1, 4096], got 0"},
      {"explicit link to an unknown node",
       [](json& s, json&) {
         s["topology"] = json::parse(R"({"kind": "explicit",
             "nodes": [{"name": "a"}, {"name": "s", "kind": "switch"}],
             "links": [{"a": "a", "b": "x", "bandwidth": "1Gbps", "latency": "1us"}]})");
       },
       {},
       {},
       "scenario.json",
       "topology.links[0].b",
       "unknown node \"x\""},
      {"explicit duplicate node",
       [](json& s, json&) {
         s["topology"] = json::parse(R"({"kind": "explicit",
             "nodes": [{"name": "a"}, {"name": "a"}], "links": []})");
       },
       {},
       {},
       "scenario.json",
       "topology.nodes[1].name",
       "duplicate node name \"a\""},
      {"explicit node of unknown kind",
       [](json& s, json&) {
         s["topology"] = json::parse(R"({"kind": "explicit",
             "nodes": [{"name": "a", "kind": "router"}], "links": []})");
       },
       {},
       {},
       "scenario.json",
       "topology.nodes[0].kind",
       "expected one of \"host\", \"switch\""},
      {"missing include file",
       [](json& s, json&) { s["include"] = {"nope.json"}; },
       {},
       {},
       "scenario.json",
       "include[0]",
       "file not found"},
      {"include cycle",
       [](json&, json& hw) { hw["include"] = {"scenario.json"}; },
       {},
       {},
       "hw.json",
       "include[0]",
       "include cycle: scenario.json -> hw.json -> scenario.json"},
      {"include not a list",
       [](json& s, json&) { s["include"] = "hw.json"; },
       {},
       {},
       "scenario.json",
       "include",
       "expected an array of file names"},
      {"error inside an included catalog",
       [](json&, json& hw) { set(hw, "/hardware/gpus/G/hbm_capacity", "0GiB"); },
       {},
       {},
       "hw.json",
       "hardware.gpus.G.hbm_capacity",
       "a memory capacity must be greater than zero"},
      {"catalog entry without a source",
       [](json&, json& hw) { hw["hardware"]["gpus"]["G"].erase("_source"); },
       {},
       {},
       "hw.json",
       "hardware.gpus.G._source",
       "missing (required: every catalog entry names"},
      {"unknown backend",
       [](json& s, json&) { s["network"]["backend"] = "ns2"; },
       {},
       {},
       "scenario.json",
       "network.backend",
       "expected one of \"flow\", \"analytic\", got \"ns2\""},
      {"unknown backend option",
       [](json& s, json&) { s["network"]["dealy"] = "1us"; },
       {},
       {},
       "scenario.json",
       "network.dealy",
       "unknown key"},
      {"unknown model",
       [](json& s, json&) { s["system"]["model"] = "resnet"; },
       {},
       {},
       "scenario.json",
       "system.model",
       "expected one of \"probe\", got \"resnet\""},
      {"missing system",
       [](json& s, json&) { s.erase("system"); },
       {},
       {},
       "scenario.json",
       "system",
       "missing (required)"},
      {"workload not an object",
       [](json& s, json&) { s["workload"] = 3; },
       {},
       {},
       "scenario.json",
       "workload",
       "expected an object"},
      {"zero time limit",
       [](json& s, json&) {
         s["run"] = {{"time_limit", "0s"}};
       },
       {},
       {},
       "scenario.json",
       "run.time_limit",
       "expected a duration greater than zero"},
      {"empty output folder",
       [](json& s, json&) {
         s["output"] = {{"dir", ""}};
       },
       {},
       {},
       "scenario.json",
       "output.dir",
       "expected a non-empty folder name"},
      {"baseline not a variant",
       [](json& s, json&) { s["baseline"] = "small"; },
       {},
       {},
       "scenario.json",
       "baseline",
       "\"small\" is not one of the scenario's variants"},
      {"variant with a malformed path",
       [](json& s, json&) {
         s["variants"]["big"] = {{"system..bytes", 1}};
       },
       {},
       {},
       "scenario.json",
       "variants.big.system..bytes",
       "malformed path \"system..bytes\""},
      {"variant through a scalar",
       [](json& s, json&) {
         s["variants"]["big"] = {{"name.first", 1}};
       },
       {},
       {},
       "scenario.json",
       "variants.big.name.first",
       "name is the string \"t\", not an object"},
      {"unknown variant requested",
       [](json&, json&) {},
       {},
       std::string("huge"),
       "scenario.json",
       "variants",
       "unknown variant \"huge\" (the scenario has: \"big\")"},
      {"bad --set path",
       [](json&, json&) {},
       {"topology..hosts=3"},
       {},
       "--set",
       "",
       "malformed path \"topology..hosts\": empty key"},
      {"--set without a value",
       [](json&, json&) {},
       {"topology.hosts"},
       {},
       "--set",
       "",
       "expected PATH=VALUE"},
      {"--set index out of range",
       [](json&, json&) {},
       {"include[3]=1"},
       {},
       "--set",
       "include[3]",
       "includes are resolved before overrides"},
      {"--set into an array that is too short",
       [](json& s, json&) { s["sweep"] = json::array({1}); },
       {"sweep[2]=1"},
       {},
       "--set",
       "sweep[2]",
       "sweep has 1 elements"},
      {"--set value of the wrong type",
       [](json&, json&) {},
       {"topology.hosts=four"},
       {},
       "--set",
       "topology.hosts",
       "got the string \"four\""},
      {"--set unknown key",
       [](json&, json&) {},
       {"topology.hots=4"},
       {},
       "--set",
       "topology.hots",
       "unknown key"},
      {"invalid JSON",
       [](json&, json&) {},
       {},
       {},
       "scenario.json",
       "",
       "invalid JSON: parse error at line 2",
       "{\n  \"name\": \"t\",,\n}"},
      {"duplicate key",
       [](json&, json&) {},
       {},
       {},
       "scenario.json",
       "topology.hosts",
       "duplicate key",
       R"({"name": "t", "topology": {"kind": "ring", "hosts": 4, "hosts": 5}})"},
      {"comments are not JSON",
       [](json&, json&) {},
       {},
       {},
       "scenario.json",
       "",
       "invalid JSON",
       "// hi\n{}"},
      {"root not an object",
       [](json&, json&) {},
       {},
       {},
       "scenario.json",
       "(root)",
       "expected an object, got an array",
       "[1, 2]"},
      // Issue 17, defect 1: quantities whose sums or products would overflow the int64 clock.
      {"latency beyond 10 years (2^63-1 ns used to wrap)",
       [](json&, json&) {},
       {"topology.link.latency=9223372036854775807ns"},
       {},
       "--set",
       "topology.link.latency",
       "a duration must be at most 10 years"},
      {"latency of 9223372036 s (scheduled in the past)",
       [](json&, json&) {},
       {"topology.link.latency=9223372036s"},
       {},
       "--set",
       "topology.link.latency",
       "at most 10 years"},
      {"bandwidth below the 1 Kbps floor",
       [](json&, json&) {},
       {"topology.link.bandwidth=1e-3bps"},
       {},
       "--set",
       "topology.link.bandwidth",
       "a bandwidth must be at least 1Kbps"},
      {"bandwidth just below the floor (999 bps)",
       [](json& s, json&) { set(s, "/topology/link/bandwidth", "999bps"); },
       {},
       {},
       "scenario.json",
       "topology.link.bandwidth",
       "at least 1Kbps"},
      {"size beyond 1 PiB",
       [](json&, json& h) { set(h, "/hardware/gpus/G/hbm_capacity", "1025TiB"); },
       {},
       {},
       "hw.json",
       "hardware.gpus.G.hbm_capacity",
       "a size must be at most 1PiB"},
      {"compute rate below 1 MFLOPS",
       [](json&, json& h) { set(h, "/hardware/gpus/G/peak/fp16", "999KFLOPS"); },
       {},
       {},
       "hw.json",
       "hardware.gpus.G.peak.fp16",
       "at least 1MFLOPS"},
      {"excessive nesting",
       [](json&, json&) {},
       {},
       {},
       "scenario.json",
       [] {
         std::string p = "a";  // the path down to the level that crossed the limit
         for (int i = 0; i < 63; ++i) p += "[0]";
         return p;
       }(),
       "nesting deeper than 64 levels",
       "{\"a\": " + std::string(100, '[') + std::string(100, ']') + "}"},
  };
}

class MalformedScenario : public ::testing::TestWithParam<MalformedCase> {};

TEST_P(MalformedScenario, IsRejectedWithFilePathAndMessage) {
  const MalformedCase& c = GetParam();
  TempDir dir;
  json scenario = valid_scenario();
  json hardware = valid_hardware();
  c.mutate(scenario, hardware);
  const auto file = dir.write("scenario.json", c.raw_text.empty() ? scenario.dump(2) : c.raw_text);
  dir.write("hw.json", hardware.dump(2));
  ScenarioRequest request{file, c.variant, {}};
  const auto registries = mlsim::testing::make_test_registries();
  try {
    for (const auto& s : c.sets) request.overrides.push_back(parse_set_option(s));
    load_scenario(request, registries);
    FAIL() << "accepted: " << c.name;
  } catch (const InputError& e) {
    EXPECT_EQ(std::filesystem::path(e.file()).filename().string(), c.file) << e.what();
    EXPECT_EQ(e.path(), c.path) << e.what();
    EXPECT_NE(e.message().find(c.fragment), std::string::npos)
        << "message: " << e.message() << "\nexpected fragment: " << c.fragment;
  }
}

std::string case_name(const ::testing::TestParamInfo<MalformedCase>& info) {
  std::string out;
  for (char ch : info.param.name) out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return out;
}

INSTANTIATE_TEST_SUITE_P(Scenario, MalformedScenario, ::testing::ValuesIn(malformed_cases()),
                         case_name);

TEST(Scenario, ValidScenarioLoadsWithDefaultsWrittenIn) {
  TempDir dir;
  const auto file = dir.write("scenario.json", valid_scenario().dump(2));
  dir.write("hw.json", valid_hardware().dump(2));
  const auto registries = mlsim::testing::make_test_registries();
  auto s = load_scenario({file, {}, {}}, registries);
  EXPECT_EQ(s.name, "t");
  EXPECT_EQ(s.seed, 7u);
  EXPECT_EQ(s.model, "probe");
  EXPECT_EQ(s.network.backend, "flow");
  EXPECT_EQ(s.network.options, (json{{"delay", "1us"}}));  // the backend's default, echoed
  ASSERT_TRUE(std::holds_alternative<RingSpec>(s.topology));
  EXPECT_EQ(std::get<RingSpec>(s.topology).hosts, 4);
  EXPECT_EQ(std::get<RingSpec>(s.topology).link.latency, Time::ns(500));
  EXPECT_NE(s.hardware.find_gpu("G"), nullptr);
  EXPECT_FALSE(s.run.time_limit.has_value());
  EXPECT_EQ(s.resolved["run"]["time_limit"], "none");
  EXPECT_EQ(s.resolved["output"]["dir"], "results/t");
  EXPECT_EQ(s.resolved["description"], "");
  EXPECT_FALSE(s.resolved.contains("include"));
  EXPECT_EQ(s.variant_names, std::vector<std::string>{"big"});
  EXPECT_EQ(s.baseline, "big");
}

TEST(Scenario, IncludingFileWinsAndLaterIncludesWinOverEarlier) {
  TempDir dir;
  dir.write("a.json", R"({"system": {"model": "probe", "bytes": "1KiB", "messages": 2},
                          "seed": 1, "name": "from_a"})");
  dir.write("sub/b.json", R"({"include": ["../c.json"], "seed": 2, "system": {"messages": 5}})");
  dir.write("c.json", R"({"description": "from c", "seed": 3})");
  const auto file = dir.write("main.json", R"({"include": ["a.json", "sub/b.json"], "name": "m",
      "topology": {"kind": "star", "hosts": 2, "link": {"bandwidth": "1Gbps", "latency": "0ns"}}})");
  const auto registries = mlsim::testing::make_test_registries();
  auto s = load_scenario({file, {}, {}}, registries);
  EXPECT_EQ(s.name, "m");  // the including file wins
  EXPECT_EQ(s.seed, 2u);   // b (later, and over its own include c) wins over a
  EXPECT_EQ(s.description, "from c");
  EXPECT_EQ(s.resolved["system"]["bytes"], "1KiB");  // objects merge key by key
  EXPECT_EQ(s.resolved["system"]["messages"], 5);
  EXPECT_EQ(s.provenance.origin_of("system.messages"), (dir.path() / "sub/b.json").string());
  EXPECT_EQ(s.provenance.origin_of("seed"), (dir.path() / "sub/b.json").string());
  EXPECT_EQ(s.provenance.origin_of("description"), (dir.path() / "c.json").string());
  EXPECT_EQ(s.provenance.origin_of("topology.link.bandwidth"), file.string());
}

TEST(Scenario, VariantThenSetOverridesApplyInOrder) {
  TempDir dir;
  const auto file = dir.write("scenario.json", valid_scenario().dump(2));
  dir.write("hw.json", valid_hardware().dump(2));
  const auto registries = mlsim::testing::make_test_registries();
  auto s = load_scenario(
      {file, "big", {parse_set_option("seed=11"), parse_set_option("network.backend=analytic")}},
      registries);
  EXPECT_EQ(s.resolved["system"]["bytes"], "2MiB");
  EXPECT_EQ(s.seed, 11u);
  EXPECT_EQ(s.network.backend, "analytic");
  EXPECT_EQ(s.variant, "big");
  auto t = load_scenario({file, "big", {parse_set_option("system.bytes=3MiB")}}, registries);
  EXPECT_EQ(t.resolved["system"]["bytes"], "3MiB");  // --set wins over the variant
}

TEST(Scenario, SetOptionParsesJsonOrPlainString) {
  EXPECT_EQ(parse_set_option("a=3").value, json(3));
  EXPECT_EQ(parse_set_option("a=true").value, json(true));
  EXPECT_EQ(parse_set_option("a=64MiB").value, json("64MiB"));
  EXPECT_EQ(parse_set_option("a=\"7\"").value, json("7"));
  EXPECT_EQ(parse_set_option("a=[1,2]").value, json::array({1, 2}));
  EXPECT_EQ(parse_set_option("a.b[2].c=x=y").value, json("x=y"));
  EXPECT_EQ(parse_set_option("a=").value, json(""));
}

TEST(Scenario, OverridePathsWithIndices) {
  json doc = {{"t", {{"links", json::array({json::object(), {{"a", 1}}})}}}};
  apply_override(doc, parse_set_option("t.links[1].a=5"));
  EXPECT_EQ(doc["t"]["links"][1]["a"], 5);
  apply_override(doc, parse_set_option("new.deep.key=1"));
  EXPECT_EQ(doc["new"]["deep"]["key"], 1);
  for (const char* bad : {"", ".a", "a.", "a[", "a[x]", "a]b", "[0]", "a[1]b", "a[-1]"})
    EXPECT_THROW(parse_json_path(bad, "x"), InputError) << bad;
  EXPECT_EQ(format_json_path(parse_json_path("a.b[2][3].c", "x")), "a.b[2][3].c");
}

}  // namespace
