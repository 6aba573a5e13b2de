// The scheduler, placement, fair share and failures against cases computed by hand.
#include <gtest/gtest.h>

#include <random>

#include "models/cluster/fair_share.hpp"
#include "models/cluster/interval_series.hpp"
#include "models/cluster/job_queue.hpp"
#include "test_support.hpp"

using namespace mlsim;
using namespace mlsim::cluster;
using namespace mlsim::cluster::testing;

namespace {

// One node of 4 GPUs; all four jobs submitted at 0 in this order:
//   J0: 2 GPUs, 10 s   J1: 4 GPUs, 10 s   J2: 2 GPUs, 5 s   J3: 2 GPUs, 20 s
// FCFS: J0 starts at 0; J1 needs all 4 and blocks J2 and J3 until J0 ends at 10; J1 runs 10-20;
//   then J2 and J3 start together at 20.
// EASY: J1's reservation is 10 (J0's end). J2 (ends at 5 <= 10) backfills at 0. At 5, J3 would
//   run to 25 > 10 and hold 2 of the 4 GPUs J1 needs at 10: no backfill. J1 runs 10-20, J3 20-40.
std::vector<JobSpec> four_jobs() {
  return {job(0, 2, 10), job(0, 4, 10), job(0, 2, 5), job(0, 2, 20)};
}

double start_s(const RunResult& r, std::uint64_t id) {
  return r.of(id).start.seconds();
}

}  // namespace

TEST(ClusterScheduling, FcfsBlocksBehindTheHead) {
  const RunResult r = run(one_type(1, 4, Policy::kFcfs), four_jobs());
  EXPECT_DOUBLE_EQ(start_s(r, 0), 0);
  EXPECT_DOUBLE_EQ(start_s(r, 1), 10);
  EXPECT_DOUBLE_EQ(start_s(r, 2), 20);
  EXPECT_DOUBLE_EQ(start_s(r, 3), 20);
  EXPECT_DOUBLE_EQ(r.metrics().at("queue_delay_mean_s"), (0 + 10 + 20 + 20) / 4.0);
  EXPECT_DOUBLE_EQ(r.metrics().at("makespan_s"), 40);
  // Jobs wait from 0 to 20, beside 2 busy GPUs (0-10) then 4 (10-20): 60 / (4 x 20).
  EXPECT_DOUBLE_EQ(r.metrics().at("gpu_allocated_while_queued"), 0.75);
}

TEST(ClusterScheduling, EasyBackfillsAShortJobWithoutDelayingTheHead) {
  const RunResult r = run(one_type(1, 4, Policy::kEasyBackfill), four_jobs());
  EXPECT_DOUBLE_EQ(start_s(r, 0), 0);
  EXPECT_DOUBLE_EQ(start_s(r, 2), 0);   // backfilled
  EXPECT_DOUBLE_EQ(start_s(r, 1), 10);  // at its reservation
  ASSERT_TRUE(r.of(1).first_reservation);
  EXPECT_DOUBLE_EQ(r.of(1).first_reservation->seconds(), 10);
  EXPECT_DOUBLE_EQ(start_s(r, 3), 20);  // not backfilled: it would have delayed J1
  EXPECT_DOUBLE_EQ(r.metrics().at("queue_delay_mean_s"), (0 + 10 + 0 + 20) / 4.0);
  EXPECT_EQ(r.metrics().at("reservations_missed"), 0);
  // Allocated GPU-seconds 2*10 + 2*5 + 4*10 + 2*20 = 110 over 4 GPUs x 40 s.
  EXPECT_DOUBLE_EQ(r.metrics().at("gpu_utilisation_mean"), 110.0 / 160.0);
  // Jobs wait from 0 to 20 beside 4 busy GPUs (0-5), 2 (5-10), 4 (10-20): 70 / 80.
  EXPECT_DOUBLE_EQ(r.metrics().at("gpu_allocated_while_queued"), 0.875);
}

