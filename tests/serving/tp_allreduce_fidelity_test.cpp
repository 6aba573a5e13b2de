// Fidelity of serving's tensor-parallel all-reduce against measured NCCL times: Vidur's A100 DGX
// all-reduce profile (../shared/data/network_profiles/vidur/a100_dgx/all_reduce.csv, median
// column, ms; `size` in bytes, docs/collectives.md) for 2, 4 and 8 GPUs in one node, against
// TpAllReduce with the shipped serving scenarios' inputs: system.costs from
// workloads/collectives/nccl_a100.json, the A100-SXM4-80GB catalog's intra_node bandwidth
// (300 GB/s per direction) and the scenarios' intra_node latency override of 0 (that fit was
// made with zero link latency). Those costs were fitted on this table's 2/4/8-GPU rows (every
// third size), so this checks that serving gets the calibrated layer's cost, not a held-out
// prediction. Printed per size band and at the sizes Llama-2-70B serving produces (decode:
// batch x 8192 x 2 B, 16 KiB at batch 1 to 1 MiB at 64; prefill: 2 MiB at 128 tokens to 64 MiB
// at 4096). Skips without the shared data. docs/serving.md quotes the output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "models/serving/tp_allreduce.hpp"
#include "sim_core/base/text_fields.hpp"
#include "sim_core/collectives/read_costs.hpp"
#include "test_support.hpp"

using namespace mlsim;
using namespace mlsim::serving;

namespace {

struct Measured {
  int gpus = 0;
  std::int64_t bytes = 0;
  double seconds = 0;
};

std::vector<Measured> read_vidur(const std::filesystem::path& file, bool two_nodes = false) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  const auto header = split_csv_line(line);
  auto column = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    EXPECT_NE(it, header.end()) << name;
    return static_cast<std::size_t>(it - header.begin());
  };
  const auto median = column("time_stats.all_reduce.median"), size = column("size"),
             workers = column("num_workers"), per_node = column("devices_per_node");
  std::vector<Measured> rows;
  while (std::getline(in, line)) {
    const auto f = split_csv_line(line);
    if (f.size() < header.size()) continue;
    if ((f[workers] != f[per_node]) != two_nodes) continue;  // one node, or 8 x 2
    rows.push_back({std::stoi(f[workers]), std::stoll(f[size]), std::stod(f[median]) * 1e-3});
  }
  return rows;
}

