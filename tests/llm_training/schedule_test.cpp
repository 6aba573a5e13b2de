// The execution-graph executor (sim_core/workload) running Megatron iterations
// (models/llm_training/megatron_source.hpp) against hand-computed cases.
#include <gtest/gtest.h>

#include <memory>
#include <optional>

#include "models/llm_training/megatron_source.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/hardware/compute.hpp"
#include "sim_core/hardware/cost_model.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "sim_core/workload/graph_executor.hpp"

namespace mlsim::llm_training {
namespace {

using Step = MegatronSource::Step;
using workload::CommunicationMode;

Time ms(double v) {
  return Time::from_seconds(v / 1e3);
}

StageKernels fixed(double f_attn_ms, double f_mlp_ms, double b_attn_ms, double b_mlp_ms) {
  StageKernels k;
  if (f_attn_ms > 0) k.attention_forward = {FixedWork{ms(f_attn_ms)}};
  if (f_mlp_ms > 0) k.mlp_forward = {FixedWork{ms(f_mlp_ms)}};
  if (b_attn_ms > 0) k.attention_backward = {FixedWork{ms(b_attn_ms)}};
  if (b_mlp_ms > 0) k.mlp_backward = {FixedWork{ms(b_mlp_ms)}};
  return k;
}

// A star of `hosts` hosts (no latency) with `gpus` test GPUs each (they run FixedWork only),
// joined by `intra` inside a host when it is given: the platform a graph executor runs on.
struct StarPlatform {
  Topology topo;
  Engine engine;
  FluidNetwork net{engine, topo, Sharing::kMaxMin};
  LinkConditions links{topo, net};
  HostSpeeds speeds{topo.nodes().size()};
  NodeHardware hardware{topo.nodes().size()};
  CostModel cost_model;
  Compute compute{engine, hardware, speeds, cost_model};