TEST(ClusterScheduling, BackfillTrustsTheEstimates) {
  // Node of 4. J0: 2 GPUs, 10 s at 0; J1: 4 GPUs, 10 s at 0; J2: 2 GPUs, 8 s at 4.
  // Exact estimates: J1 is reserved at 10; J2 would end at 12 > 10 holding 2 of J1's 4 GPUs, so
  //   it waits: J1 10-20, J2 20-28.
  // Estimates 2x: J0's estimated end, hence J1's reservation, is 20; J2's estimated end 4 + 16 =
  //   20 is not later, so it backfills at 4 and really ends at 12: J1 starts at 12 (before its
  //   reservation, later than with exact estimates).
  const std::vector<JobSpec> jobs{job(0, 2, 10), job(0, 4, 10), job(4, 2, 8)};
  const RunResult exact = run(one_type(1, 4, Policy::kEasyBackfill), jobs);
  EXPECT_DOUBLE_EQ(exact.of(1).first_reservation->seconds(), 10);
  EXPECT_DOUBLE_EQ(start_s(exact, 1), 10);
  EXPECT_DOUBLE_EQ(start_s(exact, 2), 20);
  ClusterParams p = one_type(1, 4, Policy::kEasyBackfill);
  p.estimate_factor = 2;
  const RunResult over = run(p, jobs);
  EXPECT_DOUBLE_EQ(over.of(1).first_reservation->seconds(), 20);
  EXPECT_DOUBLE_EQ(start_s(over, 2), 4);
  EXPECT_DOUBLE_EQ(start_s(over, 1), 12);
  EXPECT_EQ(over.metrics().at("reservations_missed"), 0);
}

TEST(ClusterScheduling, BackfillUsesGpusTheReservationDoesNotNeed) {
  // Node of 8. J0: 6 GPUs, 10 s. J1: 4 GPUs (blocked: 2 free), reserved at 10, when 8 are free
  // and it needs 4: 4 spare. J2: 2 GPUs, 100 s, runs past 10 but fits in the spare: backfills.
  const RunResult r =
      run(one_type(1, 8, Policy::kEasyBackfill), {job(0, 6, 10), job(0, 4, 10), job(0, 2, 100)});
  EXPECT_DOUBLE_EQ(start_s(r, 2), 0);
  EXPECT_DOUBLE_EQ(start_s(r, 1), 10);
}

TEST(ClusterScheduling, FairShareServesTheLightUserFirst) {
  // One GPU. User 0 submits two 10 s jobs at 0, user 1 one at 1 s.
  // Submit order: 0-10, 10-20, 20-30. Fair share (no decay): at 10, user 0 has used 10 GPU-s and
  // user 1 nothing, so user 1's job goes before user 0's second.
  const std::vector<JobSpec> jobs{job(0, 1, 10, 0), job(0, 1, 10, 0), job(1, 1, 10, 1)};
  const RunResult fifo = run(one_type(1, 1, Policy::kFcfs), jobs);
  EXPECT_DOUBLE_EQ(start_s(fifo, 1), 10);
  EXPECT_DOUBLE_EQ(start_s(fifo, 2), 20);
  ClusterParams p = one_type(1, 1, Policy::kFcfs);
  p.order = Order::kFairShare;
  const RunResult fair = run(p, jobs);
  EXPECT_DOUBLE_EQ(start_s(fair, 2), 10);
  EXPECT_DOUBLE_EQ(start_s(fair, 1), 20);
}

TEST(ClusterScheduling, QuotaSkipsAUserAtItsLimit) {
  // Two GPUs, quota 1 GPU per user. User 0's second job waits although a GPU is free, and does
  // not block user 1's job behind it.
  ClusterParams p = one_type(1, 2, Policy::kFcfs);
  p.user_gpu_quota = 1;
  const RunResult r = run(p, {job(0, 1, 10, 0), job(0, 1, 10, 0), job(0, 1, 10, 1)});
  EXPECT_DOUBLE_EQ(start_s(r, 0), 0);
  EXPECT_DOUBLE_EQ(start_s(r, 2), 0);
  EXPECT_DOUBLE_EQ(start_s(r, 1), 10);
}

