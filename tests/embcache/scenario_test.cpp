// Reading the embcache model's scenario sections, the sample sources, and errors naming the JSON
// path.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "models/embcache/embcache_model.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/network/topology_builders.hpp"

using namespace mlsim;
using namespace mlsim::embcache;
using nlohmann::json;

namespace {

const std::filesystem::path kShared = MLSIM_SHARED_DATA_DIR;

ModelParams parse(json doc, int hosts = 5) {
  const Topology topo = build_topology(StarSpec{hosts, LinkSpec{Bandwidth{12.5e9}, Time::us(1)}});
  JsonReader system(doc["system"], "system");
  JsonReader workload(doc["workload"], "workload");
  ModelParams p =
      read_embcache_params(system, workload, topo, std::filesystem::temp_directory_path());
  system.finish();
  workload.finish();
  return p;
}

json base() {
  return json::parse(R"({
    "system": {"policy": "herald"},
    "workload": {"iterations": 10, "compute_per_sample": "1us",
                 "samples": {"source": "zipf", "fields": 4, "rows_per_field": 100, "alpha": 1.0}}})");
}

std::string error_of(json doc) {
  try {
    parse(std::move(doc));
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(EmbcacheScenario, PolicyPresetsAndDefaults) {
  ModelParams p = parse(base());
  EXPECT_EQ(p.training.allocation, Allocation::kLocationAware);
  EXPECT_EQ(p.training.sync, Sync::kOnDemand);
  EXPECT_EQ(p.training.workers.size(), 4u);  // the last host is the PS
  EXPECT_EQ(p.training.row_bytes, 512);      // dim 128 x 4 bytes
  EXPECT_DOUBLE_EQ(p.cache_ratio, 0.1);
  EXPECT_EQ(p.make_source(1)->distinct_rows(), 400u);
  json d = base();
  d["system"]["sync"] = "eager";  // an ablation: Herald's allocation with HET's sync
  p = parse(d);
  EXPECT_EQ(p.training.allocation, Allocation::kLocationAware);
  EXPECT_EQ(p.training.sync, Sync::kEager);
}

TEST(EmbcacheScenario, ErrorsNameThePath) {
  json d = base();
  d["workload"]["samples"]["source"] = "parquet";
  EXPECT_NE(error_of(d).find("workload.samples.source"), std::string::npos) << error_of(d);
  d = base();
  d["workload"]["samples"]["skew"] = 1;
  EXPECT_NE(error_of(d).find("workload.samples.skew"), std::string::npos) << error_of(d);
  d = base();
  d["workload"]["workers"] = 5;
  EXPECT_NE(error_of(d).find("workload.workers"), std::string::npos) << error_of(d);
  d = base();
  d["workload"]["samples"] =
      json::parse(R"({"source": "csv", "file": "nope.csv", "columns": ["C1"]})");
  EXPECT_NE(error_of(d).find("workload.samples.file"), std::string::npos) << error_of(d);
  d = base();
  d["system"]["cache_ratio"] = 2;
  EXPECT_NE(error_of(d).find("system.cache_ratio"), std::string::npos) << error_of(d);
  d = base();  // staleness bounds belong to the bounded sync only
  d["system"]["pull_bound"] = 1;
  EXPECT_NE(error_of(d).find("system.pull_bound"), std::string::npos) << error_of(d);
  d["system"]["policy"] = "het_bounded";
  d["system"]["push_bound"] = -1;
  EXPECT_NE(error_of(d).find("system.push_bound"), std::string::npos) << error_of(d);
  d["system"]["push_bound"] = 3;
  const ModelParams p = parse(d);
  EXPECT_EQ(p.training.sync, Sync::kBounded);
  EXPECT_EQ(p.training.allocation, Allocation::kSequential);
  EXPECT_EQ(p.training.pull_bound, 1);
  EXPECT_EQ(p.training.push_bound, 3);
}

TEST(EmbcacheScenario, CsvColumnsBecomeFields) {
  const auto file = std::filesystem::temp_directory_path() / "mlsim_embcache_test.csv";
  {
    std::ofstream out(file);
    out << "label,C1,C2\n0,a,x\n1,b,x\n0,a,\n";
  }
  CsvSource s(file, {"C1", "C2"}, "workload.samples.file");
  EXPECT_EQ(s.size(), 3u);
  EXPECT_EQ(s.distinct_rows(), 3u);  // a, b in C1; x in C2
  EXPECT_EQ(s.next(), (Sample{make_key(0, 0), make_key(1, 0)}));
  EXPECT_EQ(s.next(), (Sample{make_key(0, 1), make_key(1, 0)}));
  EXPECT_EQ(s.next(), (Sample{make_key(0, 0)}));                  // the empty C2 is skipped
  EXPECT_EQ(s.next(), (Sample{make_key(0, 0), make_key(1, 0)}));  // cycles
  try {
    CsvSource bad(file, {"C99"}, "w.file");
    ADD_FAILURE() << "a missing column must be an error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("C99"), std::string::npos);
  }
  std::filesystem::remove(file);
}

TEST(EmbcacheScenario, RealCriteoSampleLoads) {
  const auto file = kShared / "embedding/criteo_sample.txt";
  if (!std::filesystem::exists(file)) GTEST_SKIP() << "shared data absent: " << file;
  std::vector<std::string> cols;
  for (int c = 1; c <= 26; ++c) cols.push_back("C" + std::to_string(c));
  CsvSource s(file, cols, "workload.samples.file");
  EXPECT_EQ(s.size(), 200u);
  EXPECT_GT(s.distinct_rows(), 26u);
}

TEST(EmbcacheScenario, CollectiveLayerCosts) {
  json d = base();
  d["system"]["costs"] = {{"launch", "5us"}};
  d["system"]["host"] = {{"message_overhead", "16us"}};
  const ModelParams p = parse(d);
  EXPECT_EQ(p.training.messages.costs.launch, Time::us(5));
  EXPECT_EQ(p.training.messages.host.message_overhead, Time::us(16));
  EXPECT_EQ(parse(base()).training.messages.costs.launch, Time::zero());  // none by default
  d["system"]["host"] = {{"ps_aggregation", "10GB/s"}};
  EXPECT_NE(error_of(d).find("system.host.ps_aggregation"), std::string::npos) << error_of(d);
  d["system"]["host"] = {{"overhead", "1us"}};
  EXPECT_NE(error_of(d).find("system.host"), std::string::npos) << error_of(d);
}

TEST(EmbcacheScenario, DenseLayerKeys) {
  ModelParams p = parse(base());
  EXPECT_EQ(p.training.dense_parameters, 0);  // not synchronised by default
  EXPECT_EQ(p.training.dense_sync, "ring");
  json d = base();
  d["workload"]["dense_parameters"] = 1000;
  d["system"]["dense_sync"] = "ps";
  p = parse(d);
  EXPECT_EQ(p.training.dense_parameters, 1000);
  EXPECT_EQ(p.training.dense_sync, "ps");
  d["system"]["dense_sync"] = "allreduce";  // not a registered strategy
  EXPECT_NE(error_of(d).find("system.dense_sync"), std::string::npos) << error_of(d);
  d = base();
  d["workload"]["dense_parameters"] = -1;
  EXPECT_NE(error_of(d).find("workload.dense_parameters"), std::string::npos) << error_of(d);
}

// PS servers are the hosts after the workers; the transport gives the per-message host costs the
// scenario's system.host does not.
TEST(EmbcacheScenario, ServersAndTransport) {
  json d = base();
  d["system"]["servers"] = 2;
  ModelParams p = parse(d);
  EXPECT_EQ(p.training.workers.size(), 3u);  // 5 hosts: 3 workers, then the 2 servers
  ASSERT_EQ(p.training.servers.size(), 2u);
  for (NodeId s : p.training.servers)
    EXPECT_EQ(std::count(p.training.workers.begin(), p.training.workers.end(), s), 0);
  EXPECT_NE(p.training.servers[0], p.training.servers[1]);
  d["workload"]["workers"] = 4;  // 4 + 2 > 5 hosts
  EXPECT_NE(error_of(d).find("workload.workers"), std::string::npos) << error_of(d);
  d = base();
  d["system"]["servers"] = 5;
  EXPECT_NE(error_of(d).find("system.servers"), std::string::npos) << error_of(d);

  EXPECT_EQ(parse(base()).training.messages.host.message_overhead, Time::zero());
  d = base();
  d["system"]["transport"] = "tcp";
  p = parse(d);
  EXPECT_EQ(p.training.messages.host.message_overhead, Time::us(30));
  EXPECT_EQ(p.training.messages.host.message_latency, Time::us(50));
  d["system"]["transport"] = "rdma";
  d["system"]["host"] = {{"message_overhead", "16us"}};  // the scenario's figure wins
  p = parse(d);
  EXPECT_EQ(p.training.messages.host.message_overhead, Time::us(16));
  EXPECT_EQ(p.training.messages.host.message_latency, Time::us(10));
  d["system"]["transport"] = "udp";
  EXPECT_NE(error_of(d).find("system.transport"), std::string::npos) << error_of(d);

  // The per-byte host cost: none in either profile, set apart beside them.
  EXPECT_EQ(parse(base()).training.messages.host.per_byte_ns, 0);
  d = base();
  d["system"]["transport"] = "tcp";
  d["system"]["host"] = {{"per_byte_ns", 0.2}};
  p = parse(d);
  EXPECT_DOUBLE_EQ(p.training.messages.host.per_byte_ns, 0.2);
  EXPECT_EQ(p.training.messages.host.message_overhead, Time::us(30));  // the profile's
  d["system"]["host"] = {{"per_byte_ns", -1}};
  EXPECT_NE(error_of(d).find("system.host.per_byte_ns"), std::string::npos) << error_of(d);
}
