// The training core with each synchronisation strategy against iteration times computed by
// hand. Links carry 4e6 bytes/s (1M fp32 parameters per second), no latency, no message costs;
// the flow backend shares a link max-min.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include "tests/training/test_support.hpp"

using namespace mlsim;
using namespace mlsim::training;
using namespace mlsim::training::testing;

namespace {
// Layer 0: forward 1 s, backward 1 s, 1M parameters; layer 1: 1 s, 1 s, 2M parameters.
const std::vector<Layer> kTwoLayers = {{1, 1, M}, {1, 1, 2 * M}};
}  // namespace

// PS sync, 2 workers + 1 server, FIFO (whole tensors, all at once), 2 iterations.
//   Iteration 0, both workers: F0 [0,1] F1 [1,2] B1 [2,3] B0 [3,4].
//   At 3 both workers push layer 1 (8 MB each) into the server's one link: 2e6 B/s each. At 4
//   the layer 0 pushes (4 MB each) join: 1e6 B/s each for all four. The layer 1 pushes have
//   8 - 2 = 6 MB left, the layer 0 ones 4 MB: layer 0 is in at 8; layer 1 has 2 MB left, then
//   2e6 B/s each: in at 9.
//   Pulls leave the server on its one link: layer 0 (4 MB to each worker) from 8 at 2e6 B/s
//   each, 2 MB left at 9; then layer 1's two pulls join, 1e6 B/s each: layer 0 back at 11;
//   layer 1 has 8 - 2 = 6 MB left, 2e6 B/s each: back at 14.
//   Iteration 1: F0 [11,12], F1 waits for layer 1: [14,15] B1 [15,16] B0 [16,17]: the same
//   pattern 13 s later, so the job ends at 14 + 13 = 27.
TEST(HandComputed, TwoLayersWithParameterServerSync) {
  Job job(2, 1, kTwoLayers, 2, "fifo", "ps", {});
  job.run();
  ASSERT_TRUE(job.core->finished());
  EXPECT_EQ(job.iteration_starts(), (std::vector<double>{0, 11}));
  EXPECT_DOUBLE_EQ(job.core->finish_time().seconds(), 27);
  EXPECT_EQ(job.core->iteration_seconds(), (std::vector<double>{11, 16}));
  // Per iteration each worker pushes and pulls 3M parameters: 2 x 2 x 12 MB x 2 iterations.
  EXPECT_EQ(job.strategy->bytes_delivered(), 2 * 2 * 12'000'000 * 2);
}

