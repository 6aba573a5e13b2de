// Chakra execution traces (sim_core/workload/chakra) through the chakra_trace model: a tiny
// trace written here message by message, with its time derived by hand, and the errors a bad
// trace raises at prepare time. Needs protobuf (MLSIM_HAVE_CHAKRA).
#ifdef MLSIM_HAVE_CHAKRA
#include <google/protobuf/util/delimited_message_util.h>
#include <gtest/gtest.h>

#include <fstream>

#include "chakra_et.pb.h"
#include "models/llm_training/register.hpp"
#include "tests/support/run_json.hpp"
#include "tests/support/temp_dir.hpp"

namespace mlsim {
namespace {

using Attr = mlsim_chakra::AttributeProto;

struct TraceNode {
  std::uint64_t id;
  mlsim_chakra::NodeType type;
  std::uint64_t duration_us = 0;
  std::vector<std::uint64_t> deps;
  std::vector<std::pair<std::string, std::int64_t>> attrs;
};

void write_trace(const std::filesystem::path& file, const std::vector<TraceNode>& nodes) {
  std::ofstream out(file, std::ios::binary);
  mlsim_chakra::GlobalMetadata meta;
  meta.set_version("0.0.4");
  ASSERT_TRUE(google::protobuf::util::SerializeDelimitedToOstream(meta, &out));
  for (const auto& t : nodes) {
    mlsim_chakra::Node n;
    n.set_id(t.id);
    n.set_name("n" + std::to_string(t.id));
    n.set_type(t.type);
    n.set_duration_micros(t.duration_us);
    for (auto d : t.deps) n.add_data_deps(d);
    for (const auto& [name, v] : t.attrs) {
      Attr* a = n.add_attr();
      a->set_name(name);
      a->set_int64_val(v);
    }
    ASSERT_TRUE(google::protobuf::util::SerializeDelimitedToOstream(n, &out));
  }
}

nlohmann::json scenario(const std::filesystem::path& dir, const std::string& communication) {
  return nlohmann::json::parse(R"({
    "name": "chakra_test", "seed": 1,
    "topology": {"kind": "star", "hosts": 2, "link": {"bandwidth": "8Gbps", "latency": "0s"}},
    "network": {"backend": "flow"},
    "system": {"model": "chakra_trace", "communication": ")" +
                               communication + R"("},
    "workload": {"trace": ")" + (dir / "trace").string() +
                               R"(", "ranks": 2}})");
}

// Rank 0: compute 10 us, send 1 MB to rank 1, compute 5 us, all-reduce 2 MB.
// Rank 1: receive 1 MB from rank 0, compute 20 us, all-reduce 2 MB.
// Two 1-GPU hosts on a star of 1 GB/s links, no collective costs. By hand:
//   rank 0: C [0,10 us]; the send meets rank 1's receive (posted at 0) and takes 1 MB / 1 GB/s
//   = 1 ms: [10, 1010 us]; C [1010, 1015 us]; then waits for rank 1 at the all-reduce.
//   rank 1: receive done at 1010 us; C [1010, 1030 us]; all-reduce from 1030 us: a 2-rank ring
//   moves 2(n-1)/n S = 2 MB per rank at 1 GB/s = 2 ms: both end at 3030 us.
// Rank 0: compute 15 us, idle 1000 us for the message (p2p) and 2015 us for the all-reduce;
// rank 1: compute 20 us, idle 1010 us for the message and 2000 us for the all-reduce.
void write_example(const std::filesystem::path& dir) {
  using mlsim_chakra::COMM_COLL_NODE, mlsim_chakra::COMM_RECV_NODE, mlsim_chakra::COMM_SEND_NODE,
      mlsim_chakra::COMP_NODE;
  const std::int64_t all_reduce = mlsim_chakra::ALL_REDUCE;
  // Rank 0's nodes are written out of order: node 3 (the all-reduce) first, to check that the
  // reader runs them in dependency order.
  write_trace(dir / "trace.0.et",
              {{3, COMM_COLL_NODE, 0, {2}, {{"comm_type", all_reduce}, {"comm_size", 2'000'000}}},
               {0, COMP_NODE, 10, {}, {}},
               {1, COMM_SEND_NODE, 0, {0}, {{"comm_dst", 1}, {"comm_size", 1'000'000}}},
               {2, COMP_NODE, 5, {1}, {}}});
  write_trace(dir / "trace.1.et",
              {{7, COMM_RECV_NODE, 0, {}, {{"comm_src", 0}, {"comm_size", 1'000'000}}},
               {8, COMP_NODE, 20, {7}, {}},
               {9, COMM_COLL_NODE, 0, {8}, {{"comm_type", all_reduce}, {"comm_size", 2'000'000}}}});
}

TEST(ChakraTrace, HandWrittenTraceTakesTheHandDerivedTime) {
  testing::TempDir dir;
  write_example(dir.path());
  const Registries r = test::registries_with(register_llm_training);
  for (const char* mode : {"closed_form", "network"}) {
    const RunOutput o = test::run_json(scenario(dir.path(), mode), r);
    const auto& m = o.results.metrics();
    EXPECT_EQ(m.at("completed"), 1) << mode;
    EXPECT_NEAR(m.at("iteration_time_s"), 3030e-6, 1e-12) << mode;
    EXPECT_EQ(m.at("nodes"), 7) << mode;
    EXPECT_EQ(m.at("messages"), 1) << mode;
    EXPECT_EQ(m.at("collectives"), 1) << mode;
    // Means over the two ranks: compute (15 + 20) / 2 us; p2p idle (1000 + 1010) / 2 us (rank 1
    // waits for the message from time 0); collective idle (2015 + 2000) / 2 us.
    EXPECT_NEAR(m.at("compute_s"), 17.5e-6, 1e-12) << mode;
    EXPECT_NEAR(m.at("exposed_p2p_s"), 1005e-6, 1e-12) << mode;
    EXPECT_NEAR(m.at("exposed_collective_s"), 2007.5e-6, 1e-12) << mode;
  }
}

// The shipped example (workloads/traces/chakra_example, written by tools/chakra_example.py): 4
// ranks, 2 pipeline stages x 2 replicas, one micro-batch, 4 one-GPU hosts on a star of 1 GB/s
// links. By hand (README.md there), rank r = d + 2 s:
//   stage 0: forward [0, 100 us]; activation to its stage-1 peer 1 MB / 1 GB/s [100, 1100];
//            its gradient back [1400, 2400]; backward [2400, 2600]; 2-rank all-reduce of 2 MB
//            (2 MB per rank at 1 GB/s) [2600, 4600].
//   stage 1: activation in at 1100; forward and backward [1100, 1400]; gradient [1400, 2400];
//            all-reduce [2400, 4400].
// No two transfers share a link (the pairs are disjoint), so both modes agree: 4.6 ms.
// Exposed time per rank (idle charged to the node whose end let the next kernel start, the end
// to the last node): stage 0 p2p 2300 us, collective 2000 us; stage 1 p2p 1100 us (waiting for
// the activation), collective 3000 us. Means over 4 ranks: p2p 1700 us, collective 2500 us.
TEST(ChakraTrace, ShippedExampleTraceTakesTheHandDerivedTime) {
  const std::filesystem::path file =
      std::filesystem::path(MLSIM_SOURCE_DIR) / "workloads/traces/chakra_example/scenario.json";
  std::ifstream in(file);
  const nlohmann::json doc = nlohmann::json::parse(in);
  const Registries r = test::registries_with(register_llm_training);
  for (const char* mode : {"network", "closed_form"}) {
    nlohmann::json d = doc;
    d.erase("variants");
    d["system"]["communication"] = mode;
    const RunOutput o = test::run_json(d, r, file);
    const auto& m = o.results.metrics();
    EXPECT_EQ(m.at("completed"), 1) << mode;
    EXPECT_NEAR(m.at("iteration_time_s"), 4600e-6, 1e-12) << mode;
    EXPECT_EQ(m.at("nodes"), 20) << mode;
    EXPECT_EQ(m.at("messages"), 4) << mode;
    EXPECT_EQ(m.at("collectives"), 2) << mode;
    EXPECT_NEAR(m.at("compute_s"), 300e-6, 1e-12) << mode;
    EXPECT_NEAR(m.at("exposed_p2p_s"), 1700e-6, 1e-12) << mode;
    EXPECT_NEAR(m.at("exposed_collective_s"), 2500e-6, 1e-12) << mode;
  }
}

TEST(ChakraTrace, BadTracesAreInputErrorsAtPrepareTime) {
  const Registries r = test::registries_with(register_llm_training);
  using mlsim_chakra::COMM_RECV_NODE, mlsim_chakra::COMM_SEND_NODE, mlsim_chakra::COMP_NODE;
  auto error = [&](const std::vector<TraceNode>& rank0, const std::vector<TraceNode>& rank1) {
    testing::TempDir dir;
    write_trace(dir.path() / "trace.0.et", rank0);
    write_trace(dir.path() / "trace.1.et", rank1);
    return test::prepare_error(scenario(dir.path(), "closed_form"), r);
  };
  const TraceNode compute{0, COMP_NODE, 1, {}, {}};
  EXPECT_NE(error({{0, COMP_NODE, 1, {5}, {}}}, {compute}).find("depends on node 5"),
            std::string::npos);
  EXPECT_NE(
      error({{0, COMP_NODE, 1, {1}, {}}, {1, COMP_NODE, 1, {0}, {}}}, {compute}).find("cycle"),
      std::string::npos);
  EXPECT_NE(error({{0, COMM_SEND_NODE, 0, {}, {{"comm_dst", 1}, {"comm_size", 10}}}},
                  {{0, COMM_RECV_NODE, 0, {}, {{"comm_src", 0}, {"comm_size", 20}}}})
                .find("sizes differ"),
            std::string::npos);
  EXPECT_NE(error({{0, mlsim_chakra::COMM_COLL_NODE, 0, {}, {{"comm_type", 5}, {"comm_size", 1}}}},
                  {compute})
                .find("comm_type"),
            std::string::npos);
  testing::TempDir empty;
  EXPECT_NE(test::prepare_error(scenario(empty.path(), "closed_form"), r).find("workload.trace"),
            std::string::npos);
}

}  // namespace
}  // namespace mlsim
#endif
