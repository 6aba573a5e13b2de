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
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

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

// A TP group across two nodes (docs/serving.md, "Across hosts"; docs/collectives.md, "Across
// hosts"): Vidur's two-node rows (1, 2, 4 and 8 GPUs per node x 2 nodes) against the serving
// cost of the same group on two hosts: the shipped costs (nccl_a100.json, with its
// inter_node_latency), NVLink 300 GB/s inside a host, and a route between the hosts of k NICs at
// the NIC efficiency fitted on the two-node send/recv rows (nccl_a100.json, _nic_fitted; of the
// ConnectX-6's 25 GB/s), 0 latency (the fit's NIC latency is 0.9 ns). The NICs NCCL used are not
// recorded, so k is swept: 1, 2 and one per GPU. Three models: the former flat closed form (the
// route shared by a host's g GPUs; also with the 200 GB/s line-rate route the former test used:
// the "within 13% above 1 MiB, 47% too fast below"), the hierarchical all-reduce without
// the inter-node latency, and with it. Only the 1 x 2 rows with one NIC entered the fit of the
// inter-node latency (tools/calibrate_inter_node.py); this test checks that the shipped value is
// a minimum of that fit's objective with the C++ code. Printed for docs/collectives.md; the
// bounds keep the figures from drifting unseen.
namespace {

struct TwoNode {
  int per_node = 0;
  std::int64_t bytes = 0;
  double seconds = 0;
};

std::vector<TwoNode> read_two_node(const std::filesystem::path& file) {
  std::vector<TwoNode> out;
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  const auto header = split_csv_line(line);
  auto column = [&](const std::string& name) {
    return static_cast<std::size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  const auto median = column("time_stats.all_reduce.median"), size = column("size"),
             workers = column("num_workers"), per_node = column("devices_per_node");
  while (std::getline(in, line)) {
    const auto f = split_csv_line(line);
    if (f.size() < header.size() || f[workers] == f[per_node]) continue;
    EXPECT_EQ(std::stoi(f[workers]), 2 * std::stoi(f[per_node]));  // two nodes
    out.push_back({std::stoi(f[per_node]), std::stoll(f[size]), std::stod(f[median]) * 1e-3});
  }
  return out;
}

double nic_bandwidth() {
  std::ifstream in(fixtures::source_dir() / "workloads/collectives/nccl_a100.json");
  const nlohmann::json fragment = nlohmann::json::parse(in);
  return fragment.at("_nic_fitted").at("nic_efficiency").get<double>() * 25e9;
}

// The former serving cost across hosts: one flat ring over the slowest link, min(intra, route /
// g), latency 0 (the former TpAllReduce::across_hosts).
Time former_cost(const TpAllReduce& intra, int g, Bytes s, double route) {
  const double b = std::min(intra.bandwidth.bytes_per_s, route / g);
  return collectives::collective_cost(intra.costs, collectives::Operation::kAllReduce,
                                      collectives::Algorithm::kRing, 2 * g, 2, s, Bandwidth{b},
                                      Time::zero())
      .time;
}

Time hierarchical_cost(const TpAllReduce& intra, int g, Bytes s, double route) {
  return intra.across_hosts(Bandwidth{route}, Time::zero(), g).time(2 * g, s);
}

const char* band_name(std::int64_t bytes) {
  return bytes < (1 << 20) ? "< 1 MiB" : "1-64 MiB";
}

// Median absolute and signed relative error per size band.
struct BandErrors {
  std::map<std::string, std::vector<double>> e;
  void add(std::int64_t bytes, double predicted, double measured) {
    e[band_name(bytes)].push_back(predicted / measured - 1);
  }
  std::string cell(const std::string& band) const {
    const auto& v = e.at(band);
    std::vector<double> a;
    for (double x : v) a.push_back(std::abs(x));
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f%% (%+.1f%%)", 100 * median(a), 100 * median(v));
    return buf;
  }
  double abs_median(const std::string& band) const {
    std::vector<double> a;
    for (double x : e.at(band)) a.push_back(std::abs(x));
    return median(a);
  }
};

}  // namespace

TEST(TpAllReduceFidelity, AcrossTwoNodesAgainstVidurA100Dgx) {
  const auto file = fixtures::shared_data_dir() / "network_profiles/vidur/a100_dgx/all_reduce.csv";
  if (!std::filesystem::exists(file)) GTEST_SKIP() << "Vidur network profiles not found";
  const auto rows = read_two_node(file);
  ASSERT_EQ(rows.size(), 4u * 994);  // 994 rows per configuration (16 MiB twice)
  const TpAllReduce intra = shipped_inputs();
  const Time fitted = intra.costs.inter_node_latency;
  ASSERT_GT(fitted, Time::zero());
  TpAllReduce no_inter = intra;
  no_inter.costs.inter_node_latency = Time::zero();
  const double nic = nic_bandwidth();

  // The fit (1 x 2, one NIC): the mean over the two bands of the median absolute error is
  // smallest at the shipped value, to the fit's 0.01 us grid, and far below its value at 0.
  auto objective = [&](Time latency) {
    TpAllReduce a = intra;
    a.costs.inter_node_latency = latency;
    BandErrors e;
    for (const auto& r : rows)
      if (r.per_node == 1)
        e.add(r.bytes, hierarchical_cost(a, 1, Bytes{r.bytes}, nic).seconds(), r.seconds);
    return 0.5 * (e.abs_median("< 1 MiB") + e.abs_median("1-64 MiB"));
  };
  const double at_fit = objective(fitted);
  std::printf("inter_node_latency %.2f us: fit objective %.4f (0 us: %.4f)\n",
              fitted.seconds() * 1e6, at_fit, objective(Time::zero()));
  EXPECT_LE(at_fit, objective(fitted + Time::ns(500)) + 1e-4);
  EXPECT_LE(at_fit, objective(fitted - Time::ns(500)) + 1e-4);
  EXPECT_LT(at_fit, 0.7 * objective(Time::zero()));

  std::printf("| GPUs per node x nodes | route per node | model | < 1 MiB | 1-64 MiB |\n");
  std::map<std::tuple<int, int, int>, BandErrors> table;  // (g, nics, model)
  for (const auto& r : rows) {
    const int g = r.per_node;
    for (int nics : {1, 2, 8}) {
      const int k = std::min(nics, g);
      if (k != nics && !(nics == 8 && g > 2)) continue;  // one per GPU: 8 stands for g
      const double route = k * nic;
      const Bytes s{r.bytes};
      table[{g, nics, 0}].add(r.bytes, former_cost(intra, g, s, route).seconds(), r.seconds);
      table[{g, nics, 1}].add(r.bytes, hierarchical_cost(no_inter, g, s, route).seconds(),
                              r.seconds);
      table[{g, nics, 2}].add(r.bytes, hierarchical_cost(intra, g, s, route).seconds(), r.seconds);
    }
    table[{g, 200, 0}].add(r.bytes, former_cost(intra, g, Bytes{r.bytes}, 200e9).seconds(),
                           r.seconds);
  }
  const char* models[] = {"former flat", "hierarchical, no inter-node latency",
                          "hierarchical + inter_node_latency"};
  for (const auto& [key, e] : table) {
    const auto [g, nics, model] = key;
    char route[64];
    if (nics == 200)
      std::snprintf(route, sizeof route, "200 GB/s line rate");
    else
      std::snprintf(route, sizeof route, "%d NIC(s), %.1f GB/s", std::min(nics, g),
                    std::min(nics, g) * nic / 1e9);
    std::printf("| %d x 2 | %s | %s | %s | %s |\n", g, route, models[model],
                e.cell("< 1 MiB").c_str(), e.cell("1-64 MiB").c_str());
  }
  // Per size, 8 x 2 with two NICs (the count that fits its bandwidth-bound rows best), in bands
  // of a factor of 4 so that every measured size counts.
  std::printf(
      "| 8 x 2 sizes | rows | former flat (200 GB/s) | hierarchical, 2 NICs, no latency "
      "| hierarchical, 2 NICs + inter_node_latency |\n");
  const std::array<std::int64_t, 6> edges = {16 << 10, 64 << 10, 256 << 10,
                                             1 << 20,  4 << 20,  16 << 20};
  const std::array<const char*, 7> labels = {"2-16 KiB", "16-64 KiB", "64-256 KiB", "256 KiB-1 MiB",
                                             "1-4 MiB",  "4-16 MiB",  "16-64 MiB"};
  std::map<std::size_t, std::array<std::vector<double>, 3>> by_size;
  for (const auto& r : rows) {
    if (r.per_node != 8) continue;
    const auto b = static_cast<std::size_t>(std::upper_bound(edges.begin(), edges.end(), r.bytes) -
                                            edges.begin());
    const Bytes s{r.bytes};
    by_size[b][0].push_back(former_cost(intra, 8, s, 200e9).seconds() / r.seconds - 1);
    by_size[b][1].push_back(hierarchical_cost(no_inter, 8, s, 2 * nic).seconds() / r.seconds - 1);
    by_size[b][2].push_back(hierarchical_cost(intra, 8, s, 2 * nic).seconds() / r.seconds - 1);
  }
  for (const auto& [b, v] : by_size)
    std::printf("| %s | %zu | %+.1f%% | %+.1f%% | %+.1f%% |\n", labels[b], v[0].size(),
                100 * median(v[0]), 100 * median(v[1]), 100 * median(v[2]));
  // The latency term brings the small sizes closer in every configuration, with one NIC per GPU
  // up to two (measured 2026-12-05: 1 x 2 22.7% -> 5.5%, 2 x 2 37.7% -> 18.9%, 4 x 2 35.3% ->
  // 19.6%, 8 x 2 45.4% -> 29.6%), and the 16-GPU rows stay within these bounds (8 x 2, two NICs:
  // 29.6% below 1 MiB, 20.3% from 1 to 64 MiB).
  // (The keys are looked up outside the macros: the braces' commas would split their arguments.)
  for (int g : {1, 2, 4, 8}) {
    const int nics = std::min(g, 2);
    const double with_latency = table[{g, nics, 2}].abs_median("< 1 MiB");
    const double without = table[{g, nics, 1}].abs_median("< 1 MiB");
    EXPECT_LT(with_latency, without) << g;
  }
  const BandErrors& sixteen = table[{8, 2, 2}];
  EXPECT_LT(sixteen.abs_median("< 1 MiB"), 0.35);
  EXPECT_LT(sixteen.abs_median("1-64 MiB"), 0.25);
}
