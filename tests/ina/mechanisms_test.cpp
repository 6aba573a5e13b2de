// Hand-computed single-chunk cases. Every expected time below is derived in the comments from
// the link model: 100 Gbps = 12.5 bytes/ns, an ATP packet is 60 + 62*4 = 308 bytes, i.e.
// 24.64 ns on the wire; one-way link latency 500 ns; switch pipeline 400 ns. Arrival times are
// rounded up to whole nanoseconds at each hop.
#include <gtest/gtest.h>

#include "models/ina/ina_cluster.hpp"
#include "test_support.hpp"

using namespace mlsim;
using namespace mlsim::ina;
using namespace mlsim::ina::testing;

namespace {
ClusterParams base(PolicyKind policy) {
  ClusterParams p;
  p.policy = policy;
  p.link_latency = Time::ns(500);
  p.switch_latency = Time::ns(400);
  // Longer than any wait below, so no timeout muddles the hand-computed cases.
  p.atp_timeout = Time::ms(10);
  return p;
}

// A less communication-intensive job L (3 workers, compute 1+1 ms, worker 2 on host 2 at half
// speed, as {"host": 2, "speed": 0.5} in the events section sets it) and a more intensive job H
// (2 workers, compute 0.1+0.1 ms, the same 62-value gradient) arriving at `high_arrival`, on
// one aggregator's worth of switch memory.
struct LowAndHigh {
  LowAndHigh(PolicyKind policy, Time high_arrival)
      : params(jobs(policy, high_arrival)),
        speeds(slow_worker_two()),
        platform(engine, speeds),
        cluster(engine, params, nullptr, nullptr, &platform.compute) {}

  static ClusterParams jobs(PolicyKind policy, Time high_arrival) {
    ClusterParams p = one_aggregator(policy);
    p.jobs.push_back(job(one_layer(1.0, 1.0, 62), 3, 1));
    p.jobs.push_back(job(one_layer(0.1, 0.1, 62), 2, 1, high_arrival));
    return p;
  }
  static HostSpeeds slow_worker_two() {
    HostSpeeds s(8);
    s.set_speed(2, 0.5);
    return s;
  }

  Engine engine;
  ClusterParams params;
  HostSpeeds speeds;
  ComputeOn platform;
  InaCluster cluster;
};
}  // namespace

// Two workers, one 62-value chunk, one aggregator's worth of memory.
// Backward ends at 2 ms on both workers. Each packet: 2,000,024.64 -> 2,000,025 at the far end of
// the wire, +500 latency, +400 pipeline = 2,000,925 at the switch, where the first claims the
// aggregator and the second completes it. The aggregate goes to the PS: 2,000,949.64 -> 2,000,950
// + 500 = 2,001,450. The PS's result: 2,001,474.64 -> 2,001,475 + 500 + 400 = 2,002,375 at the
// switch (aggregator released), multicast: 2,002,399.64 -> 2,002,400 + 500 = 2,002,900.
TEST(InaMechanisms, TwoWorkersAggregateThroughOneAggregator) {
  Engine engine;
  ClusterParams p = one_aggregator(PolicyKind::kAtp);
  p.jobs.push_back(job(one_layer(1.0, 1.0, 62), 2, 1));
  InaCluster cluster(engine, p);
  std::vector<PoolEvent> events;
  cluster.policy().pool().set_observer([&](const PoolEvent& e) { events.push_back(e); });
  cluster.start();
  engine.run();
  ASSERT_TRUE(cluster.all_finished());
  ASSERT_EQ(cluster.pool_units(), 1u);
  EXPECT_EQ(cluster.outcomes()[0].finish, Time::ns(2'002'900));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, PoolEvent::kClaim);
  EXPECT_EQ(events[1].kind, PoolEvent::kRelease);
  const InaCounters& c = cluster.stats();
  EXPECT_EQ(c.aggregated_packets, 2u);
  EXPECT_EQ(c.fallback_packets, 0u);
  EXPECT_EQ(c.ps_fallback_bytes, 0u);
  EXPECT_EQ(c.results_received, 2u);
  EXPECT_EQ(c.wrong_sums, 0u);
  EXPECT_EQ(c.elements_delivered, 2 * 62);
  // Held from 2,000,925 to 2,002,375 (1,450 ns) of 2,002,900 ns; complete all that time.
  EXPECT_NEAR(cluster.policy().pool().mean_occupancy(engine.now()), 1450.0 / 2'002'900, 1e-9);
  EXPECT_NEAR(cluster.policy().pool().mean_idle_reserved(engine.now()), 1450.0 / 2'002'900, 1e-9);
}

