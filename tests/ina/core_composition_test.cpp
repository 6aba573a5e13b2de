// INA as a strategy of the training core, composed with the core's communication schedulers:
// ByteScheduler's order over ATP, computed by hand. Link model as in mechanisms_test.cpp: 100
// Gbps, an ATP packet of 308 bytes is 24.64 ns on the wire, 500 ns per hop, 400 ns switch
// pipeline, arrivals rounded up to whole nanoseconds at each hop.
#include <gtest/gtest.h>

#include <set>
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
// layer 1's. The same whether worker 0's scheduler orders the job's chunks (the default,
// training::Ordering::kJob: each layer is ready on both workers at the same instant, and each
// chunk starts on both) or every worker schedules its own (identical workers never drift
// apart, so the order is the same on both); with worker 0 alone pacing and worker 1 sending
// as produced (kRankZero), worker 1's chunks would collide in the one aggregator (the
// drifting-workers test below).
TEST(InaOnTheCore, ByteSchedulerOrdersChunksOverAtp) {
  for (const training::Ordering ordering :
       {training::Ordering::kJob, training::Ordering::kEveryWorker}) {
    SCOPED_TRACE(ordering == training::Ordering::kJob ? "one order" : "every worker");
    Engine engine;
    ClusterParams p = one_aggregator(PolicyKind::kAtp);
    p.scheduler = "bytescheduler";
    p.scheduler_config = {62, 62};
    p.ordering = ordering;
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

// A SwitchML job and an ATP job on one switch (each job its own `policy`): 2296 bytes of
// aggregator memory, system.switchml.memory 2048 of it for SwitchML's partition (one slot and
// its shadow copy, 2 x 1024 B), the remaining 248 B one ATP aggregator. Both jobs arrive at 0,
// 2 workers each, forward 1 ms, backward 1 ms; hosts 0-1 (+ PS 2) and 3-4 (+ PS 5).
//   SwitchML job, 512 values = 2 packets of 1084 B (86.72 ns): seq 0 at the switch at
//   2,000,086.72 -> 2,000,087 + 900 = 2,000,987, multicast 2,001,073.72 -> 2,001,074 + 500 =
//   2,001,574. Seq 1 may leave only then (one slot): switch 2,001,660.72 -> 2,001,661 + 900 =
//   2,002,561, workers 2,002,647.72 -> 2,002,648 + 500 = 2,003,148.
//   ATP job, 124 values = 2 packets of 308 B (24.64 ns), sent back to back: seq 0 at the switch
//   at 2,000,925 claims the one aggregator and completes it; seq 1 at 2,000,049.28 -> 2,000,050
//   + 900 = 2,000,950 finds it held and both workers' packets fall back to the PS. The PS link
//   carries the partial (2,000,925 -> 2,000,949.64 -> 2,000,950 + 500 = 2,001,450) and then the
//   two fallbacks (-> 2,000,974.64 -> 2,001,475; -> 2,000,999.28 -> 2,001,500). The PS's
//   results: seq 0 2,001,474.64 -> 2,001,475 + 900 = 2,002,375 at the switch (aggregator
//   released), seq 1 2,001,524.64 -> 2,001,525 + 900 = 2,002,425; multicast to each worker:
//   2,002,399.64 -> 2,002,400 + 500 = 2,002,900, then 2,002,449.64 -> 2,002,450 + 500 =
//   2,002,950, the ATP job's end.
// Neither job touches the other's aggregators: SwitchML's partition is not in ATP's pool.
TEST(InaOnTheCore, SwitchMlAndAtpJobsShareOneSwitch) {
  Engine engine;
  ClusterParams p;
  p.policy = PolicyKind::kAtp;
  p.atp_timeout = Time::ms(10);
  p.aggregator_memory = Bytes{2048 + 248};
  p.switchml_memory = Bytes{2048};
  JobSpec sml = job(one_layer(1.0, 1.0, 512), 2, 1);
  sml.policy = PolicyKind::kSwitchMl;
  p.jobs.push_back(sml);
  p.jobs.push_back(job(one_layer(1.0, 1.0, 124), 2, 1));
  InaCluster cluster(engine, p);
  ASSERT_EQ(cluster.programs(), 2u);
  ASSERT_EQ(cluster.program(0).pool().size(), 2u);  // SwitchML: 1 slot x 2 copies
  ASSERT_EQ(cluster.program(1).pool().size(), 1u);  // ATP: 1 aggregator
  EXPECT_EQ(cluster.policy_of(0).name(), "switchml");
  EXPECT_EQ(cluster.policy_of(1).name(), "atp");
  OwnershipTracker switchml_pool, atp_pool;
  std::set<std::uint16_t> switchml_jobs, atp_jobs;
  cluster.program(0).pool().set_observer([&](const PoolEvent& e) {
    switchml_pool(e);
    switchml_jobs.insert(e.job);
  });
  cluster.program(1).pool().set_observer([&](const PoolEvent& e) {
    atp_pool(e);
    atp_jobs.insert(e.job);
  });
  cluster.start();
  engine.run();
  ASSERT_TRUE(cluster.all_finished());
  EXPECT_EQ(cluster.job(0).finished_at(), Time::ns(2'003'148));
  EXPECT_EQ(cluster.job(1).finished_at(), Time::ns(2'002'950));
  EXPECT_EQ(switchml_jobs, (std::set<std::uint16_t>{0}));
  EXPECT_EQ(atp_jobs, (std::set<std::uint16_t>{1}));
  EXPECT_EQ(switchml_pool.violations + atp_pool.violations, 0);
  EXPECT_TRUE(switchml_pool.held.empty());
  EXPECT_TRUE(atp_pool.held.empty());
  const InaCounters& c = cluster.stats();
  EXPECT_EQ(c.aggregated_packets, 4u + 2u);  // SwitchML's 2 x 2, ATP's seq 0 x 2
  EXPECT_EQ(c.collision_packets, 2u);
  EXPECT_EQ(c.fallback_packets, 2u);
  EXPECT_EQ(c.ps_fallback_bytes, 2u * 308);
  EXPECT_EQ(c.elements_delivered, 2 * 512 + 2 * 124);
  EXPECT_EQ(c.wrong_sums, 0u);
  Results r;
  cluster.report(r);
  EXPECT_EQ(r.details()["policy"], "switchml+atp");
}

// What one switch cannot run, refused when the cluster is built, naming the key: ATP beside DSA
// (one shared-pool program), and a SwitchML share that leaves the shared pool nothing.
TEST(InaOnTheCore, MixedPoliciesThatCannotShareAreRefused) {
  auto refused = [](ClusterParams p, const std::string& key) {
    Engine engine;
    try {
      InaCluster cluster(engine, p);
      ADD_FAILURE() << "accepted, expected an error at " << key;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  ClusterParams p;
  p.policy = PolicyKind::kAtp;
  p.jobs.push_back(job(one_layer(1.0, 1.0, 62), 2, 1));
  JobSpec dsa = job(one_layer(1.0, 1.0, 62), 2, 1);
  dsa.policy = PolicyKind::kDsa;
  p.jobs.push_back(dsa);
  refused(p, "workload.jobs");
  p.jobs[1].policy = PolicyKind::kSwitchMl;
  p.switchml_memory = p.aggregator_memory;
  refused(p, "system.switchml.memory");
  p.jobs.pop_back();
  p.switchml_memory = Bytes{2048};
  refused(p, "system.switchml.memory");  // one policy only: the key has no meaning
}

namespace {
// Three layers of 62 values (one ATP packet, one chunk each at partition 62); forward 100 us
// each on both workers; backward 1 us a layer on worker 0, 100 us a layer on worker 1 (a
// straggler, or a worker whose last result arrived later).
JobSpec drifting_three_layers() {
  std::istringstream in(
      "node1 -- A -- forward_compute_time=0.1, backward_compute_time=0.001, "
      "activation_size=4.0, parameter_size=248.0\n"
      "node2 -- B -- forward_compute_time=0.1, backward_compute_time=0.001, "
      "activation_size=4.0, parameter_size=248.0\n"
      "node3 -- C -- forward_compute_time=0.1, backward_compute_time=0.001, "
      "activation_size=4.0, parameter_size=248.0\n"
      "\tnode1 -- node2\n\tnode2 -- node3\n");
  JobSpec j = job(std::make_shared<const DnnProfile>(parse_pipedream_graph(in, "three")), 2, 1);
  const Time f = Time::us(100);
  j.worker_times = {std::make_shared<const LayerTimes>(LayerTimes(3, OpTimes{f, Time::us(1)})),
                    std::make_shared<const LayerTimes>(LayerTimes(3, OpTimes{f, Time::us(100)}))};
  return j;
}
}  // namespace

// ByteScheduler over ATP with two workers that drift apart: credit 62 (one chunk in flight),
// partition 62, plenty of aggregators (no collision), ATP timeout 10 ms. Backward ends layer 2,
// 1, 0 on worker 0 at 301, 302, 303 us and on worker 1 at 400, 500, 600 us. A chunk's result
// reaches both workers 2,900 ns after the later of its two packets leaves (the round trip of the
// test above).
//   One order for the job (the default, training::Ordering::kJob, as ByteScheduler orders a
//   collective [code: bytescheduler/mxnet/horovod.py ScheduledOptimizer.__init__]): a layer is
//   ready once both workers produced it, and a released chunk starts on both at once. Layer 2 at
//   400 us, back at 402,900 (worker 0's credit returns); layer 1 at 500 us, back 502,900; layer
//   0 at 600 us, back at 602,900, the job's end. No timeout, nothing waits in an aggregator.
//   Every worker scheduling its own credit: worker 0 sends layer 2 at 301 us; its layers 1 and
//   0 queue behind the credit. Worker 1 sends layer 2 at 400 us; the result is back at 402,900
//   and worker 0's credit goes to its highest priority queued chunk, layer 0; worker 1's goes to
//   layer 1 at 500 us (its layer 0 is not produced yet). Worker 0 then waits for worker 1's
//   layer 0, queued on worker 1 behind layer 1, which waits for worker 0's layer 1, queued on
//   worker 0 behind layer 0: neither ever completes, and ATP's timeouts resend only what is
//   already in flight (worker 0's layer 0 to the PS every 10 ms, worker 1's layer 1 likewise)
//   until the job's stall watchdog (1 s here) aborts it: its last progress is worker 1's
//   backward end at 600 us, so it fails at 1,000,600 us, after 100 timeouts of each.
//   Rank 0 pacing, the others sending as produced (ByteScheduler's PS plugin, [code:
//   bytescheduler/mxnet/kvstore.py ScheduledKVStore.__init__]): worker 1 sends layer 1 at 500 us
//   and layer 0 at 600 us; layer 0 completes at 602,900, worker 0's credit goes to layer 1, which
//   completes at 602,900 + 2,900 = 605,800, the job's end.
TEST(InaOnTheCore, ByteSchedulerOverAtpWithDriftingWorkersFinishes) {
  for (const training::Ordering ordering : {training::Ordering::kJob, training::Ordering::kRankZero,
                                            training::Ordering::kEveryWorker}) {
    SCOPED_TRACE(static_cast<int>(ordering));
    Engine engine;
    ClusterParams p = one_aggregator(PolicyKind::kAtp);
    p.aggregator_memory = Bytes{1000 * 248};
    p.scheduler = "bytescheduler";
    p.scheduler_config = {62, 62};
    p.ordering = ordering;
    p.stall_timeout = Time::s(1);
    p.jobs.push_back(drifting_three_layers());
    InaCluster cluster(engine, p);
    cluster.start();
    engine.run_until(Time::s(10));
    const InaCounters& c = cluster.stats();
    EXPECT_EQ(c.collision_packets, 0u);
    if (ordering != training::Ordering::kEveryWorker) {
      ASSERT_TRUE(cluster.all_finished());
      EXPECT_FALSE(cluster.job(0).failed());
      EXPECT_EQ(cluster.job(0).finished_at(),
                Time::ns(ordering == training::Ordering::kJob ? 602'900 : 605'800));
      EXPECT_EQ(c.timeouts, 0u);
      EXPECT_EQ(c.elements_delivered, 3 * 62 * 2);
      EXPECT_EQ(c.wrong_sums, 0u);
    } else {
      // The livelock: nothing after 402,900 completes; each stuck chunk times out every 10 ms.
      EXPECT_FALSE(cluster.all_finished());
      EXPECT_EQ(c.elements_delivered, 62 * 2);
      ASSERT_TRUE(cluster.all_ended());  // reported: the watchdog ended it
      EXPECT_EQ(cluster.failed_jobs(), 1u);
      EXPECT_TRUE(cluster.job(0).failed());
      EXPECT_EQ(cluster.job(0).finished_at(), Time::us(1'000'600));
      // Worker 0's layer 0 (sent at 0.4029 ms) times out at 10.4029, ..., 1,000.4029 ms: 100;
      // worker 1's layer 1 (sent at 0.5 ms) at 10.5, ..., 1,000.5 ms: 100.
      EXPECT_EQ(c.timeouts, 100u + 100u);
    }
  }
}
