// Megatron-LM iterations with tensor parallelism not collapsed (collapse_tensor_parallel false)
// on the training core: every GPU a worker of its own (MegatronCoreJob, worker g = t + TP (d +
// DP s) as the graph's rank g), its TP all-reduces rendezvous steps that start once the TP
// group's last member reached them and end for all together (OpStep::rendezvous, as
// GraphExecutor::arrive starts a group's collective), its messages and DP rings its own. Against
// hand-computed times, and against the execution graph run the same way (MegatronSource with
// the symmetry off, network mode): equal to the nanosecond, per rank too, on a star and on
// leaf-spines whose ECMP choices split a TP group's messages over different uplinks (there the
// TP ranks of a group drift apart between all-reduces and the rendezvous decides the times).
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "models/llm_training/megatron_core_job.hpp"
#include "models/llm_training/megatron_source.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "sim_core/workload/graph_executor.hpp"
#include "tests/llm_training/core_bench.hpp"

namespace mlsim::llm_training {
namespace {

// The platform (core_bench.hpp): pp x dp hosts of tp GPUs each (one TP group per host), on a
// star of 1 GB/s links without latency or on `fabric`; a host's GPUs on a 100 GB/s, 1 us
// NVSwitch. Every collective and message pays a 5 us launch and the Simple protocol's 2 us per
// hop (`no_costs`: neither). Kernels of fixed times (fixed_kernels), all eight, or
// (`attention_only`) a 1 ms forward and a 2 ms backward per layer and nothing else (the hand
// cases).
using core_bench::CoreBench;
using core_bench::fixed_kernels;

struct TpRun {
  Time end;
  std::vector<workload::RankReport> ranks;
};

TpRun on_the_graph(const ParallelLayout& l, const StageKernels& k,
                   std::optional<TopologySpec> fabric = std::nullopt, bool no_costs = false) {
  CoreBench b(l, {.fabric = fabric, .costs = !no_costs});
  const auto run = b.run_graph(l, k);
  EXPECT_TRUE(run.executor->done());
  return {run.end, run.executor->reports()};
}

TpRun on_the_core(const ParallelLayout& l, const StageKernels& k,
                  std::optional<TopologySpec> fabric = std::nullopt, bool no_costs = false) {
  CoreBench b(l, {.fabric = fabric, .costs = !no_costs});
  MegatronCoreOptions options = b.core_options();
  MegatronCoreJob job(b.engine, b.net, b.compute, l, k, b.worker_hosts(l), options,
                      [] { ADD_FAILURE(); });
  job.start();
  b.engine.run();
  EXPECT_TRUE(job.finished());
  return {job.finish_time(), job.rank_reports()};
}

// Every rank's report equal: its finish, compute and each phase's exposed time, as doubles (the
// same nanosecond intervals summed in the same order on both).
void expect_same_ranks(const TpRun& graph, const TpRun& core, const std::string& what) {
  EXPECT_EQ(core.end, graph.end) << what;
  ASSERT_EQ(core.ranks.size(), graph.ranks.size()) << what;
  for (std::size_t r = 0; r < graph.ranks.size(); ++r) {
    EXPECT_TRUE(core.ranks[r].done) << what << " rank " << r;
    EXPECT_EQ(core.ranks[r].finished, graph.ranks[r].finished) << what << " rank " << r;
    EXPECT_EQ(core.ranks[r].compute_s, graph.ranks[r].compute_s) << what << " rank " << r;
    for (std::size_t ph = 0; ph < graph.ranks[r].exposed_s.size(); ++ph)
      EXPECT_EQ(core.ranks[r].exposed_s.at(ph), graph.ranks[r].exposed_s[ph])
          << what << " rank " << r << " phase " << MegatronSource::phase_names()[ph];
  }
}

ParallelLayout layout(int tp, int pp, int dp, int micro_batches, std::int64_t activation,
                      std::int64_t grads, bool recompute, bool collapsed) {
  ParallelLayout l;
  l.tp = tp;
  l.pp = pp;
  l.dp = dp;
  l.micro_batches = micro_batches;
  l.activation = Bytes{activation};
  l.first_stage_grads = l.middle_stage_grads = l.last_stage_grads = Bytes{grads};
  l.recompute = recompute;
  l.collapse_tensor_parallel = collapsed;
  return l;
}

// By hand: TP 2 x PP 1 x DP 2 (2 hosts of 2 GPUs, 4 workers not collapsed), one micro-batch, one
// layer whose forward is attention (1 ms) and backward attention (2 ms), 1000 B activations,
// 1 MB of gradients per GPU. A TP all-reduce inside a host is launch + 2 (n - 1) (protocol hop
// + link latency) + 2 (n - 1) / n x S / B = 5 + 2 x (2 + 1) us + 1000 B / 100 GB/s = 11.010 us,
// four per iteration (two forward, two backward; the empty MLP kernels are skipped): compute
// 3 ms + 44.040 us. Then each TP index's DP ring (two rings, one per TP index, both between the
// two hosts) all-reduces 1 MB: two steps of 0.5 MB per ring, the two rings sharing each
// direction's 1 GB/s, so 1 ms per step, plus the 5 us launch and 2 us per step: 2.009 ms. The
// iteration: 3.044040 + 2.009 = 5.053040 ms on every rank. Exposure (docs/llm_training.md,
// "Exposure, defined"): the first three all-reduces end before a kernel, TP 33.030 us; the last
// one is followed by the DP sync and no kernel, so it goes with the tail to the rank's last
// node: DP 11.010 us + 2.009 ms = 2.020010 ms.
// Collapsed (one worker per host, one ring of 2 MB at the full 1 GB/s) the same: the graph's
// symmetry holds here (nothing tells the TP ranks apart).
TEST(MegatronUncollapsedOnTheCore, TensorAndDataParallelByHand) {
  const StageKernels k = fixed_kernels(true);
  for (const bool collapsed : {false, true}) {
    const ParallelLayout l = layout(2, 1, 2, 1, 1000, 1'000'000, false, collapsed);
    const TpRun graph = on_the_graph(l, k), core = on_the_core(l, k);
    EXPECT_EQ(core.end, Time::ns(5'053'040)) << collapsed;
    expect_same_ranks(graph, core, collapsed ? "collapsed" : "not collapsed");
    ASSERT_EQ(core.ranks.size(), collapsed ? 2u : 4u);
    for (const auto& r : core.ranks) {
      EXPECT_NEAR(r.compute_s, 3e-3, 1e-12);
      EXPECT_NEAR(r.exposed_s[MegatronSource::kTensor], 33.030e-6, 1e-12);
      EXPECT_NEAR(r.exposed_s[MegatronSource::kData], 2.020010e-3, 1e-12);
      EXPECT_NEAR(r.exposed_s[MegatronSource::kPipeline], 0, 1e-12);
    }
  }
}

// The rendezvous by hand (core only: the group's two GPUs on two hosts of different speeds):
// TP 2, one stage, one replica, one micro-batch, the layer above; worker 1's host runs at half
// speed, so its attention takes 2 ms forward and 4 ms backward. The group spans the two hosts,
// so (since 2026-12-07, as on the graph) each all-reduce is a ring through the network, two
// steps of 500 B on the zero-latency 1 GB/s star: 5 + 2 x (2 + 0.5) us = 10 us (before, the core
// priced it inside one host, 11.010 us). Each starts when the later member arrives: forward,
// worker 1 arrives at 2 ms, the two forward all-reduces end at 2.020 ms, the first backward one
// at 2.030 ms; backward attention ends at 4.030 ms on worker 0 and 6.030 ms on worker 1; the
// last all-reduce ends at 6.040 ms for both. Worker 0: compute 3 ms, exposed TP 3.040 ms (its
// waits); worker 1: compute 6 ms, TP 40 us. Without the rendezvous worker 0 would end at
// 3.040 ms.
TEST(MegatronUncollapsedOnTheCore, TheTensorAllReduceWaitsForTheGroupsLastMember) {
  const ParallelLayout l = layout(2, 1, 1, 1, 1000, 0, false, false);
  CoreBench b(l, {.hosts = 2});
  const std::vector<NodeId> hosts = {b.topo.hosts()[0], b.topo.hosts()[1]};
  b.speeds.set_speed(hosts[1], 0.5);
  MegatronCoreOptions options = b.core_options();
  MegatronCoreJob job(b.engine, b.net, b.compute, l, fixed_kernels(true), hosts, options,
                      [] { ADD_FAILURE(); });
  job.start();
  b.engine.run();
  ASSERT_TRUE(job.finished());
  EXPECT_EQ(job.finish_time(), Time::ns(6'040'000));
  const auto ranks = job.rank_reports();
  ASSERT_EQ(ranks.size(), 2u);
  for (const auto& r : ranks) EXPECT_EQ(r.finished, Time::ns(6'040'000));
  EXPECT_NEAR(ranks[0].compute_s, 3e-3, 1e-12);
  EXPECT_NEAR(ranks[0].exposed_s[MegatronSource::kTensor], 3.040e-3, 1e-12);
  EXPECT_NEAR(ranks[1].compute_s, 6e-3, 1e-12);
  EXPECT_NEAR(ranks[1].exposed_s[MegatronSource::kTensor], 40e-6, 1e-12);
}

// The cross-check: core not collapsed == graph not collapsed, to the nanosecond, per rank, over
// configurations on the star (both DP strategies, recomputation, three and four stages, several
// iterations) and on 2:1 leaf-spines with several spines, where a TP group's messages (one per
// GPU, each with its own ECMP label) take different uplinks, meet different flows and arrive at
// different times, so the group's GPUs wait for each other at the next all-reduce. On the star
// the graph's symmetry holds (collapsed == not collapsed, checked too); on the leaf-spines it
// need not (the graph's TP separate flows against one of TP x the bytes).
TEST(MegatronUncollapsedOnTheCore, TakesTheGraphsTimesPerRank) {
  struct Config {
    int tp, pp, dp, micro_batches, iterations;
    std::int64_t activation, grads;
    bool recompute, distributed_optimizer;
    int leaves = 0, hosts_per_leaf = 0, spines = 0;  // 0: the star
  };
  const std::vector<Config> configs = {{2, 2, 1, 4, 1, 500'000, 0, false, false},
                                       {2, 2, 2, 3, 1, 250'000, 2'000'000, true, false},
                                       {4, 2, 3, 5, 1, 100'000, 3'000'000, false, true},
                                       {2, 3, 2, 4, 2, 400'000, 1'000'001, true, false},
                                       {2, 4, 2, 6, 1, 500'000, 1'000'000, true, true},
                                       {2, 4, 2, 6, 1, 500'000, 2'000'000, true, false, 4, 2, 4},
                                       {4, 2, 4, 4, 2, 1'000'000, 4'000'000, false, false, 4, 2, 4},
                                       {2, 2, 4, 5, 1, 750'000, 1'000'000, true, true, 4, 2, 2},
                                       {2, 4, 4, 8, 1, 750'000, 3'000'000, false, false, 4, 4, 2}};
  const StageKernels k = fixed_kernels(false);
  int leaf_spine_differs = 0;
  for (const Config& c : configs) {
    ParallelLayout l =
        layout(c.tp, c.pp, c.dp, c.micro_batches, c.activation, c.grads, c.recompute, false);
    l.iterations = c.iterations;
    if (c.distributed_optimizer) l.dp_sync = DpSync::kReduceScatterAllGather;
    std::optional<TopologySpec> fabric;
    if (c.leaves > 0)
      fabric = LeafSpineSpec{c.leaves,
                             c.hosts_per_leaf,
                             c.spines,
                             2.0,
                             LinkSpec{Bandwidth{1e9}, Time::from_seconds(1e-6)},
                             Time::from_seconds(1e-6)};
    const std::string what = "TP " + std::to_string(c.tp) + " PP " + std::to_string(c.pp) + " DP " +
                             std::to_string(c.dp) + " M " + std::to_string(c.micro_batches) +
                             (c.leaves > 0 ? " leaf-spine" : " star");
    const TpRun graph = on_the_graph(l, k, fabric), core = on_the_core(l, k, fabric);
    EXPECT_GT(graph.end, Time::zero());
    EXPECT_EQ(graph.ranks.size(), static_cast<std::size_t>(c.tp * c.pp * c.dp));
    expect_same_ranks(graph, core, what);
    l.collapse_tensor_parallel = true;
    const TpRun collapsed = on_the_graph(l, k, fabric);
    // On the star exactly when the DP rings' bytes split evenly over the ring; 1,000,001 B over
    // DP 2 does not, and a ring of 2,000,002 B rounds its segments otherwise than two of
    // 1,000,001 B (measured: 4 ns).
    if (c.leaves == 0 && c.grads % c.dp == 0)
      EXPECT_EQ(collapsed.end, graph.end) << what << ": the symmetry holds on the star";
    else if (c.leaves == 0)
      EXPECT_NEAR(collapsed.end.seconds(), graph.end.seconds(), 10e-9) << what;
    else if (collapsed.end != graph.end)
      ++leaf_spine_differs;
    EXPECT_EQ(on_the_core(l, k, fabric).end, collapsed.end) << what << " collapsed";
  }
  // At least one leaf-spine configuration where not collapsing TP changes the iteration: there
  // the TP ranks' own messages drift apart, which only the rendezvous reconciles.
  EXPECT_GT(leaf_spine_differs, 0);
}

}  // namespace
}  // namespace mlsim::llm_training
