// The INA switch program over the shared network backends (system.data_path "network"): the
// same policy and aggregator pool, hosted on the star's switch node, with every burst a transfer
// of the flow backend (sim_core/network/switch_program.hpp, models/ina/network_path.hpp).
//
// Hand-computed cases: the flow backend times a transfer alone on its link as latency + bytes /
// bandwidth with the end of sending rounded up to the nanosecond, and the switch's egress sends
// its messages one after another (FIFO, in picoseconds), so a lone burst and a queue of bursts
// take exactly the packet path's times (mechanisms_test.cpp): 308-byte ATP packets at 100 Gbps
// are 24.64 ns on the wire, one-way latency 500 ns, switch pipeline 400 ns.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "models/ina/ina_cluster.hpp"
#include "sim_core/engine/random.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "test_support.hpp"

using namespace mlsim;
using namespace mlsim::ina;
using namespace mlsim::ina::testing;

namespace {

Topology star_for(const ClusterParams& p) {
  int hosts = 0;
  for (const JobSpec& j : p.jobs) hosts += j.workers + 1;
  return build_topology(StarSpec{hosts, LinkSpec{p.link_bandwidth, p.link_latency}});
}

struct PathRun {
  std::vector<Time> finish;  // per job
  InaCounters counters;
  NetworkTotals network;
  std::int64_t expected_elements = 0;
  bool all_finished = false;
};

PathRun run_on(ClusterParams p, DataPathKind path) {
  p.data_path = path;
  const Topology topology = star_for(p);
  Engine engine;
  FluidNetwork flow(engine, topology, Sharing::kMaxMin);
  InaCluster cluster(engine, p, &flow, &topology);
  cluster.start();
  engine.run();
  PathRun r;
  r.all_finished = cluster.all_finished();
  for (std::size_t j = 0; j < p.jobs.size(); ++j) r.finish.push_back(cluster.job(j).finished_at());
  r.counters = cluster.stats();
  r.network = flow.totals();
  r.expected_elements = cluster.expected_elements();
  return r;
}

}  // namespace

// mechanisms_test.cpp's first case over the flow backend. Each worker's packet: a transfer of
// 308 B to the switch node, alone on its link: sending ends 2,000,024.64 -> 2,000,025, +500 =
// 2,000,525 delivered to the switch, +400 pipeline = 2,000,925 at the program. The aggregate to
// the PS: 2,000,950 + 500 = 2,001,450; the result back at the program 2,001,475 + 500 + 400 =
// 2,002,375; multicast, one transfer per worker on its own link: 2,002,400 + 500 = 2,002,900,
// the packet path's figure to the nanosecond.
TEST(InaNetworkPath, TwoWorkersOverTheFlowBackendTakeThePacketPathsTime) {
  ClusterParams p = one_aggregator(PolicyKind::kAtp);
  p.jobs.push_back(job(one_layer(1.0, 1.0, 62), 2, 1));
  const PathRun r = run_on(p, DataPathKind::kNetwork);
  ASSERT_TRUE(r.all_finished);
  EXPECT_EQ(r.finish[0], Time::ns(2'002'900));
  EXPECT_EQ(r.counters.aggregated_packets, 2u);
  // 2 gradients + 1 partial + 1 result + 2 multicast copies, 308 B each, all delivered.
  EXPECT_EQ(r.network.transfers_started, 6u);
  EXPECT_EQ(r.network.transfers_delivered, 6u);
  EXPECT_EQ(r.network.bytes_delivered, Bytes{6 * 308});
}

// mechanisms_test.cpp's collision: job B's two packets fall back to B's PS through one switch
// egress port. The port sends them one after another: the first leaves at 2,001,925 and has
// left at 2,001,949.64 (-> 2,001,950 + 500 = 2,002,450 at the PS); the second starts when the
// first has left, 2,001,949.64 -> 2,001,950 (starts are whole nanoseconds), leaves at 2,001,974.64
// -> 2,001,975, at the PS at 2,002,475 as on the packet path (2,001,974.28 -> 2,001,975). Result:
// 2,002,500 + 900 = 2,003,400 at the switch, 2,003,425 + 500 = 2,003,925 at the workers.
TEST(InaNetworkPath, FallbackQueueAtTheSwitchEgressMatchesThePacketPath) {
  ClusterParams p = one_aggregator(PolicyKind::kAtp);
  p.jobs.push_back(job(one_layer(1.0, 1.0, 62), 2, 1));
  p.jobs.push_back(job(one_layer(1.0, 1.0, 62), 2, 1, Time::us(1)));
  const PathRun r = run_on(p, DataPathKind::kNetwork);
  ASSERT_TRUE(r.all_finished);
  EXPECT_EQ(r.finish[0], Time::ns(2'002'900));
  EXPECT_EQ(r.finish[1], Time::ns(2'003'925));
  EXPECT_EQ(r.counters.fallback_packets, 2u);
}