// ps-lite's connections (SyncOptions::in_order_connections): 1 worker, 2 servers, 3 layers,
// FIFO with no engine limit (every ready tensor handed to ps at once, as MXNet does), 1
// iteration. Layers: 0 (1M, key 0: server 0), 1 (1M, key 1: server 1), 2 (2M, key 2: server 0);
// forward 1 s each, backward 0.5 s: B2 [3,3.5] B1 [3.5,4] B0 [4,4.5].
//   In order, whole tensors: push 2 (to s0) alone from 3.5; push 1 (to s1) from 4, both at half
//   rate; push 0 (to s0) is ready at 4.5 but waits behind push 2 on the connection to s0. Push
//   1 is in at 6; push 2 has 0.5M left, alone: in at 6.5; push 0 then alone [6.5,7.5]. Pulls
//   on the worker's downlink: 1 alone from 6 (0.5M by 6.5), then with pull 2 at half rate: 1
//   back at 7.5; pull 0 joins pull 2 (1.5M left) at 7.5: 0 back at 9.5, 2 (0.5M left) at 10.
//   Shared (every push at once, the model before): from 4.5 three pushes at 1/3: push 1 in at
//   6.75, push 0 at 7.25, push 2 at 7.5; pulls 1 alone [6.75,7.25], then with 0, then all
//   three from 7.5: 1 back at 8.625, 0 at 9.625, 2 at 10.75.
//   In order, layer 2 sliced (bound 1.5M: 1M to each server): both slices from 3.5 at half
//   rate, in at 5.5; push 1 waits behind slice 1 on the connection to s1, push 0 behind slice
//   0 on the one to s0: both [5.5,7.5] at half rate; 2's pulls [5.5,7.5], 0's and 1's pulls
//   [7.5,9.5].
TEST(HandComputed, PsLiteConnectionsSendInOrderPerServer) {
  const std::vector<Layer> layers{{1, 0.5, M}, {1, 0.5, M}, {1, 0.5, 2 * M}};
  struct Case {
    bool in_order;
    std::int64_t bound;
    // per layer 0, 1, 2: push in (credit back), parameters back; then the job's end
    std::vector<double> pushed, back;
    double finish;
    // pushes (worker -> server) as the network started them: (server, start)
    std::vector<std::pair<int, double>> push_starts;
  };
  for (const Case& c :
       {Case{true, 1'000'000'000, {7.5, 6, 6.5}, {9.5, 7.5, 10}, 10, {{0, 3.5}, {1, 4}, {0, 6.5}}},
        Case{false,
             1'000'000'000,
             {7.25, 6.75, 7.5},
             {9.625, 8.625, 10.75},
             10.75,
             {{0, 3.5}, {1, 4}, {0, 4.5}}},
        Case{true,
             1'500'000,
             {7.5, 7.5, 5.5},
             {9.5, 9.5, 7.5},
             9.5,
             {{0, 3.5}, {1, 3.5}, {0, 5.5}, {1, 5.5}}}}) {
    SCOPED_TRACE(::testing::Message()
                 << (c.in_order ? "in order" : "shared") << ", bound " << c.bound);
    Job job(1, 2, layers, 1, "fifo", "ps", {}, false, [&](SyncOptions& o) {
      o.in_order_connections = c.in_order;
      o.bigarray_bound = c.bound;
    });
    job.run();
    ASSERT_TRUE(job.core->finished());
    EXPECT_NEAR(job.core->finish_time().seconds(), c.finish, 1e-6);
    // Handed to ps in ready order, every tensor as soon as it is ready (no engine limit).
    ASSERT_EQ(job.tap.starts.size(), 3U);
    for (std::size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(job.tap.starts[i].chunk.layer, 2 - i);
      EXPECT_DOUBLE_EQ(job.tap.starts[i].at.seconds(), 3.5 + 0.5 * static_cast<double>(i));
    }
    std::vector<double> pushed(3, -1), back(3, -1);
    for (const auto& r : job.tap.reports) {
      if (r.release) pushed[r.chunk.layer] = r.at.seconds();
      if (r.arrived) back[r.chunk.layer] = r.at.seconds();
    }
    for (std::size_t l = 0; l < 3; ++l) {  // flow rates of 1/3 round to the nanosecond
      EXPECT_NEAR(pushed[l], c.pushed[l], 1e-6) << "layer " << l;
      EXPECT_NEAR(back[l], c.back[l], 1e-6) << "layer " << l;
    }
    std::vector<std::pair<int, double>> push_starts;
    const NodeId worker = job.topology.hosts()[0];
    for (const TransferResult& t : job.recorder.transfers)
      if (t.src == worker)
        push_starts.emplace_back(t.dst == job.topology.hosts()[1] ? 0 : 1, t.started.seconds());
    std::sort(push_starts.begin(), push_starts.end(), [](const auto& a, const auto& b) {
      return std::tie(a.second, a.first) < std::tie(b.second, b.first);
    });
    ASSERT_EQ(push_starts.size(), c.push_starts.size());
    for (std::size_t i = 0; i < push_starts.size(); ++i) {
      EXPECT_EQ(push_starts[i].first, c.push_starts[i].first) << "push " << i;
      EXPECT_NEAR(push_starts[i].second, c.push_starts[i].second, 1e-6) << "push " << i;
    }
  }
}

// Ring sync, 2 workers, FIFO (one tensor at a time), 2 iterations. A ring of 2 moves P
// parameters in 2 steps of 2P bytes, each worker sending on its own link: P / 2 s a step.
//   Iteration 0: F0 [0,1] F1 [1,2] B1 [2,3] B0 [3,4]; layer 1 (2M) [3,5]; layer 0 is ready at
//   4 and waits: [5,6].
//   Iteration 1: F0 [6,7] F1 [7,8] B1 [8,9] B0 [9,10]; layer 1 [9,11], layer 0 [11,12].
TEST(HandComputed, TwoLayersWithRingSync) {
  Job job(2, 0, kTwoLayers, 2, "fifo", "ring", {});
  job.run();
  ASSERT_TRUE(job.core->finished());
  EXPECT_EQ(job.iteration_starts(), (std::vector<double>{0, 6}));
  EXPECT_DOUBLE_EQ(job.core->finish_time().seconds(), 12);
  // 2 (N - 1) = 2 steps, each moving the whole tensor once over the ring: 2 x 12 MB per
  // iteration.
  EXPECT_EQ(job.strategy->bytes_delivered(), 2 * 12'000'000 * 2);
}

namespace {
// The times derived by hand below for a 3-worker reduce at worker 0 then broadcast from it.
void expect_reduce_broadcast_at_worker_zero(const std::string& sync) {
  Job job(3, 0, kTwoLayers, 2, "fifo", sync, {});
  job.run();
  ASSERT_TRUE(job.core->finished());
  // Within a nanosecond: the flow backend ends a transfer on the engine's nanosecond grid.
  ASSERT_EQ(job.iteration_starts().size(), 2U);
  EXPECT_NEAR(job.iteration_starts()[1], 15, 1e-9);
  EXPECT_NEAR(job.core->finish_time().seconds(), 30, 1e-9);
  // 2 (N - 1) = 4 transfers of each layer's whole tensor: 4 x 12 MB per iteration.
  EXPECT_EQ(job.strategy->bytes_delivered(), 4 * 12'000'000 * 2);
}
}  // namespace

// Tree sync, 3 workers, FIFO (one tensor at a time), 2 iterations. A binary tree rooted at
// worker 0 with workers 1 and 2 its children: both send P parameters (4P bytes) into worker 0's
// one link, 2e6 B/s each: 2P / 1M s; then worker 0 sends the sum to both on its one outgoing
// link, 2e6 B/s each: 2P / 1M s. Layer 1 (2M) takes 8 s, layer 0 (1M) 4 s.
//   Iteration 0: F0 [0,1] F1 [1,2] B1 [2,3] B0 [3,4]; layer 1 [3,11]; layer 0, ready at 4,
//   waits: [11,15].
//   Iteration 1: F0 waits for layer 0: [15,16] F1 [16,17] B1 [17,18] B0 [18,19]; layer 1
//   [18,26], layer 0 [26,30].
// (A ring of 3 would take 2 (N - 1) / N x 4P bytes / 4e6 B/s = 4P / 3M s per layer.)
TEST(HandComputed, ThreeWorkersWithTreeSync) {
  expect_reduce_broadcast_at_worker_zero("tree");
}

// RAT sync, the same 3 workers on one star: one region (every host under one switch), whose
// aggregator for a chunk's only piece is its first member, worker 0 (rat_plan.hpp: piece 0,
// member 0); the region is the root, so there is no tree of regions. Workers 1 and 2 send to
// worker 0, which sends the sum back: the binary tree's transfers above, so the same times.
TEST(HandComputed, RatOnOneRackIsAReduceAtTheRacksAggregator) {
  expect_reduce_broadcast_at_worker_zero("rat");
}

// ByteScheduler over PS with partition 1M and credit 1M (one chunk in flight per worker, its
// credit back when its push arrived), 1 worker + 1 server, one iteration, layer 0's backward
// 0.5 s: F0 [0,1] F1 [1,2] B1 [2,3] B0 [3,3.5]. Layer 1's chunk 0 is pushed [3,4]; layer 0's
// chunk, ready at 3.5, overtakes layer 1's chunk 1 when the credit comes back at 4: push [4,5]
// while layer 1's chunk 0 is pulled [4,5]; then layer 1's chunk 1 is pushed [5,6] while layer
// 0 is pulled [5,6]; its pull [6,7] ends the job.
TEST(HandComputed, ByteSchedulerOverParameterServer) {
  Job job(1, 1, {{1, 0.5, M}, {1, 1, 2 * M}}, 1, "bytescheduler", "ps", {M, M});
  job.run();
  ASSERT_TRUE(job.core->finished());
  EXPECT_DOUBLE_EQ(job.core->finish_time().seconds(), 7);
  using Order = std::vector<std::pair<std::uint32_t, std::uint32_t>>;
  EXPECT_EQ(job.started(), (Order{{1, 0}, {0, 0}, {1, 1}}));
}

// abort() (a model's watchdog gives the job up): ring sync as above, aborted at 2.5 s while B1
// [2,3] runs. B1's end has no effect (no gradient handed over, nothing sent), no op starts
// after it, and the job never finishes; the last op that counted ended at 2 (F1).
TEST(HandComputed, AbortStopsTheJob) {
  Job job(2, 0, kTwoLayers, 2, "fifo", "ring", {});
  job.engine.schedule_at(Time::ms(2500), [&] { job.core->abort(); });
  job.run();
  EXPECT_TRUE(job.core->aborted());
  EXPECT_FALSE(job.core->finished());
  EXPECT_EQ(job.core->last_compute_end(), Time::s(2));
  EXPECT_TRUE(job.tap.starts.empty());
  EXPECT_EQ(job.engine.now(), Time::s(3));  // B1's end was the last event
}

// A job killed mid-iteration: ring sync, 2 workers, kTwoLayers, one iteration. Both workers
// run F0 [0,1] F1 [1,2] B1 [2,3] B0 [3,4]; layer 1's ring (8 MB, two 4 MB segments, each
// worker sending one to the other on its own uplink at 4e6 B/s) starts at 3 and its first step
// is half sent at 3.5, while both B0 ops are running. Destroying the strategy (its collectives
// cancel their transfers) and the core (it cancels its ops) there leaves nothing running: 2
// transfers (8 MB) started, 0 delivered, 8 MB failed in the network, no op in progress, and the
// engine drains without calling into the freed job.
TEST(HandComputed, DestroyingAJobMidIterationCancelsItsOpsAndTransfers) {
  Job job(2, 0, kTwoLayers, 1, "fifo", "ring", {});
  job.core->start();
  job.engine.run_until(Time::ms(3500));
  EXPECT_EQ(job.compute.in_progress(), 2u);
  EXPECT_EQ(job.network.totals().transfers_in_flight, 2u);
  job.strategy.reset();
  job.core.reset();
  EXPECT_EQ(job.compute.in_progress(), 0u);
  job.engine.run();
  const NetworkTotals t = job.network.totals();
  EXPECT_EQ(t.transfers_started, 2u);
  EXPECT_EQ(t.transfers_in_flight, 0u);
  EXPECT_EQ(t.bytes_delivered.count, 0);
  EXPECT_EQ(t.bytes_failed.count, 8'000'000);
}