// The same job with both workers' hosts halved 0.5 ms into the forward (host speed, as the events
// section sets it): the op in progress runs on the platform's Compute, so only what remains of it
// slows. Forward: 0.5 ms done, 0.5 ms left at half speed = 1 ms, ends at 1.5 ms; backward 1 ms
// at half speed ends at 3.5 ms, 1.5 ms later than above, and so does everything after it:
// 2,002,900 + 1,500,000 = 3,502,900. (Had the forward kept the speed it started with: 3,002,900.)
TEST(InaMechanisms, ASpeedChangeMidOpSlowsOnlyWhatRemains) {
  Engine engine;
  ClusterParams p = one_aggregator(PolicyKind::kAtp);
  p.jobs.push_back(job(one_layer(1.0, 1.0, 62), 2, 1));
  HostSpeeds speeds(8);
  ComputeOn platform(engine, speeds);
  InaCluster cluster(engine, p, nullptr, nullptr, &platform.compute);
  engine.schedule_at(Time::us(500), [&] {
    speeds.set_speed(0, 0.5);
    speeds.set_speed(1, 0.5);
  });
  cluster.start();
  engine.run();
  ASSERT_TRUE(cluster.all_finished());
  EXPECT_EQ(cluster.job(0).finished_at(), Time::ns(3'502'900));
}

// SwitchML: no PS; a 1084-byte packet takes 86.72 ns. Switch at 2,000,086.72 -> 2,000,087 + 900
// = 2,000,987; multicast 2,001,073.72 -> 2,001,074 + 500 = 2,001,574.
TEST(InaMechanisms, SwitchMlMulticastsFromTheSwitch) {
  Engine engine;
  ClusterParams p = base(PolicyKind::kSwitchMl);
  p.aggregator_memory = Bytes{2 * 1024};  // one slot and its shadow copy
  p.jobs.push_back(job(one_layer(1.0, 1.0, 62), 2, 1));
  InaCluster cluster(engine, p);
  cluster.start();
  engine.run();
  ASSERT_TRUE(cluster.all_finished());
  EXPECT_EQ(cluster.outcomes()[0].finish, Time::ns(2'001'574));
  EXPECT_EQ(cluster.stats().aggregated_packets, 2u);
  EXPECT_EQ(cluster.stats().ps_packets_in, 0u);
}

// ATP collision: job A (arrives at 0) holds the only aggregator from 2,000,925 to 2,002,375.
// Job B arrives 1 us later; its packets reach the switch at 2,001,925, find the aggregator taken
// and fall back to B's PS: 2,001,949.64 -> 2,001,950 + 500 = 2,002,450 and, queued behind it,
// 2,001,974.28 -> 2,001,975 + 500 = 2,002,475, when the PS completes the chunk. Result:
// 2,002,499.64 -> 2,002,500 + 900 = 2,003,400 at the switch (nothing to release: A released its
// aggregator at 2,002,375), multicast 2,003,424.64 -> 2,003,425 + 500 = 2,003,925.
TEST(InaMechanisms, AtpCollisionFallsBackToTheParameterServer) {
  Engine engine;
  ClusterParams p = one_aggregator(PolicyKind::kAtp);
  p.jobs.push_back(job(one_layer(1.0, 1.0, 62), 2, 1));
  p.jobs.push_back(job(one_layer(1.0, 1.0, 62), 2, 1, Time::us(1)));
  InaCluster cluster(engine, p);
  cluster.start();
  engine.run();
  ASSERT_TRUE(cluster.all_finished());
  EXPECT_EQ(cluster.job(0).finished_at(), Time::ns(2'002'900));
  EXPECT_EQ(cluster.job(1).finished_at(), Time::ns(2'003'925));
  const InaCounters& c = cluster.stats();
  EXPECT_EQ(c.collision_packets, 2u);
  EXPECT_EQ(c.fallback_packets, 2u);
  EXPECT_EQ(c.ps_fallback_bytes, 2u * 308);
  EXPECT_EQ(c.aggregated_packets, 2u);  // only A's
  EXPECT_EQ(c.wrong_sums, 0u);
  EXPECT_EQ(c.retransmitted_packets, 0u);
}

