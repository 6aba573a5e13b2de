// Packet loss, hand-computed: which packet is lost is chosen by a rule, every time is derived in
// the comments. Link model as in mechanisms_test.cpp: 100 Gbps = 12.5 bytes/ns, one-way latency
// 500 ns, switch pipeline 400 ns, arrivals rounded up to whole nanoseconds at each hop. A SwitchML
// packet is 60 + 1024 = 1084 bytes (86.72 ns on the wire), an ATP packet 308 bytes (24.64 ns).
// Both workers of a job end backward at 2 ms (1 ms forward + 1 ms backward) and send then; worker
// 0's events are scheduled first, and the engine runs equal-time events in scheduling order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "models/ina/ina_cluster.hpp"
#include "test_support.hpp"

using namespace mlsim;
using namespace mlsim::ina;
using namespace mlsim::ina::testing;

namespace {

ClusterParams switchml_one_slot() {
  ClusterParams p;
  p.policy = PolicyKind::kSwitchMl;
  p.aggregator_memory = Bytes{2 * 1024};  // one slot and its shadow copy
  p.switchml_timeout = Time::ms(10);
  return p;
}

void expect_exactly_once(const InaCluster& cluster) {
  const InaCounters& c = cluster.stats();
  EXPECT_EQ(c.wrong_sums, 0u);
  EXPECT_EQ(c.duplicate_results, 0u);
  EXPECT_EQ(c.elements_delivered, cluster.expected_elements());
}

}  // namespace

// SwitchML, worker 1's first packet lost on its way to the switch (one 62-value chunk).
// Worker 0's packet reaches the switch at 2,000,000 + 86.72 -> 2,000,087 + 500 + 400 =
// 2,000,987 and waits in the slot. Both workers' timers fire at 2,000,000 + 10 ms = 12,000,000
// (worker 0's is spurious: its packet is in, only the result is missing). Both resend, reaching
// the switch at 12,000,987: worker 0's is already counted (nothing to answer yet), worker 1's
// completes the slot. Multicast: 12,000,987 + 86.72 -> 12,001,074 + 500 = 12,001,574.
// With every first packet lost, worker 0's resend finds the copy empty and claims it instead:
// same times.
TEST(InaLoss, SwitchMlLostGradientIsResentAfterTheTimeout) {
  for (const bool lose_both : {false, true}) {
    SCOPED_TRACE(lose_both ? "both first packets lost" : "worker 1's first packet lost");
    Engine engine;
    ClusterParams p = switchml_one_slot();
    p.jobs.push_back(job(one_layer(1.0, 1.0, 62), 2, 1));
    p.loss_rule = [lose_both](Hop hop, const Packet& q, std::uint16_t) {
      return hop == Hop::kWorkerToSwitch && !q.resend && (lose_both || q.worker == 1);
    };
    InaCluster cluster(engine, p);
    cluster.start();
    engine.run();
    ASSERT_TRUE(cluster.all_finished());
    EXPECT_EQ(cluster.outcomes()[0].finish, Time::ns(12'001'574));
    const InaCounters& c = cluster.stats();
    EXPECT_EQ(c.lost_packets, lose_both ? 2u : 1u);
    EXPECT_EQ(c.timeouts, 2u);
    EXPECT_EQ(c.retransmitted_packets, 2u);
    EXPECT_EQ(c.aggregated_packets, 2u);  // each worker once
    EXPECT_EQ(c.results_received, 2u);
    EXPECT_EQ(c.late_results, 0u);
    expect_exactly_once(cluster);
  }
}