// Loss-free, contended, packet-accurate: three jobs of 4 workers, 3 iterations of 2 x 2000
// values (33 ATP chunks, 8 SwitchML chunks per layer), windows of hundreds of packets in flight,
// collisions and fallbacks to the PS, under every policy. On the flow backend with FIFO egress a
// burst alone on a link takes exactly its packet-path time; what differs is that a paced burst
// starts at a whole nanosecond while the packet link keeps picoseconds, so it may start up to
// 1 ns late and share the link with the next burst for that long. The egress clock stays in
// picoseconds, so this does not accumulate along a stream; it adds at most about 1 ns per burst
// on a job's critical path. Tolerance: 0.01% of each job's completion time (about 240 ns of
// 2.4 ms). Measured: 3 ns (SwitchML) and 32-36 ns (ATP, DSA). Sharing the links max-min instead
// of FIFO (Egress::kShared) would be 1.8 us (SwitchML) and 7.1 us (ATP, DSA) late, 0.075% and
// 0.29%: the tolerance separates the two.
TEST(InaNetworkPath, LossFreeAggregationEqualsThePacketPathWithinAHundredthOfAPercent) {
  for (PolicyKind policy : {PolicyKind::kSwitchMl, PolicyKind::kAtp, PolicyKind::kDsa}) {
    SCOPED_TRACE(std::string(policy_name(policy)));
    ClusterParams p;
    p.policy = policy;
    p.aggregator_memory = Bytes{40 * 2048};
    for (int j = 0; j < 3; ++j) p.jobs.push_back(job(two_layers(2000), 4, 3, Time::us(20 * j)));
    const PathRun packet = run_on(p, DataPathKind::kPacket);
    const PathRun network = run_on(p, DataPathKind::kNetwork);
    ASSERT_TRUE(packet.all_finished && network.all_finished);
    for (std::size_t j = 0; j < p.jobs.size(); ++j) {
      const double a = packet.finish[j].seconds(), b = network.finish[j].seconds();
      EXPECT_NEAR(b / a, 1.0, 1e-4) << "job " << j << ": packet " << a << " s, flow " << b << " s";
    }
    EXPECT_EQ(network.counters.elements_delivered, network.expected_elements);
    EXPECT_EQ(network.counters.wrong_sums, 0u);
    if (policy != PolicyKind::kSwitchMl) {
      EXPECT_GT(network.counters.fallback_packets, 0u);  // the case is contended
    }
  }
}

// A host link that fails for good leaves no route: bursts to and from that worker are
// undelivered, every other job finishes, and the cut-off job's run does not hang the engine
// (its workers keep timing out until the bound).
TEST(InaNetworkPath, FailedHostLinkLeavesTransfersUndelivered) {
  ClusterParams p;
  p.policy = PolicyKind::kAtp;
  p.atp_timeout = Time::ms(1);
  p.jobs.push_back(job(one_layer(1.0, 1.0, 620), 2, 1));
  p.jobs.push_back(job(one_layer(1.0, 1.0, 620), 2, 1));
  p.data_path = DataPathKind::kNetwork;
  const Topology topology = star_for(p);
  Engine engine;
  FluidNetwork flow(engine, topology, Sharing::kMaxMin);
  InaCluster cluster(engine, p, &flow, &topology);
  // Host 3 is job 1's worker 0 (hosts: job 0's two workers and PS, then job 1's).
  flow.set_link_up(topology.out_links(topology.hosts()[3]).front(), false);
  cluster.start();
  engine.run_until(Time::ms(20));
  EXPECT_TRUE(cluster.job(0).finished());
  EXPECT_FALSE(cluster.job(1).finished());
  Results out;
  cluster.report(out);
  EXPECT_GT(out.metrics().at("undelivered_packets"), 0);
  EXPECT_GT(cluster.stats().timeouts, 0u);
}