TEST(ClusterFairShare, DecayedUsageMatchesTheClosedForm) {
  FairShare fs(Time::s(100));  // half-life 100 s
  fs.add_rate(0, 2);
  fs.advance(Time::s(100));
  // Integral of 2 GPUs over 100 s with decay k = ln2/100: 2 (1 - 1/2) / k.
  const double k = std::log(2.0) / 100;
  EXPECT_NEAR(fs.usage(0), 2 * 0.5 / k, 1e-9);
  fs.add_rate(0, -2);
  fs.advance(Time::s(200));
  EXPECT_NEAR(fs.usage(0), 2 * 0.5 / k * 0.5, 1e-9);
  FairShare plain(Time::zero());
  plain.add_rate(3, 4);
  plain.advance(Time::s(10));
  EXPECT_DOUBLE_EQ(plain.usage(3), 40);
  EXPECT_DOUBLE_EQ(plain.usage(1), 0);
}

TEST(ClusterPlacement, BestFitThenFewestNodes) {
  // Nodes 0 and 1: 8 GPUs; node 2: 4.
  NodePool pool({{"ref", 1.0}}, {{0, 2, 8}, {0, 1, 4}});
  Placement p = pool.place(4, pool.all_types());
  ASSERT_EQ(p.slices.size(), 1u);
  EXPECT_EQ(p.slices[0].node, 2);  // the fullest node with room
  p = pool.place(6, pool.all_types());
  ASSERT_EQ(p.slices.size(), 1u);
  EXPECT_EQ(p.slices[0].node, 0);
  pool.allocate(p);  // node 0: 2 free
  p = pool.place(10, pool.all_types());
  ASSERT_EQ(p.slices.size(), 2u);  // 8 on node 1, then 2 on node 2 (4 free before node 0's 2)
  EXPECT_EQ(p.slices[0].node, 1);
  EXPECT_EQ(p.slices[0].gpus, 8);
  EXPECT_EQ(p.slices[1].node, 2);
  EXPECT_EQ(p.slices[1].gpus, 2);
  EXPECT_FALSE(pool.place(15, pool.all_types()).ok());  // 14 free
  EXPECT_TRUE(pool.place(14, pool.all_types()).ok());
  pool.set_up(1, false);
  EXPECT_FALSE(pool.place(7, pool.all_types()).ok());  // 2 + 4 on up nodes
}

TEST(ClusterPlacement, PerNodeJobsTakeExactlyThatManyGpusOfEachNode) {
  // A Megatron job of TP 2 (gpus_per_node 2): nodes of 4 GPUs with 3, 4, 1 and 2 free.
  NodePool pool({{"ref", 1.0}}, {{0, 4, 4}});
  pool.allocate({0, {{0, 1}, {2, 3}, {3, 2}}});
  EXPECT_EQ(pool.free_gpus_of(0), 10);
  // 2 GPUs: best fit on one node as any job (the fullest with room: node 3, 2 free).
  Placement p = pool.place(2, pool.all_types(), 2);
  ASSERT_EQ(p.slices.size(), 1u);
  EXPECT_EQ(p.slices[0].node, 3);
  // 4 GPUs: two nodes of 2 (node 1 could hold all 4 but would hold two TP groups), the
  // emptiest first: node 1 (4 free), node 0 (3 free); node 2 (1 free) cannot give 2.
  p = pool.place(4, pool.all_types(), 2);
  ASSERT_EQ(p.slices.size(), 2u);
  EXPECT_EQ(p.slices[0].node, 1);
  EXPECT_EQ(p.slices[0].gpus, 2);
  EXPECT_EQ(p.slices[1].node, 0);
  EXPECT_EQ(p.slices[1].gpus, 2);
  // Any split: 4 on node 1 alone.
  EXPECT_EQ(pool.place(4, pool.all_types()).slices.size(), 1u);
  // 8 GPUs by 2: only nodes 0, 1 and 3 have 2 free, so 6 however many are free (10).
  EXPECT_FALSE(pool.place(8, pool.all_types(), 2).ok());
  EXPECT_TRUE(pool.place(6, pool.all_types(), 2).ok());
  EXPECT_TRUE(pool.place(8, pool.all_types()).ok());
  // What a per-node job could ever get: one group per node, 4 nodes.
  EXPECT_EQ(pool.capacity_of(0, 2), 8);
  EXPECT_EQ(pool.capacity_of(0, 5), 0);
  EXPECT_EQ(pool.capacity_of(0, 0), 16);
}

