// The job plan cut at a communication scheduler's partition, by hand: units (bursts of packets)
// never cross a chunk, chunks never cross a layer, and both are numbered in production order
// (the last layer first).
#include <gtest/gtest.h>

#include <sstream>

#include "models/ina/job_plan.hpp"

using namespace mlsim;
using namespace mlsim::ina;

namespace {
// Layer 0: 62 values; layer 1: 310 values (a PipeDream profile gives bytes: 4 per value).
DnnProfile plan_two_layers() {
  std::istringstream in(
      "node1 -- A -- forward_compute_time=1.0, backward_compute_time=2.0, activation_size=4.0, "
      "parameter_size=248.0\n"
      "node2 -- B -- forward_compute_time=1.0, backward_compute_time=2.0, activation_size=4.0, "
      "parameter_size=1240.0\n"
      "\tnode1 -- node2\n");
  return parse_pipedream_graph(in, "two_layers");
}
}  // namespace

// 62 values a packet, bursts of 2 packets, partition 124 values:
//   layer 1 (310 values) -> chunks of 124, 124, 62 -> units of 2, 2, 1 packets (124, 124, 62
//   values): units 0, 1, 2, chunks 0, 1, 2;
//   layer 0 (62 values) -> one chunk of 62 -> one unit of 1 packet: unit 3, chunk 3.
TEST(InaJobPlan, UnitsNeverCrossTheSchedulersChunks) {
  PlanOptions o;
  o.values_per_packet = 62;
  o.burst_packets = 2;
  o.partition = 124;
  const JobPlan plan = make_job_plan(plan_two_layers(), o);
  ASSERT_EQ(plan.chunks.size(), 4u);
  EXPECT_EQ(plan.unit_packets, (std::vector<std::uint16_t>{2, 2, 1, 1}));
  EXPECT_EQ(plan.unit_elements, (std::vector<std::uint32_t>{124, 124, 62, 62}));
  EXPECT_EQ(plan.unit_layer, (std::vector<std::uint32_t>{1, 1, 1, 0}));
  EXPECT_EQ(plan.unit_chunk, (std::vector<std::uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(plan.layers[1].first_chunk, 0u);
  EXPECT_EQ(plan.layers[0].first_chunk, 3u);
  EXPECT_EQ(plan.chunks[2].index, 2u);
  EXPECT_EQ(plan.chunks[2].elements, 62);
  EXPECT_EQ(plan.chunks[3].layer, 0u);
  EXPECT_EQ(plan.elements(), 372);
}

// Partition 0 (the framework's FIFO): a chunk is a whole layer, cut into bursts as before:
//   layer 1 (310 values = 5 packets) -> units of 2, 2, 1 packets in one chunk; layer 0 one unit.
TEST(InaJobPlan, WholeLayersWithoutAPartition) {
  PlanOptions o;
  o.values_per_packet = 62;
  o.burst_packets = 2;
  const JobPlan plan = make_job_plan(plan_two_layers(), o);
  ASSERT_EQ(plan.chunks.size(), 2u);
  EXPECT_EQ(plan.unit_packets, (std::vector<std::uint16_t>{2, 2, 1, 1}));
  EXPECT_EQ(plan.unit_chunk, (std::vector<std::uint32_t>{0, 0, 0, 1}));
  EXPECT_EQ(plan.chunks[0].units, 3u);
  EXPECT_EQ(plan.chunks[0].elements, 310);
}