// SwitchML, the result of chunk 0 lost on its way to worker 1; two chunks (512 values), one slot,
// so chunk 0 uses copy 0 and chunk 1 the shadow copy 1.
// - Both chunk-0 packets reach the switch at 2,000,987 (as above) and complete copy 0; the
//   multicast reaches worker 0 at 2,001,574 and is lost to worker 1.
// - Worker 0 sends chunk 1 at once: 2,001,574 + 86.72 -> 2,001,661 + 900 = 2,002,561; it claims
//   copy 1 and waits there for worker 1.
// - Worker 1 times out at 12,000,000 and resends chunk 0: switch at 12,000,987, where copy 0
//   still holds chunk 0's result (copy 1 is busy with chunk 1): it is unicast back, reaching
//   worker 1 at 12,001,574, without adding worker 1 again.
// - At 12,001,574 worker 0's timer for chunk 1 (sent at 2,001,574) fires first and resends it;
//   then worker 1 takes chunk 0's result and sends chunk 1. Both reach the switch at 12,002,561:
//   worker 0's resend is already counted, worker 1's completes copy 1. Multicast:
//   12,002,561 + 86.72 -> 12,002,648 + 500 = 12,003,148.
TEST(InaLoss, SwitchMlLostResultIsAnsweredFromTheShadowCopy) {
  Engine engine;
  ClusterParams p = switchml_one_slot();
  p.jobs.push_back(job(one_layer(1.0, 1.0, 512), 2, 1));
  p.loss_rule = [](Hop hop, const Packet& q, std::uint16_t to) {
    return hop == Hop::kSwitchToWorker && to == 1 && q.seq == 0 && !q.resend;
  };
  InaCluster cluster(engine, p);
  std::vector<PoolEvent> events;
  std::vector<Time> event_times;
  cluster.policy().pool().set_observer([&](const PoolEvent& e) {
    events.push_back(e);
    event_times.push_back(engine.now());
  });
  cluster.start();
  engine.run();
  ASSERT_TRUE(cluster.all_finished());
  EXPECT_EQ(cluster.outcomes()[0].finish, Time::ns(12'003'148));
  // Copy 0 (chunk 0) and copy 1 (chunk 1) are claimed once each and kept until the job ends:
  // the answer at 12,000,987 came from copy 0 while copy 1 held chunk 1.
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].kind, PoolEvent::kClaim);
  EXPECT_EQ(events[0].index, 0u);
  EXPECT_EQ(events[0].seq, 0u);
  EXPECT_EQ(event_times[0], Time::ns(2'000'987));
  EXPECT_EQ(events[1].kind, PoolEvent::kClaim);
  EXPECT_EQ(events[1].index, 1u);
  EXPECT_EQ(events[1].seq, 1u);
  EXPECT_EQ(event_times[1], Time::ns(2'002'561));
  EXPECT_EQ(events[2].kind, PoolEvent::kRelease);
  EXPECT_EQ(event_times[2], Time::ns(12'003'148));
  const InaCounters& c = cluster.stats();
  EXPECT_EQ(c.lost_packets, 1u);
  EXPECT_EQ(c.timeouts, 2u);  // worker 1's chunk 0, worker 0's chunk 1
  EXPECT_EQ(c.retransmitted_packets, 2u);
  EXPECT_EQ(c.aggregated_packets, 4u);  // 2 chunks x 2 workers: the resend added nothing
  EXPECT_EQ(c.results_received, 4u);
  EXPECT_EQ(c.late_results, 0u);
  expect_exactly_once(cluster);
}

// ATP, worker 1's gradient lost (one 62-value chunk, one aggregator, RTO 1 ms). Worker 0's packet
// claims the aggregator at 2,000,925 (2,000,024.64 -> 2,000,025 + 900). Both RTOs fire at
// 3,000,000. Worker 0's resend reaches the switch at 3,000,925, flushes the partial (bitmap 0b01)
// to the PS and follows it; worker 1's resend (same time, scheduled after) finds the aggregator
// free and falls back too. On the PS's port: partial 3,000,949.64 -> 3,000,950 + 500 = 3,001,450;
// worker 0's copy 3,000,974.28 -> 3,001,475 (a duplicate, dropped); worker 1's 3,000,998.92 ->
// 3,000,999 + 500 = 3,001,499 completes the chunk. Result: 3,001,523.64 -> 3,001,524 + 900 =
// 3,002,424 at the switch, multicast 3,002,448.64 -> 3,002,449 + 500 = 3,002,949.
TEST(InaLoss, AtpLostGradientRecoversThroughThePs) {
  Engine engine;
  ClusterParams p = one_aggregator(PolicyKind::kAtp, Time::ms(1));
  p.jobs.push_back(job(one_layer(1.0, 1.0, 62), 2, 1));
  p.loss_rule = [](Hop hop, const Packet& q, std::uint16_t) {
    return hop == Hop::kWorkerToSwitch && q.worker == 1 && !q.resend;
  };
  InaCluster cluster(engine, p);
  cluster.start();
  engine.run();
  ASSERT_TRUE(cluster.all_finished());
  EXPECT_EQ(cluster.outcomes()[0].finish, Time::ns(3'002'949));
  const InaCounters& c = cluster.stats();
  EXPECT_EQ(c.lost_packets, 1u);
  EXPECT_EQ(c.timeouts, 2u);
  EXPECT_EQ(c.flushed_partial_packets, 1u);
  EXPECT_EQ(c.ps_late_duplicates, 1u);
  EXPECT_EQ(c.result_reanswers, 0u);  // the duplicate arrived before the chunk was finished
  expect_exactly_once(cluster);
}

