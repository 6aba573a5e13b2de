// Megatron-LM iterations in closed form on both cores: the execution graph (MegatronSource on a
// GraphExecutor, CommunicationMode::kClosedForm) and the training core (MegatronCoreJob with
// MegatronCoreOptions::closed_form: messages priced by InterHostClosedForm, each stage's DP sync
// by the ring_closed_form or reduce_scatter_all_gather_closed_form strategy). Both price a message
// or DP collective through sim_core/collectives/inter_host.hpp (one GPU's bytes, the host link
// split among its GPUs), so iteration, finish, compute and per-phase exposure must be equal to
// the nanosecond, as in network mode (core_cross_check_test.cpp).
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "models/llm_training/graph_report.hpp"
#include "models/llm_training/megatron_core_job.hpp"
#include "models/llm_training/megatron_source.hpp"
#include "models/llm_training/transformer_kernels.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "sim_core/workload/graph_executor.hpp"
#include "tests/llm_training/core_bench.hpp"

namespace mlsim::llm_training {
namespace closed_form_test {

Time ms(double v) {
  return Time::from_seconds(v / 1e3);
}

// The platform (core_bench.hpp): one host per (stage, DP index), tp GPUs each, on `fabric` (by
// default a star of 1 GB/s, 1 us links); GPUs of a host on a 100 GB/s, 1 us NVSwitch. Kernels
// of fixed times, or (operators) tiny_gpt's operators priced by the bench's roofline. Costs:
// 5 us launch and the Simple protocol at 2 us per hop, or none.
using core_bench::CoreBench;
using core_bench::fixed_kernels;
using core_bench::tiny_gpt;

struct Case {
  ParallelLayout layout;
  bool operators = false;
  std::optional<TopologySpec> fabric;
  bool costs = true;
  std::optional<StageKernels> kernels;  // else fixed_kernels() or the operators
};

StageKernels kernels_of(const Case& c) {
  if (c.kernels) return *c.kernels;
  return c.operators ? transformer_kernels(tiny_gpt(), 1, c.layout.tp) : fixed_kernels();
}

core_bench::CoreBenchOptions platform(const Case& c) {
  return {
      .fabric = c.fabric, .star_latency = Time::us(1), .operators = c.operators, .costs = c.costs};
}

struct Outcome {
  Time end;
  std::vector<workload::RankReport> ranks;
};

Outcome on_the_graph(const Case& c, workload::CommunicationMode mode) {
  CoreBench b(c.layout, platform(c));
  const auto run = b.run_graph(c.layout, kernels_of(c), mode);
  EXPECT_TRUE(run.executor->done());
  if (mode == workload::CommunicationMode::kClosedForm) {
    EXPECT_EQ(run.executor->network_bytes_delivered(), 0);
  }
  return {run.end, run.executor->reports()};
}

// Worker r = DP index + dp x stage on host r (the graph's collapsed rank order).
Outcome on_the_core(const Case& c) {
  CoreBench b(c.layout, platform(c));
  MegatronCoreOptions options = b.core_options();
  options.closed_form = true;
  MegatronCoreJob job(b.engine, b.net, b.compute, c.layout, kernels_of(c), b.worker_hosts(c.layout),
                      options, [] { ADD_FAILURE(); });
  job.start();
  b.engine.run();
  EXPECT_TRUE(job.finished());
  // Nothing crossed the network.
  EXPECT_EQ(job.message_bytes_delivered(), 0);
  EXPECT_EQ(job.gradients().bytes_delivered(), 0);
  return {job.finish_time(), job.rank_reports()};
}

void expect_same(const Outcome& graph, const Outcome& core, const std::string& what) {
  EXPECT_EQ(core.end, graph.end) << what;
  ASSERT_EQ(core.ranks.size(), graph.ranks.size()) << what;
  for (std::size_t r = 0; r < graph.ranks.size(); ++r) {
    const auto &g = graph.ranks[r], &k = core.ranks[r];
    EXPECT_TRUE(k.done) << what << " rank " << r;
    EXPECT_EQ(k.finished, g.finished) << what << " rank " << r;
    EXPECT_EQ(k.compute_s, g.compute_s) << what << " rank " << r;
    ASSERT_EQ(k.exposed_s.size(), g.exposed_s.size()) << what;
    for (std::size_t ph = 0; ph < g.exposed_s.size(); ++ph)
      EXPECT_EQ(k.exposed_s[ph], g.exposed_s[ph])
          << what << " rank " << r << " phase " << MegatronSource::phase_names()[ph];
  }
}

ParallelLayout layout(int tp, int pp, int dp, int micro_batches, std::int64_t activation,
                      std::int64_t grads, bool recompute = false) {
  ParallelLayout l;
  l.tp = tp;
  l.pp = pp;
  l.dp = dp;
  l.micro_batches = micro_batches;
  l.activation = Bytes{activation};
  l.first_stage_grads = l.middle_stage_grads = l.last_stage_grads = Bytes{grads};
  l.recompute = recompute;
  return l;
}

// By hand: PP 2 x DP 2, TP 1, 2 micro-batches, one layer per stage whose forward is 1 ms and
// backward 2 ms (no other kernel), 1 MB activations, 2 MB of gradients per stage; the star's
// routes 1 GB/s and 2 us (two 1 us links), 5 us launch, Simple at 2 us per hop.
//   A message (one step, bus factor 1): m = 5 + (2 + 2) us + 1 MB / 1 GB/s = 1.009 ms.
//   The DP all-reduce of two (2 steps, bus factor 2(n-1)/n = 1): D = 5 + 2 x 4 us + 2 ms = 2.013
//   ms.
// Stage 0 (ranks 0, 1): F0 [0,1]; its blocking send [1, 1+m]; F1 [1+m, 2+m]; its send waits for
// stage 1's receive, posted with stage 1's gradient send after B0 at 4+m, both [4+m, 4+2m]; B0
// [4+2m, 6+2m]; B1's gradient, its receive posted at 6+2m, sent at 7+2m, arrives 7+3m; B1
// [7+3m, 9+3m]; DP [9+3m, 9+3m+D] = 14.040 ms. Stage 1 (ranks 2, 3): F0 [1+m, 2+m], B0
// [2+m, 4+m], F1 [4+2m, 5+2m], B1 [5+2m, 7+2m], its blocking send [7+2m, 7+3m], DP to
// 7+3m+D = 12.040 ms. Exposed (the gap before a kernel to the node before it, the tail to the
// last node): stage 0 PP m + (2+m) + (1+m) = 6.027 ms, DP D = 2.013 ms; stage 1 PP (1+m) + m =
// 3.018 ms, DP m + D = 3.022 ms; compute 6 ms everywhere. (Through the network the two
// pipelines and the two DP rings use disjoint links, so it gives the same times: the closed
// form's difference shows where flows share links, below.)
TEST(MegatronClosedForm, PipelineAndDataParallelByHand) {
  Case c;
  c.layout = layout(1, 2, 2, 2, 1'000'000, 2'000'000);
  StageKernels k;
  k.attention_forward = {FixedWork{ms(1)}};
  k.attention_backward = {FixedWork{ms(2)}};
  c.kernels = k;
  const Outcome graph = on_the_graph(c, workload::CommunicationMode::kClosedForm);
  const Outcome core = on_the_core(c);
  EXPECT_EQ(core.end.count_ns(), 14'040'000);
  expect_same(graph, core, "hand case");
  ASSERT_EQ(core.ranks.size(), 4u);
  for (std::size_t r = 0; r < 4; ++r) {
    const bool first_stage = r < 2;
    const auto& rep = core.ranks[r];
    EXPECT_EQ(rep.finished.count_ns(), first_stage ? 14'040'000 : 12'040'000) << r;
    EXPECT_NEAR(rep.compute_s, 6e-3, 1e-12) << r;
    EXPECT_NEAR(rep.exposed_s[MegatronSource::kTensor], 0, 1e-12) << r;
    EXPECT_NEAR(rep.exposed_s[MegatronSource::kPipeline], first_stage ? 6.027e-3 : 3.018e-3, 1e-12)
        << r;
    EXPECT_NEAR(rep.exposed_s[MegatronSource::kData], first_stage ? 2.013e-3 : 3.022e-3, 1e-12)
        << r;
  }
  Results from_graph, from_core;
  report_exposure(graph.ranks, MegatronSource::phase_names(), 1, from_graph);
  report_exposure(core.ranks, MegatronSource::phase_names(), 1, from_core);
  EXPECT_EQ(from_core.metrics(), from_graph.metrics());
  EXPECT_NEAR(from_core.metrics().at("exposed_pp_s"), 4.5225e-3, 1e-12);
  EXPECT_NEAR(from_core.metrics().at("exposed_dp_s"), 2.5175e-3, 1e-12);
}

// By hand: the host link split among a host's GPUs. DP 2, PP 1, TP 2 (two GPUs per host), one
// micro-batch, forward 1 ms, backward 2 ms, 1 MB of gradients per GPU, no costs, no activation
// (the TP all-reduces carry nothing and take the intra-host route's 2 x 1 us). Each GPU's ring
// of two moves its 1 MB (bus factor 1) over half of the 1 GB/s link: 2 x 2 us + 2 ms = 2.004 ms.
// The iteration: attention forward [0, 1 ms], its two TP all-reduces (2 steps x 1 us each) to
// 1.004, backward's first all-reduce (after the empty MLP) to 1.006, attention backward to
// 3.006, its all-reduce to 3.008, DP to 5.012 ms. Exposed: TP the 6 us before the backward
// kernel; DP the tail after the last kernel, 2 us of all-reduce and 2.004 ms of DP, charged to
// the last node (the DP sync): 2.006 ms.
TEST(MegatronClosedForm, GpusOfAHostShareItsLinkByHand) {
  Case c;
  c.layout = layout(2, 1, 2, 1, 0, 1'000'000);
  c.costs = false;
  StageKernels k;
  k.attention_forward = {FixedWork{ms(1)}};
  k.attention_backward = {FixedWork{ms(2)}};
  c.kernels = k;
  const Outcome graph = on_the_graph(c, workload::CommunicationMode::kClosedForm);
  const Outcome core = on_the_core(c);
  EXPECT_EQ(core.end.count_ns(), 5'012'000);
  expect_same(graph, core, "two GPUs per host");
  for (const auto& rep : core.ranks) {
    EXPECT_NEAR(rep.exposed_s[MegatronSource::kData], 2.006e-3, 1e-12);
    EXPECT_NEAR(rep.exposed_s[MegatronSource::kTensor], 6e-6, 1e-12);
  }
}

// Over many configurations, both DP syncs: equal to the graph's closed form to the nanosecond,
// per rank. Stars, and 2:1 leaf-spines of 4 leaves with 4 or 2 spines (uplinks 0.25 GB/s, slower
// than a host link) where the network mode's flows meet on uplinks: there the closed form (no
// traffic) must differ from the network, so the equality is not the network's.
TEST(MegatronClosedForm, TakesTheGraphsClosedFormIterationAndExposure) {
  struct Config {
    int tp, pp, dp, micro_batches, iterations, layers_per_stage;
    std::int64_t activation, grads;
    bool recompute, operators;
    int spines;  // 0: a star; else 4 leaves of 2 hosts (4 hosts with 2 spines)
  };
  const std::vector<Config> configs = {
      {1, 2, 1, 4, 1, 1, 1'000'000, 0, false, false, 0},          // PP only
      {2, 2, 1, 4, 1, 1, 500'000, 0, false, false, 0},            // TP inside each host
      {1, 1, 2, 2, 1, 1, 0, 1'000'000, false, false, 0},          // DP only
      {1, 1, 3, 2, 1, 1, 0, 1'000'001, false, false, 0},          // uneven ring segments
      {2, 2, 2, 3, 1, 1, 250'000, 2'000'000, true, false, 0},     // TP x PP x DP, recompute
      {4, 2, 3, 5, 2, 1, 100'000, 3'000'000, false, false, 0},    // two iterations
      {1, 3, 1, 4, 1, 1, 1'000'000, 0, false, false, 0},          // a middle stage
      {2, 4, 2, 6, 1, 2, 500'000, 1'000'000, true, false, 0},     // two layers per stage
      {2, 2, 2, 3, 1, 1, 65'536, 1'000'000, true, true, 0},       // tiny GPT's operators
      {2, 4, 2, 6, 1, 1, 500'000, 2'000'000, true, false, 4},     // leaf-spine
      {1, 2, 4, 4, 3, 1, 1'000'000, 4'000'000, false, false, 4},  // three iterations
      {2, 2, 4, 5, 2, 1, 65'536, 1'000'000, true, true, 4},
      {1, 4, 4, 8, 1, 1, 750'000, 3'000'000, false, false, 2}};
  int differs_from_network = 0;
  for (const Config& cf : configs) {
    Case c;
    c.layout = layout(cf.tp, cf.pp, cf.dp, cf.micro_batches, cf.activation, cf.grads, cf.recompute);
    c.layout.iterations = cf.iterations;
    c.layout.layers_per_stage = cf.layers_per_stage;
    c.operators = cf.operators;
    if (cf.spines > 0)
      c.fabric = LeafSpineSpec{4,
                               cf.spines == 4 ? 2 : 4,
                               cf.spines,
                               2.0,
                               LinkSpec{Bandwidth{1e9}, Time::from_seconds(1e-6)},
                               Time::from_seconds(1e-6)};
    for (const DpSync sync : {DpSync::kAllReduce, DpSync::kReduceScatterAllGather}) {
      if (sync == DpSync::kReduceScatterAllGather && cf.dp == 1) continue;
      c.layout.dp_sync = sync;
      const std::string what =
          "TP " + std::to_string(cf.tp) + " PP " + std::to_string(cf.pp) + " DP " +
          std::to_string(cf.dp) + " M " + std::to_string(cf.micro_batches) + " spines " +
          std::to_string(cf.spines) + " sync " + std::to_string(static_cast<int>(sync));
      const Outcome graph = on_the_graph(c, workload::CommunicationMode::kClosedForm);
      EXPECT_GT(graph.end, Time::zero()) << what;
      expect_same(graph, on_the_core(c), what);
      if (cf.spines > 0 && on_the_graph(c, workload::CommunicationMode::kNetwork).end != graph.end)
        ++differs_from_network;
    }
  }
  // Every leaf-spine configuration, with either sync (measured: the 8 differ by ...).
  EXPECT_EQ(differs_from_network, 8);
}

}  // namespace closed_form_test
}  // namespace mlsim::llm_training