  StarPlatform(int hosts, int gpus, Bandwidth link = Bandwidth{1e9}, IntraNodeLink intra = {})
      : topo(build_topology(StarSpec{hosts, LinkSpec{link, Time::zero()}})) {
    static const GpuSpec test_gpu = [] {
      GpuSpec g;
      g.name = "test-gpu";
      return g;
    }();
    for (NodeId h : topo.hosts()) {
      HostHardware hw{.gpu = &test_gpu, .gpus = gpus, .nic = nullptr, .intra_node = {}};
      if (intra.bandwidth.bytes_per_s > 0) hw.intra_node = intra;
      hardware.set_host(h, hw);
    }
  }
};

// The graph of `layout` on a StarPlatform, run to the end.
struct Outcome {
  std::vector<workload::RankReport> reports;
  workload::ExecutorCounts counts;
  double expected_nodes = 0;
  Time end;
  bool done = false;
};
Outcome run(const ParallelLayout& layout, StageKernels kernels, int hosts, int gpus,
            CommunicationMode mode, collectives::CostModel costs = {},
            Bandwidth link = Bandwidth{1e9}, IntraNodeLink intra = {}) {
  StarPlatform p(hosts, gpus, link, intra);
  MegatronSource source(layout, std::move(kernels));
  workload::ExecutorOptions options;
  options.mode = mode;
  options.costs = costs;
  options.low_water = 4;  // small, so that pulling more nodes happens many times
  workload::GraphExecutor executor(p.engine, p.net, p.compute, p.links, source, options, "test");
  executor.start();
  p.engine.run();
  Outcome r;
  r.reports = executor.reports();
  r.counts = executor.counts();
  r.expected_nodes = source.expected_nodes();
  r.done = executor.done();
  for (const auto& rep : r.reports) r.end = std::max(r.end, rep.finished);
  return r;
}

TEST(GraphExecutor, PlacedOnGivenHostsItRunsThereSaysWhenDoneAndCancelsWhenDestroyed) {
  // Two stages of one layer (forward 1 ms, backward 2 ms), 2 micro-batches, 1 MB activations
  // through the network. Placed on hosts 3 then 1 of a star of four (one GPU each), the graph
  // must take exactly what it takes on a star of two in topology order: the same links, the
  // same bytes (every host link is alike).
  ParallelLayout layout;
  layout.pp = 2;
  layout.micro_batches = 2;
  layout.activation = Bytes{1'000'000};
  const Outcome reference =
      run(layout, fixed(1, 0, 2, 0), 2, 1, CommunicationMode::kNetwork, {}, Bandwidth{1e9});
  ASSERT_TRUE(reference.done);
  ASSERT_GT(reference.end, Time::ms(6));  // messages take time: 1 ms each at 1e9 B/s

  auto one_run = [&](std::optional<Time> destroy_at) {
    StarPlatform p(4, 1);
    const Topology& topo = p.topo;
    Engine& engine = p.engine;
    FluidNetwork& net = p.net;
    Compute& compute = p.compute;
    LinkConditions& links = p.links;
    MegatronSource source(layout, fixed(1, 0, 2, 0));
    workload::ExecutorOptions options;
    options.mode = CommunicationMode::kNetwork;
    options.hosts = {{topo.hosts()[3], 1}, {topo.hosts()[1], 1}};
    auto executor = std::make_unique<workload::GraphExecutor>(engine, net, compute, links, source,
                                                              options, "test");
    EXPECT_EQ(executor->host_of(0), topo.hosts()[3]);
    EXPECT_EQ(executor->host_of(1), topo.hosts()[1]);
    int done_calls = 0;
    Time done_at;
    executor->set_on_done([&] {
      ++done_calls;
      done_at = engine.now();
    });
    executor->start();
    if (destroy_at) {
      engine.run_until(*destroy_at);
      EXPECT_GT(compute.in_progress() + net.totals().transfers_in_flight, 0u);
      executor.reset();  // mid-run: its kernel and its message in flight are cancelled
      engine.run();
      EXPECT_EQ(compute.in_progress(), 0u);
      EXPECT_EQ(net.totals().transfers_in_flight, 0u);
      EXPECT_EQ(done_calls, 0);
      return Time::zero();
    }
    engine.run();
    EXPECT_TRUE(executor->done());
    EXPECT_EQ(done_calls, 1);
    EXPECT_EQ(done_at, reference.end);
    EXPECT_EQ(executor->last_progress(), reference.end);
    // Only hosts 3 and 1 carried bytes: the two messages each way of each micro-batch.
    EXPECT_EQ(net.totals().bytes_delivered.count, 4 * 1'000'000);
    return done_at;
  };
  EXPECT_EQ(one_run(std::nullopt), reference.end);
  one_run(Time::from_seconds(1.5e-3));  // stage 0's second forward in progress, a message too
  // More GPUs than the placement gives: an error at the caller's path.
  {
    StarPlatform p(4, 1);
    const Topology& topo = p.topo;
    Engine& engine = p.engine;
    FluidNetwork& net = p.net;
    Compute& compute = p.compute;
    LinkConditions& links = p.links;
    MegatronSource source(layout, fixed(1, 0, 2, 0));
    workload::ExecutorOptions options;
    options.hosts = {{topo.hosts()[0], 1}};
    EXPECT_THROW(
        workload::GraphExecutor(engine, net, compute, links, source, options, "job.placement"),
        InputError);
  }
}

TEST(MegatronSchedule, StageProgramsAreNonInterleaved1F1B) {
  // Megatron's forward_backward_pipelining_without_interleaving, 2 stages, 4 micro-batches:
  // stage 0 warms up with one forward (PP - 0 - 1), stage 1 with none.
  const std::vector<Step> first = {Step::kForward,      Step::kSendForward,  // warm-up
                                   Step::kForward,      Step::kSendForwardRecvBackward,
                                   Step::kBackward,  // 1F1B x3
                                   Step::kForward,      Step::kSendForwardRecvBackward,
                                   Step::kBackward,  //
                                   Step::kForward,      Step::kSendForwardRecvBackward,
                                   Step::kBackward,                       //
                                   Step::kRecvBackward, Step::kBackward,  // cool-down
                                   Step::kDataSync};
  const std::vector<Step> last = {
      Step::kRecvForward,                                                   //
      Step::kForward,     Step::kBackward, Step::kSendBackwardRecvForward,  // 1F1B x4
      Step::kForward,     Step::kBackward, Step::kSendBackwardRecvForward,  //
      Step::kForward,     Step::kBackward, Step::kSendBackwardRecvForward,  //
      Step::kForward,     Step::kBackward, Step::kSendBackward,             //
      Step::kDataSync};
  EXPECT_EQ(MegatronSource::stage_program(0, 2, 4), first);
  EXPECT_EQ(MegatronSource::stage_program(1, 2, 4), last);
  // Fewer micro-batches than stages: warm-up is capped at M, and nothing is left for 1F1B.
  const std::vector<Step> short_first = {Step::kForward, Step::kSendForward, Step::kRecvBackward,
                                         Step::kBackward, Step::kDataSync};
  EXPECT_EQ(MegatronSource::stage_program(0, 4, 1), short_first);
}

TEST(MegatronSchedule, TwoStagesFourMicroBatchesTakeTheHandDerived1F1BTime) {
  // One layer per stage, forward F = 1 ms, backward B = 2 ms, messages free (0 bytes, no
  // costs), each stage on its own host. By hand (s0 = stage 0, s1 = stage 1; p2p is a
  // rendezvous, so a stage blocks in send_forward_recv_backward until its peer posts):
  //   s0: F0 [0,1]  F1 [1,2]  wait  B0 [4,6]  F2 [6,7]  B1 [7,9]  F3 [9,10]  B2 [10,12]
  //       wait  B3 [13,15]
  //   s1: wait  F0 [1,2]  B0 [2,4]  F1 [4,5]  B1 [5,7]  F2 [7,8]  B2 [8,10]  F3 [10,11]
  //       B3 [11,13]
  // The iteration ends at 15 ms = (M + PP - 1)(F + B) = 5 x 3. s0 idles 2 ms (waiting for
  // B0's gradient) + 1 ms (B3's): 3 ms exposed pipeline time; s1 idles 1 ms before F0.
  ParallelLayout l;
  l.pp = 2;
  l.micro_batches = 4;
  l.layers_per_stage = 1;
  const Outcome r = run(l, fixed(1, 0, 2, 0), 2, 1, CommunicationMode::kClosedForm);
  ASSERT_TRUE(r.done);
  EXPECT_EQ(r.end, ms(15));
  ASSERT_EQ(r.reports.size(), 2u);
  EXPECT_NEAR(r.reports[0].compute_s, 12e-3, 1e-12);
  EXPECT_NEAR(r.reports[0].exposed_s[MegatronSource::kPipeline], 3e-3, 1e-12);
  EXPECT_EQ(r.reports[1].finished, ms(13));
  EXPECT_NEAR(r.reports[1].exposed_s[MegatronSource::kPipeline], 1e-3, 1e-12);
  EXPECT_EQ(static_cast<double>(r.counts.nodes), r.expected_nodes);
  // The same through the network backend: the messages carry nothing, so nothing changes.
  const Outcome n = run(l, fixed(1, 0, 2, 0), 2, 1, CommunicationMode::kNetwork);
  EXPECT_EQ(n.end, ms(15));
}

TEST(MegatronSchedule, ActivationMessagesCostTheirTransferTimeOnTheCriticalPath) {
  // The same pipeline with 1 MB messages over 1 GB/s host links: each takes 1 ms, in the closed
  // form (send/recv: S / B) and through the network (host -> switch -> host, both 1 GB/s,
  // messages in opposite directions never share a link). By hand (a message starts when both
  // ends have posted; "x>y [a,b]" a message):
  //   s0: F0 [0,1]  0>1 [1,2]  F1 [2,3]  (post at 3)           B0 [6,8]  F2 [8,9]  1>0 and 2>1
  //       [9,10]  B1 [10,12]  F3 [12,13]  3>1 and 2<1 [13,14]  B2 [14,16]  3<1 [17,18]  B3 [18,20]
  //   s1: F0 [2,3]  B0 [3,5]  0<1 and 1>1 [5,6]  F1 [6,7]  B1 [7,9]  F2 [10,11]  B2 [11,13]
  //       F3 [14,15]  B3 [15,17]  last gradient [17,18]
  // The iteration ends at 20 ms; stage 1 at 18 ms.
  ParallelLayout l;
  l.pp = 2;
  l.micro_batches = 4;
  l.layers_per_stage = 1;
  l.activation = Bytes{1'000'000};
  for (auto mode : {CommunicationMode::kClosedForm, CommunicationMode::kNetwork}) {
    const Outcome r = run(l, fixed(1, 0, 2, 0), 2, 1, mode);
    ASSERT_TRUE(r.done);
    EXPECT_EQ(r.end, ms(20));
    EXPECT_EQ(r.reports[1].finished, ms(18));
    EXPECT_EQ(r.counts.messages, 8u);
  }
}

TEST(MegatronSchedule, TensorParallelAllReducePaysTheLatencyFloor) {
  // TP 2 on one host, one stage, one micro-batch of one layer: attention and MLP forward 1 ms
  // each, backward 2 ms each, and four all-reduces of 1000 B over an intra-node link of
  // 100 GB/s and 1 us, with launch 5 us and the Simple protocol (hop 2 us, efficiency 1):
  //   launch + 2(n-1)(hop + link latency) + 2(n-1)/n S/B = 5 + 2 x 3 + 1000 / 1e11 s
  //   = 11 us + 10 ns = 11.010 us, of which the latency floor is 11 us (99.9%).
  // Iteration: 1 + 1 + 2 + 2 ms + 4 x 11.010 us = 6.04404 ms; TP exposed: 44.04 us.
  ParallelLayout l;
  l.tp = 2;
  l.activation = Bytes{1000};
  collectives::CostModel costs;
  costs.launch = Time::from_seconds(5e-6);
  costs.of(collectives::Protocol::kSimple) = {true, Time::from_seconds(2e-6), 1.0};
  const IntraNodeLink nvlink{IntraNodeFabric::kNvSwitch, Bandwidth{1e11}, Time::from_seconds(1e-6),
                             "test"};
  for (bool collapse : {true, false}) {
    l.collapse_tensor_parallel = collapse;
    const Outcome r = run(l, fixed(1, 1, 2, 2), 1, 2, CommunicationMode::kClosedForm, costs,
                          Bandwidth{1e9}, nvlink);
    ASSERT_TRUE(r.done);
    EXPECT_NEAR(r.end.seconds(), 6.04404e-3, 1e-9) << "collapse " << collapse;
    EXPECT_NEAR(r.reports[0].exposed_s[MegatronSource::kTensor], 44.04e-6, 1e-9);
    EXPECT_EQ(r.counts.collectives, 4u);
    EXPECT_EQ(r.reports.size(), collapse ? 1u : 2u);
  }
}

TEST(MegatronSchedule, DataParallelAllReduceOverlapsNothing) {
  // DP 2 on two 1-GPU hosts joined by 1 GB/s links, no pipeline, 2 micro-batches of F = 1 ms,
  // B = 2 ms, then a 1 MB gradient all-reduce: a 2-rank ring moves 2(n-1)/n S = 1 MB per rank
  // at 1 GB/s = 1 ms, after the last backward. Iteration = 2 x 3 + 1 = 7 ms, all of the last
  // millisecond exposed data-parallel time, in both modes.
  ParallelLayout l;
  l.dp = 2;
  l.micro_batches = 2;
  l.first_stage_grads = Bytes{1'000'000};
  for (auto mode : {CommunicationMode::kClosedForm, CommunicationMode::kNetwork}) {
    const Outcome r = run(l, fixed(1, 0, 2, 0), 2, 1, mode);
    ASSERT_TRUE(r.done);
    EXPECT_EQ(r.end, ms(7));
    for (const auto& rep : r.reports) {
      EXPECT_NEAR(rep.compute_s, 6e-3, 1e-12);
      EXPECT_NEAR(rep.exposed_s[MegatronSource::kData], 1e-3, 1e-12);
    }
  }
}

TEST(MegatronSchedule, DistributedOptimizerIsReduceScatterThenAllGather) {
  // The same with reduce-scatter + all-gather: each moves (n-1)/n S = 0.5 MB per rank, 0.5 ms,
  // one after the other: the same 1 ms in all, as two collectives.
  ParallelLayout l;
  l.dp = 2;
  l.micro_batches = 2;
  l.first_stage_grads = Bytes{1'000'000};
  l.dp_sync = DpSync::kReduceScatterAllGather;
  const Outcome r = run(l, fixed(1, 0, 2, 0), 2, 1, CommunicationMode::kClosedForm);
  EXPECT_EQ(r.end, ms(7));
  EXPECT_EQ(r.counts.collectives, 2u);
}

TEST(MegatronSchedule, CollapsingTensorParallelChangesNothingButTheRankCount) {
  // Property: TP 2 x PP 2 x DP 2 on 4 hosts of 2 GPUs (TP inside a host) gives the same times
  // with and without the symmetry, in the closed form and through the network (where the
  // collapsed rank's messages carry both GPUs' bytes over the same links).
  ParallelLayout l;
  l.tp = 2;
  l.pp = 2;
  l.dp = 2;
  l.micro_batches = 3;
  l.layers_per_stage = 2;
  l.activation = Bytes{200'000};
  l.first_stage_grads = Bytes{3'000'000};
  l.middle_stage_grads = l.first_stage_grads;
  l.last_stage_grads = Bytes{5'000'000};
  l.recompute = true;
  const IntraNodeLink nvlink{IntraNodeFabric::kNvSwitch, Bandwidth{1e11}, Time::zero(), "test"};
  for (auto mode : {CommunicationMode::kClosedForm, CommunicationMode::kNetwork}) {
    l.collapse_tensor_parallel = true;
    const Outcome a = run(l, fixed(1, 2, 2, 4), 4, 2, mode, {}, Bandwidth{1e9}, nvlink);
    l.collapse_tensor_parallel = false;
    const Outcome b = run(l, fixed(1, 2, 2, 4), 4, 2, mode, {}, Bandwidth{1e9}, nvlink);
    ASSERT_TRUE(a.done && b.done);
    EXPECT_EQ(a.reports.size() * 2, b.reports.size());
    EXPECT_NEAR(a.end.seconds(), b.end.seconds(), 1e-9);
    EXPECT_EQ(static_cast<double>(a.counts.nodes), a.expected_nodes);
    EXPECT_EQ(static_cast<double>(b.counts.nodes), b.expected_nodes);
  }
}

}  // namespace
}  // namespace mlsim::llm_training

namespace mlsim::workload {
namespace {

// A graph that cannot finish: rank 0 waits for a message rank 1 never sends.
class Orphan final : public GraphSource {
 public:
  RankId ranks() const override { return 2; }
  std::int64_t first_gpu(RankId r) const override { return r; }
  int width(RankId) const override { return 1; }
  const std::vector<Group>& groups() const override { return groups_; }
  const std::vector<std::vector<Work>>& kernels() const override { return kernels_; }
  const std::vector<std::string>& phases() const override { return phases_; }
  bool next(RankId r, std::vector<Node>& out) override {
    if (r != 0 || given_) return false;
    given_ = true;
    Node recv;
    recv.kind = NodeKind::kRecv;
    recv.target = 1;
    out.push_back(recv);
    return true;
  }

 private:
  std::vector<Group> groups_;
  std::vector<std::vector<Work>> kernels_;
  std::vector<std::string> phases_ = {"compute", "p2p"};
  bool given_ = false;
};

TEST(GraphExecutor, AGraphThatCannotFinishStopsAndSaysWhere) {
  const Topology topo = build_topology(StarSpec{2, LinkSpec{Bandwidth{1e9}, Time::zero()}});
  Engine engine;
  FluidNetwork net(engine, topo, Sharing::kMaxMin);
  LinkConditions links(topo, net);
  HostSpeeds speeds(topo.nodes().size());
  NodeHardware hardware(topo.nodes().size());
  CostModel costs;
  Compute compute(engine, hardware, speeds, costs);
  Orphan source;
  GraphExecutor executor(engine, net, compute, links, source, {}, "test");
  executor.start();
  engine.run();  // returns: nothing is left to do
  EXPECT_FALSE(executor.done());
  ASSERT_EQ(executor.stalled().size(), 1u);
  EXPECT_NE(executor.stalled()[0].find("rank 0: node 0 (recv"), std::string::npos);
  EXPECT_TRUE(executor.reports()[1].done);
}

}  // namespace
}  // namespace mlsim::workload
