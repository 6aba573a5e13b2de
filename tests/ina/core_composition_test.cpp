// INA as a strategy of the training core, composed with the core's communication schedulers:
// ByteScheduler's order over ATP, computed by hand. Link model as in mechanisms_test.cpp: 100
// Gbps, an ATP packet of 308 bytes is 24.64 ns on the wire, 500 ns per hop, 400 ns switch
// pipeline, arrivals rounded up to whole nanoseconds at each hop.
#include <gtest/gtest.h>

#include <sstream>

#include "models/ina/ina_cluster.hpp"
#include "test_support.hpp"

using namespace mlsim;
using namespace mlsim::ina;
using namespace mlsim::ina::testing;

namespace {
// Layer 0: forward 200 us, backward 1 us, 62 values; layer 1: forward 100 us, backward 200 us,
// 186 values (three chunks of one ATP packet at partition 62).
std::shared_ptr<const DnnProfile> small_first_layer() {
  std::istringstream in(
      "node1 -- A -- forward_compute_time=0.2, backward_compute_time=0.001, "
      "activation_size=4.0, parameter_size=248.0\n"
      "node2 -- B -- forward_compute_time=0.1, backward_compute_time=0.2, activation_size=4.0, "
      "parameter_size=744.0\n"
      "\tnode1 -- node2\n");
  return std::make_shared<const DnnProfile>(parse_pipedream_graph(in, "small_first_layer"));
}
}  // namespace

// ByteScheduler over ATP: 2 workers, 2 iterations, partition 62 values (one packet), credit 62
// (one chunk in flight per worker), one aggregator. A lone chunk's round trip, from the workers'
// send at t: both packets at the switch at t + 25 + 500 + 400 = t + 925 (the first claims the
// aggregator, the second completes it), at the PS t + 950 + 500 = t + 1,450, its result at the
// switch t + 1,475 + 900 = t + 2,375 (released), at the workers t + 2,400 + 500 = t + 2,900.
//   Iteration 0 on both workers: F0 [0, 200,000] F1 [200,000, 300,000] B1 [300,000, 500,000]
//   B0 [500,000, 501,000].
//   500,000: layer 1's chunks (1,0) (1,1) (1,2) are ready; (1,0) takes the credit, back 502,900.
//   501,000: layer 0's chunk (0,0) is ready and, of higher priority (nearer the input), overtakes
//   (1,1) when the credit comes back: 502,900 -> 505,800. Then (1,1) 505,800 -> 508,700 and
//   (1,2) 508,700 -> 511,600.
//   Iteration 1: F0 waits for layer 0 until 505,800: F0 [505,800, 705,800], F1 (layer 1 back at
//   511,600) [705,800, 805,800], B1 [805,800, 1,005,800], B0 [1,005,800, 1,006,800]; chunks as
//   before from 1,005,800: (1,0) back 1,008,700, (0,0) 1,011,600, (1,1) 1,014,500, (1,2)
//   1,017,400, the job's end.
// Under FIFO the next iteration's F0 would wait for layer 0's packet, which leaves behind all of
// layer 1's.
TEST(InaOnTheCore, ByteSchedulerOrdersChunksOverAtp) {
  Engine engine;
  ClusterParams p = one_aggregator(PolicyKind::kAtp);
  p.scheduler = "bytescheduler";
  p.scheduler_config = {62, 62};
  p.jobs.push_back(job(small_first_layer(), 2, 2));
  InaCluster cluster(engine, p);
  std::vector<std::uint64_t> seqs;  // chunk sequence numbers in the order the switch saw them
  cluster.policy().pool().set_observer([&](const PoolEvent& e) {
    if (e.kind == PoolEvent::kClaim) seqs.push_back(e.seq);
  });
  cluster.start();
  engine.run();
  ASSERT_TRUE(cluster.all_finished());
  EXPECT_EQ(cluster.job(0).finished_at(), Time::ns(1'017'400));
  EXPECT_EQ(cluster.outcomes()[0].iteration_marks,
            (std::vector<Time>{Time::zero(), Time::ns(505'800), Time::ns(1'017'400)}));
  // Units are numbered in production order (layer 1's chunks 0, 1, 2, then layer 0's: 3), four a
  // iteration; the switch aggregates them in ByteScheduler's order.
  EXPECT_EQ(seqs, (std::vector<std::uint64_t>{0, 3, 1, 2, 4, 7, 5, 6}));
  const InaCounters& c = cluster.stats();
  EXPECT_EQ(c.collision_packets, 0u);
  EXPECT_EQ(c.aggregated_packets, 16u);  // 4 chunks x 2 workers x 2 iterations
  EXPECT_EQ(c.elements_delivered, 248 * 2 * 2);
  EXPECT_EQ(c.wrong_sums, 0u);
}

// SwitchML streams chunks through its slots in production order; another scheduler's order is
// refused when the cluster is built (prepare time), naming the key.
TEST(InaOnTheCore, SwitchMlRefusesByteScheduler) {
  Engine engine;
  ClusterParams p = one_aggregator(PolicyKind::kSwitchMl);
  p.aggregator_memory = Bytes{2 * 1024};
  p.scheduler = "bytescheduler";
  p.scheduler_config = {256, 256};
  p.jobs.push_back(job(small_first_layer(), 2, 1));
  try {
    InaCluster cluster(engine, p);
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("system.scheduler"), std::string::npos) << e.what();
  }
}