TEST(ClusterScheduling, APerNodeJobLargerThanThePoolCanHoldIsDropped) {
  // Two nodes of 4: 8 GPUs, but a job taking 2 of each node can have at most 4.
  JobSpec big = job(0, 6, 10), fits = job(0, 4, 10);
  big.gpus_per_node = fits.gpus_per_node = 2;
  const RunResult r = run(one_type(2, 4, Policy::kFcfs), {big, fits});
  EXPECT_FALSE(r.of(0).finished);
  EXPECT_FALSE(r.of(0).drop_reason.empty());
  ASSERT_TRUE(r.of(1).finished);
  ASSERT_EQ(r.of(1).slices.size(), 2u);
  for (const Slice& s : r.of(1).slices) EXPECT_EQ(s.gpus, 2);
}

TEST(ClusterScheduling, EasyReservesWholeHostsForAPerNodeHead) {
  // Nodes 0-2 of 4 GPUs and node 3 of 2, one type; exact estimates, no start-up.
  //   A: 4 GPUs, 100 s at 0: best fit on one node, node 0 (free 0, 4, 4, 2).
  //   B: 4 GPUs, 2 per node (a TP 2 job), 50 s at 0: the emptiest nodes with 2 free, 1 and 2
  //      (free 0, 2, 2, 2).
  //   H: 8 GPUs, 4 per node (TP 4 on two hosts), 10 s at 1: blocked (no node has 4 free).
  //   X: 2 GPUs, 100 s at 1: it would go on node 1 now (best fit: the first of the three
  //      nodes with 2 free), and run to 101.
  // Per host (what placement needs): at B's end, 50, nodes 1 and 2 have 4 free: H's
  //   reservation is 50. X runs past 50 on node 1, leaving (0, 2, 4, 2) at 50, where H no
  //   longer fits: no backfill. At 50 H starts on nodes 1 and 2 (to 60) and X on node 3, the
  //   only one left with 2 free (to 150).
  // Per type (before 2026-12-07): 6 free at 1, 10 at 50, so H's reservation was 50 and X,
  //   leaving 8 >= 8 GPUs of the type at 50, backfilled at 1 on node 1; at 50 H did not fit
  //   (0, 2, 4, 2) and waited for A's end: H 100-110, 50 s late, a reservation missed.
  ClusterParams p = one_type(3, 4, Policy::kEasyBackfill);
  p.groups.push_back({0, 1, 2});
  JobSpec a = job(0, 4, 100), b = job(0, 4, 50), h = job(1, 8, 10), x = job(1, 2, 100);
  b.gpus_per_node = 2;
  h.gpus_per_node = 4;
  const RunResult r = run(p, {a, b, h, x});
  EXPECT_DOUBLE_EQ(start_s(r, 0), 0);
  EXPECT_DOUBLE_EQ(start_s(r, 1), 0);
  ASSERT_TRUE(r.of(2).first_reservation);
  EXPECT_DOUBLE_EQ(r.of(2).first_reservation->seconds(), 50);
  EXPECT_DOUBLE_EQ(start_s(r, 2), 50);
  EXPECT_DOUBLE_EQ(r.of(2).end.seconds(), 60);
  ASSERT_EQ(r.of(2).slices.size(), 2u);
  EXPECT_EQ(r.of(2).slices[0].node, 1);
  EXPECT_EQ(r.of(2).slices[1].node, 2);
  EXPECT_DOUBLE_EQ(start_s(r, 3), 50);
  ASSERT_EQ(r.of(3).slices.size(), 1u);
  EXPECT_EQ(r.of(3).slices[0].node, 3);
  EXPECT_EQ(r.metrics().at("reservations_missed"), 0);
  // Waits: H 49 s, X 49 s, A and B none.
  EXPECT_DOUBLE_EQ(r.metrics().at("queue_delay_mean_s"), (0 + 0 + 49 + 49) / 4.0);
}

