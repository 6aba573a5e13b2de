// DSA's control-plane priority (models/ina/dsa_priority.hpp), by hand: communication intensity
// per job, the rank it gives, and the per-tensor priority the packets carry.
#include <gtest/gtest.h>

#include "models/ina/dsa_priority.hpp"
#include "models/ina/ina_cluster.hpp"
#include "sim_core/base/error.hpp"
#include "test_support.hpp"

using namespace mlsim;
using namespace mlsim::ina;
using namespace mlsim::ina::testing;

// Three jobs on a 100 Gbps (12.5 bytes/ns) star, ATP packets of 62 values in 308 bytes:
// - A: one layer of 620 values = 10 packets = 3,080 B = 246.4 ns on the wire per iteration,
//   compute 1 + 1 ms: intensity 246.4 ns / 2 ms = 1.232e-4;
// - B: two layers of 62 values = 2 packets = 616 B = 49.28 ns, compute 0.2 + 0.3 + 0.1 + 0.2 =
//   0.8 ms: intensity 6.16e-5;
// - C: A's profile again (arriving later): 1.232e-4, a tie with A.
// Distinct intensities {6.16e-5, 1.232e-4}: B rank 0, A and C rank 1. Per tensor: 2 ranks, so
// 65536 / 2 = 32768 layer keys per rank; A's and C's one layer: 1 x 32768 + 0 = 32768; B's input
// layer (node1, forward index 0): 0 x 32768 + (2 - 1 - 0) = 1, its output layer: 0. Per job:
// the rank itself (A 1, B 0, C 1).
TEST(DsaPriority, RanksJobsByCommunicationIntensityAndTensorsByLayer) {
  for (const DsaPriorityKind kind : {DsaPriorityKind::kTensor, DsaPriorityKind::kJob}) {
    SCOPED_TRACE(std::string(dsa_priority_name(kind)));
    Engine engine;
    ClusterParams p;
    p.policy = PolicyKind::kDsa;
    p.dsa_priority = kind;
    p.jobs.push_back(job(one_layer(1.0, 1.0, 620), 2, 1));
    p.jobs.push_back(job(two_layers(62), 2, 1));
    p.jobs.push_back(job(one_layer(1.0, 1.0, 620), 2, 1, Time::ms(1)));
    InaCluster cluster(engine, p);
    EXPECT_NEAR(cluster.communication_intensity(0), 1.232e-4, 1e-15);
    EXPECT_NEAR(cluster.communication_intensity(1), 6.16e-5, 1e-15);
    EXPECT_EQ(cluster.communication_intensity(0), cluster.communication_intensity(2));
    EXPECT_EQ(cluster.job(0).priority(), 1u);
    EXPECT_EQ(cluster.job(1).priority(), 0u);
    EXPECT_EQ(cluster.job(2).priority(), 1u);

    const DsaPriorities pr(kind, {1.232e-4, 6.16e-5, 1.232e-4}, {1, 2, 1});
    if (kind == DsaPriorityKind::kTensor) {
      EXPECT_EQ(pr.levels(), 32768u);
      EXPECT_EQ(pr.of(0, 0), 32768);
      EXPECT_EQ(pr.of(1, 0), 1);
      EXPECT_EQ(pr.of(1, 1), 0);
      EXPECT_EQ(pr.of(2, 0), 32768);
    } else {
      EXPECT_EQ(pr.levels(), 1u);
      EXPECT_EQ(pr.of(0, 0), 1);
      EXPECT_EQ(pr.of(1, 0), 0);
      EXPECT_EQ(pr.of(1, 1), 0);
      EXPECT_EQ(pr.of(2, 0), 1);
    }
    // Every tensor of a more intensive job outranks every tensor of a less intensive one.
    EXPECT_GT(pr.of(0, 0), pr.of(1, 0));
  }
}