// ATP, the result lost on its way to worker 1. Without loss the result reaches both workers at
// 2,002,900 (mechanisms_test.cpp); worker 1's copy is lost. Its RTO fires at 3,000,000: the
// resend reaches the switch at 3,000,925 (the aggregator was released at 2,002,375) and falls
// back to the PS at 3,000,950 + 500 = 3,001,450, which has finished the chunk and answers worker
// 1 alone with the kept result: 3,001,474.64 -> 3,001,475 + 900 = 3,002,375 at the switch,
// 3,002,399.64 -> 3,002,400 + 500 = 3,002,900 at worker 1.
TEST(InaLoss, AtpPsAnswersTheResendOfAFinishedChunk) {
  Engine engine;
  ClusterParams p = one_aggregator(PolicyKind::kAtp, Time::ms(1));
  p.jobs.push_back(job(one_layer(1.0, 1.0, 62), 2, 1));
  p.loss_rule = [](Hop hop, const Packet& q, std::uint16_t to) {
    return hop == Hop::kSwitchToWorker && to == 1 && !q.resend;
  };
  InaCluster cluster(engine, p);
  cluster.start();
  engine.run();
  ASSERT_TRUE(cluster.all_finished());
  EXPECT_EQ(cluster.outcomes()[0].finish, Time::ns(3'002'900));
  const InaCounters& c = cluster.stats();
  EXPECT_EQ(c.lost_packets, 1u);
  EXPECT_EQ(c.timeouts, 1u);  // worker 0 had its result before its RTO
  EXPECT_EQ(c.result_reanswers, 1u);
  EXPECT_EQ(c.aggregated_packets, 2u);
  EXPECT_EQ(c.late_results, 0u);
  expect_exactly_once(cluster);
}

// The loss stream: the same seed drops the same packets, another seed others, and the rate is
// what is asked (10,000 one-packet draws at 5%: 500 expected, 4 standard deviations = 87).
TEST(InaLoss, RandomLossIsReproducibleAndAtTheRate) {
  auto draws = [](std::uint64_t seed) {
    PacketLoss loss(0.05, seed, nullptr);
    std::vector<bool> lost;
    Packet q;
    for (int i = 0; i < 10'000; ++i) lost.push_back(loss.lost(Hop::kWorkerToSwitch, q, 0));
    return lost;
  };
  const auto a = draws(1), b = draws(1), c = draws(2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  const auto n = std::count(a.begin(), a.end(), true);
  EXPECT_NEAR(static_cast<double>(n), 500.0, 87.0);
  // A burst of 16 packets is lost if any of its packets is: 1 - 0.95^16 = 0.56.
  PacketLoss burst_loss(0.05, 3, nullptr);
  Packet burst;
  burst.packets = 16;
  int lost_bursts = 0;
  for (int i = 0; i < 10'000; ++i) lost_bursts += burst_loss.lost(Hop::kSwitchToPs, burst, 0);
  EXPECT_NEAR(lost_bursts / 10'000.0, 1 - std::pow(0.95, 16), 0.02);
  EXPECT_FALSE(PacketLoss(0, 1, nullptr).enabled());
}

// Issue 17, defect 2: a retransmission reaching the switch after its job ended (and gave its
// SwitchML partition back) was an invariant failure. Worker 0 computes 0.06% slower: forward and
// backward 1,000,600 ns each, so it sends at 2,001,200; worker 1 sends at 2,000,000 and loses its
// packet. Worker 1's timer fires at 12,000,000; its resend completes the slot at 12,000,987
// (times as above) and the result reaches both workers at 12,001,574, which ends the job. Worker
// 0's timer fired before that, at 2,001,200 + 10 ms = 12,001,200 (its result was on the way), so
// its resend reaches the switch at 12,001,200 + 86.72 -> 12,001,287 + 900 = 12,002,187, after
// the job ended: the switch drops it, and the job's figures are those of the loss case above.
TEST(InaLoss, SwitchMlRetransmissionAfterItsJobEndedIsDropped) {
  Engine engine;
  ClusterParams p = switchml_one_slot();
  JobSpec j = job(one_layer(1.0, 1.0, 62), 2, 1);
  p.jobs.push_back(j);
  HostSpeeds speeds(8);  // worker 0 (host 0) 0.06% slower: {"host": 0, "speed": 1 / 1.0006}
  speeds.set_speed(0, 1 / 1.0006);
  p.loss_rule = [](Hop hop, const Packet& q, std::uint16_t) {
    return hop == Hop::kWorkerToSwitch && !q.resend && q.worker == 1;
  };
  ComputeOn platform(engine, speeds);
  InaCluster cluster(engine, p, nullptr, nullptr, &platform.compute);
  cluster.start();
  engine.run();
  ASSERT_TRUE(cluster.all_finished());
  EXPECT_EQ(cluster.outcomes()[0].finish, Time::ns(12'001'574));
  EXPECT_EQ(engine.now(), Time::ns(12'002'187));  // the late resend is the last event
  EXPECT_EQ(cluster.stats().late_retransmissions, 1u);
  EXPECT_EQ(cluster.stats().timeouts, 2u);
  expect_exactly_once(cluster);
}