TEST(ClusterPlacement, FitsOnFreeCountsAgreesWithPlace) {
  // Property: NodePool::fits on the pool's own free counts says what place() does, over random
  // pools of two types (nodes of 1-8 GPUs), allocations, down nodes and jobs of any split or
  // whole per-node groups.
  std::mt19937_64 rng(7);
  auto below = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  int placed = 0, refused = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<NodeGroup> groups;
    for (int g = below(4) + 1; g > 0; --g) groups.push_back({below(2), below(3) + 1, below(8) + 1});
    NodePool pool({{"a", 1.0}, {"b", 0.5}}, groups);
    for (int n = 0; n < pool.node_count(); ++n) {
      const int used = below(pool.node_gpus(n) + 1);
      if (used > 0) pool.allocate({pool.node_type(n), {{n, used}}});
      if (below(5) == 0) pool.set_up(n, false);
    }
    for (int k = 0; k < 20; ++k) {
      const int per_node = below(3) == 0 ? 0 : below(4) + 1;
      const int gpus = per_node > 0 ? per_node * (below(4) + 1) : below(16) + 1;
      const TypeMask types = static_cast<TypeMask>(below(3) + 1);
      const bool ok = pool.place(gpus, types, per_node).ok();
      EXPECT_EQ(pool.fits(pool.free_per_node(), gpus, types, per_node), ok)
          << "trial " << trial << ": " << gpus << " GPUs, per node " << per_node;
      (ok ? placed : refused) += 1;
    }
  }
  EXPECT_GT(placed, 100);
  EXPECT_GT(refused, 100);
}

TEST(ClusterPlacement, FlexibleJobsTakeTheFastestTypeThatFits) {
  // Type 0 at reference speed, type 1 twice as fast; one node of 4 each.
  NodePool pool({{"slow", 1.0}, {"fast", 0.5}}, {{0, 1, 4}, {1, 1, 4}});
  EXPECT_EQ(pool.place(2, 0b11).type, 1);
  EXPECT_EQ(pool.place(2, 0b01).type, 0);
  pool.allocate(pool.place(4, 0b10));
  EXPECT_EQ(pool.place(2, 0b11).type, 0);  // the fast one is full
  EXPECT_FALSE(pool.place(5, 0b11).ok());  // a job never spans two types
}

TEST(ClusterScheduling, RuntimeScalesWithTheGpuType) {
  // A 10 s (reference) job on a type twice as fast takes 5 s; a pinned job waits for its type.
  ClusterParams p;
  p.types = {{"slow", 1.0}, {"fast", 0.5}};
  p.groups = {{0, 1, 1}, {1, 1, 1}};
  const RunResult r =
      run(p, {job(0, 1, 10, 0, 0b10), job(0, 1, 10, 0, 0b10), job(0, 1, 10, 0, 0b11)});
  EXPECT_EQ(r.of(0).type, 1);
  EXPECT_DOUBLE_EQ(r.of(0).end.seconds(), 5);
  // J1 (fast only) blocks J2 in FCFS until 5; J1 then runs 5-10 and J2 takes the slow GPU at 5.
  EXPECT_DOUBLE_EQ(start_s(r, 1), 5);
  EXPECT_EQ(r.of(2).type, 0);
  EXPECT_DOUBLE_EQ(start_s(r, 2), 5);
  EXPECT_DOUBLE_EQ(r.of(2).end.seconds(), 15);
}

TEST(ClusterScheduling, StartupCostDelaysTheEndAndPreInitialisationShortensIt) {
  ClusterParams p = one_type(1, 1, Policy::kFcfs);
  p.startup_cold = Time::s(30);
  p.startup_warm = Time::s(2);
  RunResult r = run(p, {job(0, 1, 10)});
  EXPECT_DOUBLE_EQ(r.of(0).end.seconds(), 40);
  EXPECT_DOUBLE_EQ(r.metrics().at("startup_gpu_hours"), 30.0 / 3600);
  p.preinitialised = true;
  r = run(p, {job(0, 1, 10)});
  EXPECT_DOUBLE_EQ(r.of(0).end.seconds(), 12);
}