// DSA preemption. Job L (3 workers, compute 1+1 ms; worker 2 twice as slow) is the less
// communication-intensive job; job H (2 workers, compute 0.1+0.1 ms, same gradient) the more.
// L's workers 0 and 1 claim the only aggregator at 2,000,925 (bitmap 0b011, sum 3). H arrives at
// 2.5 ms; its packets reach the switch at 2,700,925 and evict L's partial to L's PS, which asks
// exactly worker 2 to resend. Worker 2 has not produced the chunk yet, so at 4 ms it sends it
// straight to the PS: 4,000,025 + 900 = 4,000,925 at the switch (no aggregator holds L's chunk),
// 4,000,950 + 500 = 4,001,450 at the PS, which completes 3 + 4 = 7; result at the switch
// 4,001,475 + 900 = 4,002,375; at the workers 4,002,400 + 500 = 4,002,900.
TEST(InaMechanisms, DsaPreemptionCompletesAtThePsWithSelectiveRetransmission) {
  LowAndHigh run(PolicyKind::kDsa, Time::us(2500));
  Engine& engine = run.engine;
  InaCluster& cluster = run.cluster;
  std::vector<PoolEvent> events;
  cluster.policy().pool().set_observer([&](const PoolEvent& e) { events.push_back(e); });
  cluster.start();
  engine.run();
  ASSERT_TRUE(cluster.all_finished());
  EXPECT_GT(cluster.job(1).priority(), cluster.job(0).priority());
  const InaCounters& c = cluster.stats();
  EXPECT_EQ(c.preemptions, 1u);
  EXPECT_EQ(c.evicted_partial_packets, 1u);
  EXPECT_EQ(c.resend_requests, 1u);
  EXPECT_EQ(cluster.job(0).worker(0).resend_requests_received(), 0);
  EXPECT_EQ(cluster.job(0).worker(1).resend_requests_received(), 0);
  EXPECT_EQ(cluster.job(0).worker(2).resend_requests_received(), 1);
  EXPECT_EQ(c.retransmitted_packets, 0u);  // worker 2's first copy went straight to the PS
  EXPECT_EQ(c.wrong_sums, 0u);             // 3 (evicted partial) + 4 (worker 2) = 7
  EXPECT_EQ(c.results_received, 5u);
  EXPECT_EQ(cluster.job(0).finished_at(), Time::ns(4'002'900));
  // H was aggregated in the switch: 2,700,925 + 525 (to PS) + 925 (back) + 525 = 2,702,900.
  EXPECT_EQ(cluster.job(1).finished_at(), Time::ns(2'702'900));
  // Ownership history: L claims, L evicted (released), H claims, H released.
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].job, 0);
  EXPECT_EQ(events[1].kind, PoolEvent::kRelease);
  EXPECT_EQ(events[2].job, 1);
  EXPECT_EQ(events[3].kind, PoolEvent::kRelease);
}

// DSA preemption of an in-progress aggregator whose missing worker has already sent its packet
// when the PS's resend request reaches it. Hosts: L's workers 0-2 and PS 3, H's workers 4-5 and
// PS 6. L's workers 0 and 1 claim the only aggregator at 2,000,925 (bitmap 0b011, sum 3); L's
// worker 2 runs at half speed and sends at 4,000,000. H arrives at 3,799,500 and sends at
// 3,999,500: 3,999,524.64 -> 3,999,525 + 900 = 4,000,425 at the switch, where H's first packet
// evicts L's partial (to L's PS: 4,000,449.64 -> 4,000,450 + 500 = 4,000,950) and H's second
// completes H's aggregate (at H's PS 4,000,950; result at the switch 4,000,974.64 -> 4,000,975 +
// 900 = 4,001,875, released; at H's workers 4,001,899.64 -> 4,001,900 + 500 = 4,002,400).
// - L's PS at 4,000,950: 0b011 of 0b111, evicted: asks worker 2 alone; the request reaches the
//   switch at 4,000,975 + 900 = 4,001,875 and worker 2 at 4,001,900 + 500 = 4,002,400.
// - Worker 2's packet (sent at 4,000,000): 4,000,025 + 900 = 4,000,925 at the switch, where H's
//   aggregate still holds the aggregator (until 4,001,875): a collision of lower priority, so it
//   falls back to L's PS: 4,000,949.64 -> 4,000,950 + 500 = 4,001,450, completing 3 + 4 = 7.
//   Result: 4,001,474.64 -> 4,001,475 + 900 = 4,002,375 at the switch, 4,002,400 + 500 =
//   4,002,900 at L's workers.
// - Worker 2 gets the request at 4,002,400 with its packet still unanswered: it retransmits
//   (4,002,425 + 900 = 4,003,325 at the switch, no aggregator holds L's chunk, to the PS at
//   4,003,350 + 500 = 4,003,850), where the chunk is finished: a late duplicate, dropped. Only the
//   missing worker resent; its contribution is counted once.
TEST(InaMechanisms, DsaPreemptsAnInProgressAggregatorAndOnlyTheMissingWorkerResends) {
  LowAndHigh run(PolicyKind::kDsa, Time::ns(3'799'500));
  Engine& engine = run.engine;
  InaCluster& cluster = run.cluster;
  OwnershipTracker ownership;
  std::vector<PoolEvent> events;
  cluster.policy().pool().set_observer([&](const PoolEvent& e) {
    ownership(e);
    events.push_back(e);
  });
  cluster.start();
  engine.run();
  ASSERT_TRUE(cluster.all_finished());
  const InaCounters& c = cluster.stats();
  EXPECT_EQ(c.preemptions, 1u);
  EXPECT_EQ(c.evicted_partial_packets, 1u);
  EXPECT_EQ(c.resend_requests, 1u);
  EXPECT_EQ(cluster.job(0).worker(0).resend_requests_received(), 0);
  EXPECT_EQ(cluster.job(0).worker(1).resend_requests_received(), 0);
  EXPECT_EQ(cluster.job(0).worker(2).resend_requests_received(), 1);
  EXPECT_EQ(c.retransmitted_packets, 1u);  // worker 2's, on request
  EXPECT_EQ(c.collision_packets, 2u);      // H's first packet, worker 2's packet
  EXPECT_EQ(c.fallback_packets, 2u);       // worker 2's packet and its retransmission
  EXPECT_EQ(c.ps_late_duplicates, 1u);     // the retransmission, after the chunk finished
  EXPECT_EQ(c.wrong_sums, 0u);
  EXPECT_EQ(c.duplicate_results, 0u);
  EXPECT_EQ(c.results_received, 5u);
  EXPECT_EQ(c.elements_delivered, cluster.expected_elements());
  EXPECT_EQ(ownership.violations, 0);
  EXPECT_TRUE(ownership.held.empty());
  EXPECT_EQ(cluster.job(0).finished_at(), Time::ns(4'002'900));
  EXPECT_EQ(cluster.job(1).finished_at(), Time::ns(4'002'400));
  // L claims, L evicted, H claims, H released by its result.
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].job, 0);
  EXPECT_EQ(events[1].kind, PoolEvent::kRelease);
  EXPECT_EQ(events[1].job, 0);
  EXPECT_EQ(events[2].job, 1);
  EXPECT_EQ(events[3].job, 1);
}