// More layers than the field has keys per rank: three ranks leave 65536 / 3 = 21845 keys; a job
// of 50,000 layers maps layer l to floor((49,999 - l) x 21,845 / 50,000): layer 0 to
// floor(21,844.56) = 21,844, layer 49,999 to 0, layer 25,000 to floor(24,999 x 0.4369) =
// floor(10,922.06) = 10,922. At rank 2 the input layer is 2 x 21,845 + 21,844 = 65,534.
TEST(DsaPriority, QuantisesDeepJobsIntoTheField) {
  const DsaPriorities pr(DsaPriorityKind::kTensor, {1.0, 2.0, 3.0}, {4, 4, 50'000});
  EXPECT_EQ(pr.levels(), 21845u);
  EXPECT_EQ(pr.of(2, 0), 65534);
  EXPECT_EQ(pr.of(2, 49'999), 2 * 21845);
  EXPECT_EQ(pr.of(2, 25'000), 2 * 21845 + 10922);
  EXPECT_EQ(pr.of(0, 0), 3);  // rank 0, four layers fit: 4 - 1 - 0
  EXPECT_EQ(pr.of(1, 3), 21845);
}

TEST(DsaPriority, UnknownKindIsAnInputErrorAtItsPath) {
  try {
    dsa_priority_kind("layer", "system.dsa.priority");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("system.dsa.priority"), std::string::npos);
  }
}

// Per tensor, a job's input-side chunk preempts the job's own output-side chunk, which the
// per-job reading never does. One job, 2 workers, one aggregator; layers node1 (input side,
// forward 0.2 ms, backward 0.0005 ms = 500 ns) and node2 (forward 0.1, backward 0.2 ms), 62
// values each: one packet per layer, produced in backward order node2 (seq 0) then node1 (seq 1).
// - Forward ends at 0.3 ms; node2's backward at 500,000 ns: its packets 500,024.64 -> 500,025 +
//   500 + 400 = 500,925 at the switch, claim and complete; the aggregate reaches the PS at
//   500,949.64 -> 500,950 + 500 = 501,450, whose result is back at the switch at 501,474.64 ->
//   501,475 + 900 = 502,375 and at the workers 502,399.64 -> 502,400 + 500 = 502,900.
// - node1's backward ends at 500,500; its packets reach the switch at 500,524.64 -> 500,525 + 900
//   = 501,425, while node2's complete aggregate still holds the aggregator (until 502,375).
//   * tensor: node1's priority (1) beats node2's (0): preemption of a complete aggregator (its
//     aggregate is already at the PS: nothing is sent), node1 claims and completes it; to the PS
//     at 501,449.64 -> 501,450 + 500 = 501,950; result at the switch 501,974.64 -> 501,975 + 900
//     = 502,875 (released), at the workers 502,899.64 -> 502,900 + 500 = 503,400.
//   * job: equal priorities, both packets fall back to the PS: 501,449.64 -> 501,450 + 500 =
//     501,950 and, queued behind it, 501,474.28 -> 501,475 + 500 = 501,975, which completes the
//     chunk; result at the switch 501,999.64 -> 502,000 + 900 = 502,900, at the workers
//     502,924.64 -> 502,925 + 500 = 503,425.
TEST(DsaPriority, PerTensorAJobsInputLayerPreemptsItsOwnOutputLayer) {
  std::istringstream text(
      "node1 -- A -- forward_compute_time=0.2, backward_compute_time=0.0005, "
      "activation_size=4.0, parameter_size=248.0\n"
      "node2 -- B -- forward_compute_time=0.1, backward_compute_time=0.2, activation_size=4.0, "
      "parameter_size=248.0\n"
      "\tnode1 -- node2\n");
  const auto profile =
      std::make_shared<const DnnProfile>(parse_pipedream_graph(text, "fast_input_layer"));
  for (const DsaPriorityKind kind : {DsaPriorityKind::kTensor, DsaPriorityKind::kJob}) {
    SCOPED_TRACE(std::string(dsa_priority_name(kind)));
    Engine engine;
    ClusterParams p = one_aggregator(PolicyKind::kDsa);
    p.dsa_priority = kind;
    p.jobs.push_back(job(profile, 2, 1));
    InaCluster cluster(engine, p);
    OwnershipTracker ownership;
    cluster.policy().pool().set_observer([&](const PoolEvent& e) { ownership(e); });
    cluster.start();
    engine.run();
    ASSERT_TRUE(cluster.all_finished());
    const InaCounters& c = cluster.stats();
    EXPECT_EQ(ownership.violations, 0);
    EXPECT_EQ(c.wrong_sums, 0u);
    EXPECT_EQ(c.elements_delivered, cluster.expected_elements());
    if (kind == DsaPriorityKind::kTensor) {
      EXPECT_EQ(c.collision_packets, 1u);  // node1's first packet; the second finds it its own
      EXPECT_EQ(c.preemptions, 1u);
      EXPECT_EQ(c.evicted_partial_packets, 0u);  // the holder was complete
      EXPECT_EQ(c.fallback_packets, 0u);
      EXPECT_EQ(c.aggregated_packets, 4u);
      EXPECT_EQ(cluster.job(0).finished_at(), Time::ns(503'400));
    } else {
      EXPECT_EQ(c.collision_packets, 2u);
      EXPECT_EQ(c.preemptions, 0u);
      EXPECT_EQ(c.fallback_packets, 2u);
      EXPECT_EQ(c.aggregated_packets, 2u);
      EXPECT_EQ(cluster.job(0).finished_at(), Time::ns(503'425));
    }
  }
}