TEST(ClusterFailures, JobsOnAFailedNodeRestartAndTheirGpuHoursAreLost) {
  // Two nodes of 2 GPUs. J0 (2 GPUs, 100 s) on node 0, J1 (2 GPUs, 100 s) on node 1. Node 0
  // fails at 40 for 30 s: J0 loses 2 x 40 GPU-s, is requeued, restarts at 70 on node 0 (repaired;
  // node 1 is busy) and ends at 170.
  ClusterParams p = one_type(2, 2, Policy::kEasyBackfill);
  PlatformEvents failure;
  fail_node(failure, 0, Time::s(40), Time::s(30));
  const RunResult r = run(p, {job(0, 2, 100), job(0, 2, 100)}, 1, failure);
  const JobRecord& j0 = r.of(0);
  EXPECT_TRUE(j0.finished);
  EXPECT_EQ(j0.restarts, 1);
  EXPECT_DOUBLE_EQ(j0.start.seconds(), 70);
  EXPECT_DOUBLE_EQ(j0.end.seconds(), 170);
  EXPECT_DOUBLE_EQ(r.metrics().at("lost_gpu_hours"), 80.0 / 3600);
  EXPECT_EQ(r.metrics().at("node_failures"), 1);
  p.requeue_on_failure = false;
  const RunResult dropped = run(p, {job(0, 2, 100), job(0, 2, 100)}, 1, failure);
  EXPECT_FALSE(dropped.of(0).finished);
  EXPECT_EQ(dropped.metrics().at("jobs_dropped"), 1);
  EXPECT_EQ(dropped.metrics().at("jobs_finished"), 1);
}

TEST(ClusterScheduling, TooLargeJobsAreDroppedAndReported) {
  const RunResult r = run(one_type(2, 4, Policy::kFcfs), {job(0, 9, 10), job(0, 8, 10)});
  EXPECT_FALSE(r.of(0).finished);
  EXPECT_FALSE(r.of(0).drop_reason.empty());
  EXPECT_TRUE(r.of(1).finished);  // spans both nodes
  EXPECT_EQ(r.of(1).slices.size(), 2u);
  EXPECT_EQ(r.metrics().at("jobs_dropped"), 1);
}

TEST(ClusterSeries, IntervalAveragesAreExact) {
  IntervalSeries s("x", {"v"}, Time::s(10));
  s.set(Time::s(5), 0, 2);   // 0 for 0-5, 2 from 5
  s.set(Time::s(15), 0, 4);  // 2 for 5-15, 4 from 15
  const TimeSeries t = s.finish(Time::s(25));
  ASSERT_EQ(t.rows.size(), 3u);
  EXPECT_DOUBLE_EQ(t.rows[0].second[0], 1);  // (0*5 + 2*5) / 10
  EXPECT_DOUBLE_EQ(t.rows[1].second[0], 3);  // (2*5 + 4*5) / 10
  EXPECT_DOUBLE_EQ(t.rows[2].second[0], 4);  // 20-25 only
}

TEST(ClusterQueue, FairShareOrderMergesUsersByUsageThenSubmitOrder) {
  JobQueue q;
  // ids 0-5; users: 0 0 1 2 1 2
  const int users[] = {0, 0, 1, 2, 1, 2};
  for (std::uint64_t id = 0; id < 6; ++id) q.push({JobSpec{id, {}, 1, {}, users[id], 0, 0}, 0, {}});
  FairShare fs(Time::zero());
  fs.add_rate(0, 2);  // user 0 has used 20 GPU-s by t=10, users 1 and 2 nothing (a tie)
  fs.advance(Time::s(10));
  std::vector<std::uint64_t> seen;
  q.visit_fair_share(fs, [&](QueuedJob& j) {
    seen.push_back(j.spec.id);
    return true;
  });
  // Users 1 and 2 tie at 0: their jobs interleave by id (2, 3, 4, 5); user 0's come last.
  EXPECT_EQ(seen, (std::vector<std::uint64_t>{2, 3, 4, 5, 0, 1}));
  seen.clear();
  q.erase(3);
  q.push({JobSpec{3, {}, 1, {}, 2, 0, 0}, 1, {}});  // requeued: back in its place
  q.visit_submit_order([&](QueuedJob& j) {
    seen.push_back(j.spec.id);
    return j.spec.id < 3;  // stops after 3
  });
  EXPECT_EQ(seen, (std::vector<std::uint64_t>{0, 1, 2, 3}));
}