// The same arrival under ATP: no preemption, H falls back to its PS, L waits for worker 2.
TEST(InaMechanisms, AtpKeepsTheLowPriorityPartial) {
  LowAndHigh run(PolicyKind::kAtp, Time::us(2500));
  Engine& engine = run.engine;
  InaCluster& cluster = run.cluster;
  cluster.start();
  engine.run();
  ASSERT_TRUE(cluster.all_finished());
  EXPECT_EQ(cluster.stats().preemptions, 0u);
  EXPECT_EQ(cluster.stats().fallback_packets, 2u);
  EXPECT_EQ(cluster.stats().wrong_sums, 0u);
  // L completes in the switch when worker 2 arrives: 4,000,925 -> PS 4,001,450 -> ... 4,002,900.
  EXPECT_EQ(cluster.job(0).finished_at(), Time::ns(4'002'900));
  // H through its PS: 2,700,925 -> 2,701,450 and 2,701,475 (queued) -> result 2,702,400 at the
  // switch -> 2,702,925 at the workers.
  EXPECT_EQ(cluster.job(1).finished_at(), Time::ns(2'702'925));
}

// PS summing cost (the collective layer's host.ps_aggregation): at 248 MB/s a PS sums one ATP
// packet's 248-byte payload in 1 us, one packet after another. Two workers, one aggregator: the
// complete aggregate reaches the PS at 2,001,450 (first case above) and counts at 2,002,450; the
// result then takes the same 1,450 ns back: the job ends at 2,003,900 instead of 2,002,900.
// The collision case: job B's two fallbacks reach B's PS at 2,002,450 and 2,002,475; the first
// is summed by 2,003,450, the second waits for it and is summed by 2,004,450, completing the
// chunk; its result reaches the workers 1,450 ns later, at 2,005,900 (free PS: 2,003,925).
TEST(InaMechanisms, ParameterServerSumsAtItsRate) {
  {
    Engine engine;
    ClusterParams p = one_aggregator(PolicyKind::kAtp);
    p.ps_aggregation = Bandwidth{248e6};
    p.jobs.push_back(job(one_layer(1.0, 1.0, 62), 2, 1));
    InaCluster cluster(engine, p);
    cluster.start();
    engine.run();
    ASSERT_TRUE(cluster.all_finished());
    EXPECT_EQ(cluster.outcomes()[0].finish, Time::ns(2'003'900));
  }
  {
    Engine engine;
    ClusterParams p = one_aggregator(PolicyKind::kAtp);
    p.ps_aggregation = Bandwidth{248e6};
    p.jobs.push_back(job(one_layer(1.0, 1.0, 62), 2, 1));
    p.jobs.push_back(job(one_layer(1.0, 1.0, 62), 2, 1, Time::us(1)));
    InaCluster cluster(engine, p);
    cluster.start();
    engine.run();
    ASSERT_TRUE(cluster.all_finished());
    EXPECT_EQ(cluster.job(0).finished_at(), Time::ns(2'003'900));
    EXPECT_EQ(cluster.job(1).finished_at(), Time::ns(2'005'900));
  }
}
