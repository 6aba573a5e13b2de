// The pipeline on the platform, through the whole loader and runner: stage work runs on Compute,
// priced from the profile's GPU for each stage host's catalog GPU (topology.hardware) and slowed
// by the `events` section's host speeds. Every expected time is computed by hand below from the
// datasheet figures in workloads/hardware/gpus.json.
#include <gtest/gtest.h>

#include <string>

#include "models/pipeline/register.hpp"
#include "tests/support/run_json.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mlsim;
using nlohmann::json;

namespace {

// Two layers in PipeDream's graph format: L1 10 ms forward, 20 ms backward; L2 30 ms and 60 ms;
// each writes a 4.5 MB activation and has no parameters.
constexpr const char* kTwoLayers =
    "node1 -- L1 -- forward_compute_time=10.0, backward_compute_time=20.0, "
    "activation_size=4500000.0, parameter_size=0.0\n"
    "node2 -- L2 -- forward_compute_time=30.0, backward_compute_time=60.0, "
    "activation_size=4500000.0, parameter_size=0.0\n"
    "\tnode1 -- node2\n";

// Three layers of 10 ms forward, 20 ms backward and a 4-byte activation (memory time negligible).
constexpr const char* kThreeEqualLayers =
    "node1 -- L1 -- forward_compute_time=10.0, backward_compute_time=20.0, "
    "activation_size=4.0, parameter_size=0.0\n"
    "node2 -- L2 -- forward_compute_time=10.0, backward_compute_time=20.0, "
    "activation_size=4.0, parameter_size=0.0\n"
    "node3 -- L3 -- forward_compute_time=10.0, backward_compute_time=20.0, "
    "activation_size=4.0, parameter_size=0.0\n"
    "\tnode1 -- node2\n\tnode2 -- node3\n";

// Two V100-SXM2-32GB hosts on a star of 100 Gbps, 1 us links; the profile is taken as measured on
// a V100-SXM2-32GB; one minibatch; a straight pipeline (PipeDream's --straight_pipeline: these
// layers have no parameters, so its default would replicate one stage over both hosts).
json base(const std::string& profile) {
  json doc = json::parse(R"({
    "name": "pipeline_platform", "seed": 1, "include": ["../hardware/gpus.json"],
    "topology": {"kind": "star", "hosts": 2, "link": {"bandwidth": "100Gbps", "latency": "1us"},
                 "hardware": {"gpu": "V100-SXM2-32GB"}},
    "system": {"model": "pipeline", "policy": "pipedream", "straight_pipeline": true},
    "workload": {"profiled_on": "V100-SXM2-32GB", "samples_per_minibatch": 1, "minibatches": 1}
  })");
  doc["workload"]["profile"] = profile;
  return doc;
}

const Registries& registries() {
  static const Registries r = test::registries_with(register_pipeline);
  return r;
}

double time_s(const json& doc) {
  return test::run_json(doc, registries()).results.metrics().at("time_s");
}

// One activation or gradient: 4.5e6 B at 12.5e9 B/s = 0.36 ms, plus two 1 us hops.
constexpr double kTransfer = 4.5e6 / 12.5e9 + 2e-6;

}  // namespace

TEST(PipelinePlatform, ProfileGpuHostsRunTheProfileTimes) {
  mlsim::testing::TempDir dir;
  const json doc = base(dir.write("graph.txt", kTwoLayers).string());
  // Stage 0 = L1, stage 1 = L2 (the only split). F0 10 ms, send, F1 30 ms, B1 60 ms, send back,
  // B0 20 ms: 120 ms + 2 x 0.362 ms = 120.724 ms.
  EXPECT_NEAR(time_s(doc), 0.120 + 2 * kTransfer, 1e-8);
}

TEST(PipelinePlatform, OneStageOnASlowedHost) {
  mlsim::testing::TempDir dir;
  json doc = base(dir.write("graph.txt", kTwoLayers).string());
  // Host 1 at half speed from the start: stage 1's 90 ms take 180 ms.
  // 10 + 180 + 20 ms + 2 x 0.362 ms = 210.724 ms.
  doc["events"] = json::parse(R"({"list": [{"at": "0s", "host": 1, "speed": 0.5}]})");
  EXPECT_NEAR(time_s(doc), 0.210 + 2 * kTransfer, 1e-8);
  // Host 0 halves 5 ms into F0: 5 ms done, the other 5 ms of work take 10 ms, so F0 ends at
  // 15 ms; B0 (20 ms of work) takes 40 ms. 15 + 90 + 40 ms + 2 x 0.362 ms = 145.724 ms.
  doc["events"] = json::parse(R"({"list": [{"at": "5ms", "host": 0, "speed": 0.5}]})");
  EXPECT_NEAR(time_s(doc), 0.145 + 2 * kTransfer, 1e-8);
}