TpAllReduce shipped_inputs() {
  std::ifstream in(fixtures::source_dir() / "workloads/collectives/nccl_a100.json");
  nlohmann::json fragment = nlohmann::json::parse(in);
  JsonReader costs(fragment["system"]["costs"], "system.costs");
  TpAllReduce a;
  a.costs = collectives::read_cost_model(costs);
  a.bandwidth = fixtures::gpus().gpu("A100-SXM4-80GB", "").intra_node->bandwidth;
  a.route_latency = Time::zero();
  return a;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

TEST(TpAllReduceFidelity, AgainstVidurA100Dgx) {
  const auto file = fixtures::shared_data_dir() / "network_profiles/vidur/a100_dgx/all_reduce.csv";
  if (!std::filesystem::exists(file)) GTEST_SKIP() << "Vidur network profiles not found";
  const auto rows = read_vidur(file);
  ASSERT_FALSE(rows.empty());
  const TpAllReduce tp = shipped_inputs();
  ASSERT_EQ(tp.bandwidth.bytes_per_s, 300e9);
  // The serving model's former cost, for comparison: the ring volume 2(n-1)/n S over one
  // 300 GB/s link, the star's two 1 us links, and a fixed 10 us per all-reduce.
  auto former = [](int n, std::int64_t bytes) {
    return 2.0 * (n - 1) / n * static_cast<double>(bytes) / 300e9 + 2e-6 + 10e-6;
  };
  std::map<std::pair<int, int>, std::vector<double>> errors, signed_errors,
      former_errors;  // (gpus, band)
  std::map<std::pair<int, std::int64_t>, std::pair<double, double>> at_size;
  const std::vector<std::int64_t> serving_sizes = {16 << 10, 128 << 10, 1 << 20,
                                                   2 << 20,  16 << 20,  64 << 20};
  for (const auto& r : rows) {
    const double predicted = tp.time(r.gpus, Bytes{r.bytes}).seconds();
    const int band = r.bytes < (1 << 20) ? 0 : 1;
    errors[{r.gpus, band}].push_back(std::abs(predicted / r.seconds - 1));
    former_errors[{r.gpus, band}].push_back(std::abs(former(r.gpus, r.bytes) / r.seconds - 1));
    signed_errors[{r.gpus, band}].push_back(predicted / r.seconds - 1);
  }
  // The measured size nearest each serving size (the table steps by 8 KiB from 2 KiB).
  for (std::int64_t s : serving_sizes)
    for (int gpus : {2, 4, 8}) {
      const Measured* best = nullptr;
      for (const auto& r : rows)
        if (r.gpus == gpus && (!best || std::llabs(r.bytes - s) < std::llabs(best->bytes - s)))
          best = &r;
      at_size[{gpus, best->bytes}] = {best->seconds, tp.time(gpus, Bytes{best->bytes}).seconds()};
    }
  std::printf(
      "| GPUs | band | rows | median abs error | median signed error | former serving cost |\n");
  for (const auto& [key, e] : errors) {
    std::printf("| %d | %s | %zu | %.1f%% | %+.1f%% | %.1f%% |\n", key.first,
                key.second == 0 ? "< 1 MiB (decode)" : "1-64 MiB (prefill)", e.size(),
                100 * median(e), 100 * median(signed_errors[key]),
                100 * median(former_errors[key]));
  }
  std::printf("| GPUs | size | Vidur median | mlsim | error | former serving cost |\n");
  for (const auto& [key, v] : at_size)
    std::printf("| %d | %lld B | %.1f us | %.1f us | %+.1f%% | %.1f us |\n", key.first,
                static_cast<long long>(key.second), v.first * 1e6, v.second * 1e6,
                100 * (v.second / v.first - 1), 1e6 * former(key.first, key.second));
  // Bounds at the measured level (docs/serving.md), so that a change to the cost or its inputs
  // that moves serving away from the calibrated layer fails here: within 10% above 1 MiB, and
  // below 1 MiB within the calibrated layer's own error there (12-44%, bimodal measurements).
  for (int gpus : {2, 4, 8}) {
    EXPECT_LT(median(errors[{gpus, 1}]), 0.10) << gpus << " GPUs, 1-64 MiB";
    EXPECT_LT(median(errors[{gpus, 0}]), 0.45) << gpus << " GPUs, < 1 MiB";
  }
}

// A TP group across two nodes (docs/serving.md, "Across hosts"): Vidur's 16-GPU rows (8 GPUs per
// node x 2 nodes; none of these rows was in the collective layer's fit) against the serving cost
// of a 16-GPU group on two 8-GPU hosts: the shipped costs, NVLink 300 GB/s inside a host, and a
// route between the hosts of B per host (shared by its 8 GPUs: B / 8 each) with 0 latency (the
// fit's NIC latency is 0.9 ns). The NICs NCCL used are not recorded (docs/collectives.md, "Two
// nodes"), so B is swept: one, two and eight 25 GB/s HDR NICs. Printed, not tuned; the bound
// only keeps the figure from drifting unseen.
TEST(TpAllReduceFidelity, AcrossTwoNodesAgainstVidurA100Dgx) {
  const auto file = fixtures::shared_data_dir() / "network_profiles/vidur/a100_dgx/all_reduce.csv";
  if (!std::filesystem::exists(file)) GTEST_SKIP() << "Vidur network profiles not found";
  const auto rows = read_vidur(file, true);
  ASSERT_FALSE(rows.empty());
  const TpAllReduce intra = shipped_inputs();
  std::printf("| route per host | band | rows | median abs error | median signed error |\n");
  double best = 1e9;
  for (const double per_host : {25e9, 50e9, 200e9}) {
    const TpAllReduce tp = intra.across_hosts(Bandwidth{per_host}, Time::zero(), 8);
    std::map<int, std::vector<double>> errors, signed_errors;
    for (const auto& r : rows) {
      if (r.gpus != 16) continue;  // 8 x 2 (the table also has 1 x 2, 2 x 2 and 4 x 2)
      const double e = tp.time(16, Bytes{r.bytes}).seconds() / r.seconds - 1;
      const int band = r.bytes < (1 << 20) ? 0 : 1;
      errors[band].push_back(std::abs(e));
      signed_errors[band].push_back(e);
    }
    for (const auto& [band, e] : errors) {
      std::printf("| %.0f GB/s | %s | %zu | %.1f%% | %+.1f%% |\n", per_host / 1e9,
                  band == 0 ? "< 1 MiB" : "1-64 MiB", e.size(), 100 * median(e),
                  100 * median(signed_errors[band]));
      if (band == 1) best = std::min(best, median(e));
    }
  }
  EXPECT_LT(best, 0.5);
}