TEST(PipelinePlatform, TwoGpuTypesScaleTheProfileByTheCatalogRatio) {
  mlsim::testing::TempDir dir;
  json doc = base(dir.write("graph.txt", kTwoLayers).string());
  doc["topology"]["hardware"]["groups"] =
      json::parse(R"([{"hosts": [1], "gpu": "A100-SXM4-40GB"}])");
  // Stage 1 (L2) on an A100-SXM4-40GB, the profile from a V100-SXM2-32GB (datasheets: FP32 15.7
  // and 19.5 TFLOPS, HBM 900 and 1555 GB/s). L2's forward moves 0 + 4.5e6 B, 5 us at 900 GB/s:
  // a fraction m = 5e-6 / 30e-3 = 1/6000 of its 30 ms is memory-bound. Backward moves twice the
  // bytes in twice the time: the same m. So L2 takes
  //   F = 30 ms x (m x 900/1555 + (1 - m) x 15.7/19.5) = 24.1527 ms, B = 2F = 48.3054 ms,
  // and the minibatch 10 + 3F + 20 ms + 2 x 0.362 ms = 103.182 ms (V100 only: 120.724 ms).
  const double m = 5e-6 / 30e-3;
  const double ratio = m * 900.0 / 1555.0 + (1 - m) * 15.7 / 19.5;
  const double forward = 0.030 * ratio;
  EXPECT_NEAR(forward, 24.1527e-3, 1e-7);
  EXPECT_NEAR(time_s(doc), 0.010 + 3 * forward + 0.020 + 2 * kTransfer, 1e-8);
}

TEST(PipelinePlatform, PartitionerSeesEachHostsGpuAndSpeed) {
  mlsim::testing::TempDir dir;
  json doc = base(dir.write("graph.txt", kThreeEqualLayers).string());
  auto first_layers = [](const json& d) {
    return test::run_json(d, registries())
        .results.details()["partitions"][0]["first_layer"]
        .get<std::vector<std::size_t>>();
  };
  // Each layer is 30 ms on a V100. Two V100s: 1 | 2 and 2 | 1 both give 60 ms; PipeDream's tie
  // rule takes the earliest boundary: 1 | 2.
  EXPECT_EQ(first_layers(doc), (std::vector<std::size_t>{0, 1, 3}));
  // Host 0 an A100 (a layer 30 ms x 15.7/19.5 = 24.15 ms, memory time 4 B / 900 GB/s nil):
  // 1 | 2 gives max(24.15, 60) = 60 ms, 2 | 1 max(48.3, 30) = 48.3 ms: 2 | 1.
  json a100_first = doc;
  a100_first["topology"]["hardware"]["groups"] =
      json::parse(R"([{"hosts": [0], "gpu": "A100-SXM4-40GB"}])");
  EXPECT_EQ(first_layers(a100_first), (std::vector<std::size_t>{0, 2, 3}));
  // Two V100s, host 1 at half speed from time 0 (applied before the job starts): 1 | 2 gives
  // max(30, 120) = 120 ms, 2 | 1 max(60, 60) = 60 ms: 2 | 1.
  json slow = doc;
  slow["events"] = json::parse(R"({"list": [{"at": "0s", "host": 1, "speed": 0.5}]})");
  EXPECT_EQ(first_layers(slow), (std::vector<std::size_t>{0, 2, 3}));
}

TEST(PipelinePlatform, NeedsTheProfileGpuAndHostGpus) {
  mlsim::testing::TempDir dir;
  json doc = base(dir.write("graph.txt", kTwoLayers).string());
  doc["workload"].erase("profiled_on");
  EXPECT_NE(test::prepare_error(doc, registries()).find("workload.profiled_on"), std::string::npos)
      << test::prepare_error(doc, registries());
  doc = base(dir.write("graph.txt", kTwoLayers).string());
  doc["workload"]["profiled_on"] = "K80";
  EXPECT_NE(test::prepare_error(doc, registries()).find("workload.profiled_on"), std::string::npos)
      << test::prepare_error(doc, registries());
  doc = base(dir.write("graph.txt", kTwoLayers).string());
  doc["topology"].erase("hardware");
  EXPECT_NE(test::prepare_error(doc, registries()).find("topology.hardware"), std::string::npos)
      << test::prepare_error(doc, registries());
}
