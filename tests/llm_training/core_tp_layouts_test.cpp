// Megatron-LM layouts the training core refused before 2026-12-07 (issue 13): several TP groups
// on one host (TP below the host's GPUs), the closed form with TP not collapsed, and a TP group
// over several hosts (TP above the hosts' GPUs, not collapsed). Each by hand, and against the
// execution graph run the same way on several configurations: iteration, and per rank its
// finish, compute and exposed time per phase, equal to the nanosecond (as doubles: the same
// nanosecond intervals summed in the same order on both cores).
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "models/llm_training/megatron_core_job.hpp"
#include "models/llm_training/megatron_source.hpp"
#include "models/llm_training/register.hpp"
#include "sim_core/hardware/compute.hpp"
#include "sim_core/hardware/cost_model.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "sim_core/workload/graph_executor.hpp"
#include "tests/llm_training/core_bench.hpp"
#include "tests/support/run_json.hpp"

namespace mlsim::llm_training {
namespace tp_layouts_test {

using core_bench::CoreBench;
using workload::CommunicationMode;

Time ms(double v) {
  return Time::from_seconds(v / 1e3);
}

// Kernels of fixed times: per layer attention 1 ms and MLP 1 ms forward, 2 ms and 2 ms backward
// (the hand cases); `full` adds a 0.25 / 0.5 ms embedding and a 0.75 / 1.25 ms head and makes
// the MLP 1.5 / 3 ms.
StageKernels kernels(bool full) {
  StageKernels k;
  k.attention_forward = {FixedWork{ms(1)}};
  k.attention_backward = {FixedWork{ms(2)}};
  k.mlp_forward = {FixedWork{ms(full ? 1.5 : 1)}};
  k.mlp_backward = {FixedWork{ms(full ? 3 : 2)}};
  if (!full) return k;
  k.embedding_forward = {FixedWork{ms(0.25)}};
  k.embedding_backward = {FixedWork{ms(0.5)}};
  k.head_forward = {FixedWork{ms(0.75)}};
  k.head_backward = {FixedWork{ms(1.25)}};
  return k;
}

struct Setting {
  int gpus_per_host = 8;
  CommunicationMode mode = CommunicationMode::kNetwork;
  std::optional<TopologySpec> fabric{};
  Time link_latency = Time::from_seconds(1e-6);
};

struct CoreRun {
  Time end;
  std::vector<workload::RankReport> ranks;
  std::uint64_t messages = 0;
  std::int64_t network_bytes = 0;  // DP and message bytes the network delivered
};

// Hosts of `gpus_per_host` GPUs each, as many as tp x pp x dp GPUs need, on a star of 1 GB/s
// links with `link_latency` or on `fabric`; a host's GPUs on core_bench's NVSwitch, and its
// launch and protocol costs.
CoreBench bench(const ParallelLayout& l, const Setting& s) {
  return CoreBench(l, {.fabric = s.fabric,
                       .hosts = (l.tp * l.pp * l.dp + s.gpus_per_host - 1) / s.gpus_per_host,
                       .star_latency = s.link_latency,
                       .gpus_per_host = s.gpus_per_host});
}

CoreRun on_the_graph(const ParallelLayout& l, const StageKernels& k, const Setting& s) {
  CoreBench b = bench(l, s);
  const CoreBench::GraphRun run = b.run_graph(l, k, s.mode);
  EXPECT_TRUE(run.executor->done());
  return {run.end, run.executor->reports(), 0, run.executor->network_bytes_delivered()};
}

CoreRun on_the_core(const ParallelLayout& l, const StageKernels& k, const Setting& s,
                    bool merged = false) {
  CoreBench b = bench(l, s);
  MegatronCoreOptions options = b.core_options();
  options.closed_form = s.mode == CommunicationMode::kClosedForm;
  options.merge_op_steps = merged;
  MegatronCoreJob job(b.engine, b.net, b.compute, l, k, b.worker_hosts(l), options,
                      [] { ADD_FAILURE(); });
  job.start();
  b.engine.run();
  EXPECT_TRUE(job.finished());
  return {job.finish_time(), job.rank_reports(), job.messages(),
          job.gradients().bytes_delivered() + job.message_bytes_delivered() +
              job.tensor_bytes_delivered()};
}

void expect_same_ranks(const CoreRun& graph, const CoreRun& core, const std::string& what) {
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
                      std::int64_t grads, bool collapsed) {
  ParallelLayout l;
  l.tp = tp;
  l.pp = pp;
  l.dp = dp;
  l.micro_batches = micro_batches;
  l.activation = Bytes{activation};
  l.first_stage_grads = l.middle_stage_grads = l.last_stage_grads = Bytes{grads};
  l.collapse_tensor_parallel = collapsed;
  return l;
}

constexpr std::size_t kTp = MegatronSource::kTensor, kPp = MegatronSource::kPipeline,
                      kDp = MegatronSource::kData;

void expect_report(const workload::RankReport& r, Time finished, double compute_ms, double tp_ms,
                   double pp_ms, double dp_ms, const std::string& what) {
  EXPECT_EQ(r.finished, finished) << what;
  EXPECT_NEAR(r.compute_s, compute_ms / 1e3, 1e-12) << what;
  EXPECT_NEAR(r.exposed_s[kTp], tp_ms / 1e3, 1e-12) << what;
  EXPECT_NEAR(r.exposed_s[kPp], pp_ms / 1e3, 1e-12) << what;
  EXPECT_NEAR(r.exposed_s[kDp], dp_ms / 1e3, 1e-12) << what;
}

// (1) Two TP groups on one host, by hand: TP 2 x PP 2 x DP 1 on one host of 4 GPUs, one
// micro-batch, one layer per stage (attention and MLP 1 ms forward, 2 ms backward each), 1000 B
// activations. Everything stays inside the host, priced over its NVSwitch (100 GB/s, 1 us) with
// the 5 us launch and 2 us per hop: a TP all-reduce of 2 GPUs is 5 + 2 x (2 + 1) us + 1000 B /
// 100 GB/s = 11.010 us; the pipeline message, a send/recv of one step, 5 + 2 + 1 us + 10 ns =
// 8.010 us. A forward is attention, all-reduce, MLP, all-reduce: 2.022020 ms; a backward MLP,
// all-reduce, attention, all-reduce: 4.022020 ms.
//   stage 0: forward 0..2.022020, its activation at stage 1 at 2.030030;
//   stage 1: forward ..4.052050, backward ..8.074070, its gradient at stage 0 at 8.082080 (stage
//            1 ends: its send blocks until delivered);
//   stage 0: backward ..12.104100 ms, the iteration.
// Exposure (docs/llm_training.md, "Exposure, defined"): stage 0 computes 6 ms, waits 11.010 us
// after three of its all-reduces (TP 33.030 us: two between kernels, the last one its tail at
// DP 1) and from its forward's end (2.011010, before the last all-reduce) to 8.082080 for the
// gradient (PP 6.071070 ms); stage 1 waits 2.030030 ms for the activation (PP), 11.010 us after
// three all-reduces (TP 33.030 us) and 19.020 us for its last all-reduce and blocking send (the
// tail, the send's phase: PP 2.049050 ms in all). The same in both modes and collapsed or not
// (nothing crosses the network; the graph's symmetry holds).
TEST(MegatronTpLayoutsOnTheCore, TwoTensorGroupsOnOneHostByHand) {
  const StageKernels k = kernels(false);
  for (const CommunicationMode mode : {CommunicationMode::kNetwork, CommunicationMode::kClosedForm})
    for (const bool collapsed : {true, false}) {
      const std::string what =
          std::string(mode == CommunicationMode::kNetwork ? "network" : "closed") +
          (collapsed ? " collapsed" : " not collapsed");
      const ParallelLayout l = layout(2, 2, 1, 1, 1000, 0, collapsed);
      const Setting s{4, mode};
      const CoreRun graph = on_the_graph(l, k, s), core = on_the_core(l, k, s);
      EXPECT_EQ(core.end, Time::ns(12'104'100)) << what;
      expect_same_ranks(graph, core, what);
      EXPECT_EQ(core.network_bytes, 0) << what;
      ASSERT_EQ(core.ranks.size(), collapsed ? 2u : 4u) << what;
      for (std::size_t w = 0; w < core.ranks.size(); ++w) {
        if (w < core.ranks.size() / 2)
          expect_report(core.ranks[w], Time::ns(12'104'100), 6, 0.033030, 6.071070, 0, what);
        else
          expect_report(core.ranks[w], Time::ns(8'082'080), 6, 0.033030, 2.049050, 0, what);
      }
    }
}

// (1) in the closed form, by hand: TP 2 x PP 2 x DP 2 on two hosts of 4 GPUs (stage 0's two TP
// groups on host 0, stage 1's on host 1), 1 MB of gradients per GPU, on a star of 1 GB/s links
// with 1 us latency (2 us routes). The DP groups stay inside their host: an all-reduce of 2 GPUs
// over the NVSwitch, 5 + 2 x (2 + 1) us + 1 MB / 100 GB/s = 21 us; the messages cross to the
// other host, each GPU's share of the host link a quarter (4 GPUs): 5 + 2 + 2 us + 1000 B /
// 0.25 GB/s = 13 us. Kernels and all-reduces as above.
//   stage 0: forward ..2.022020, activations at 2.035020;
//   stage 1: forward ..4.057040, backward ..8.079060, gradients at 8.092060, then its DP sync
//            (after the blocking send, as Megatron) ..8.113060;
//   stage 0: backward ..12.114080, DP sync ..12.135080 ms, the iteration.
// Stage 0: compute 6 ms, TP 22.020 us (two all-reduces before a kernel), PP 2.011010 ->
// 8.092060 = 6.081050 ms, DP the tail after its last kernel (12.103070 -> 12.135080) 32.010 us;
// stage 1: PP 2.035020 ms (waiting for the activation), TP 33.030 us, DP the tail 8.068050 ->
// 8.113060 = 45.010 us. Collapsed or not (3): the same (each GPU's message and DP group priced
// as the collapsed rank's one GPU share).
TEST(MegatronTpLayoutsOnTheCore, IntraAndInterHostClosedFormsMixedByHand) {
  const StageKernels k = kernels(false);
  for (const bool collapsed : {true, false}) {
    const std::string what = collapsed ? "collapsed" : "not collapsed";
    const ParallelLayout l = layout(2, 2, 2, 1, 1000, 1'000'000, collapsed);
    const Setting s{4, CommunicationMode::kClosedForm};
    const CoreRun graph = on_the_graph(l, k, s), core = on_the_core(l, k, s);
    EXPECT_EQ(core.end, Time::ns(12'135'080)) << what;
    expect_same_ranks(graph, core, what);
    ASSERT_EQ(core.ranks.size(), collapsed ? 4u : 8u) << what;
    for (std::size_t w = 0; w < core.ranks.size(); ++w) {
      if (w < core.ranks.size() / 2)
        expect_report(core.ranks[w], Time::ns(12'135'080), 6, 0.022020, 6.081050, 0.032010, what);
      else
        expect_report(core.ranks[w], Time::ns(8'113'060), 6, 0.033030, 2.035020, 0.045010, what);
    }
  }
}

// (2) A TP group over two hosts, by hand: TP 2 x PP 1 x DP 2, not collapsed, on four one-GPU
// hosts (TP groups {0, 1} and {2, 3}, DP groups {0, 2} and {1, 3}), 1000 B activations, 1 MB
// of gradients. Closed form, 1 us links (2 us routes), one GPU per host link: a TP all-reduce of
// 2 GPUs is 5 + 2 x (2 + 2) us + 1000 B / 1 GB/s = 14 us; the DP all-reduce 5 + 2 x (2 + 2) us +
// 1 MB / 1 GB/s = 1.013 ms. Forward 2.028 ms, backward 4.028 ms, DP ..7.069 ms, every rank.
// Exposure: compute 6 ms, TP 42 us (three all-reduces before a kernel), DP 14 us + 1.013 ms.
// Through the network, on zero-latency links: each all-reduce a ring of two steps of 500 B
// between the two hosts, 5 us + 2 x (2 us + 0.5 us) = 10 us; the DP ring two steps of 0.5 MB,
// 5 us + 2 x (2 us + 0.5 ms) = 1.009 ms: forward 2.020, backward 4.020, DP ..7.049 ms; TP 30 us,
// DP 10 us + 1.009 ms.
TEST(MegatronTpLayoutsOnTheCore, TensorGroupOverTwoHostsByHand) {
  const StageKernels k = kernels(false);
  const ParallelLayout l = layout(2, 1, 2, 1, 1000, 1'000'000, false);
  {
    const Setting s{1, CommunicationMode::kClosedForm};
    const CoreRun graph = on_the_graph(l, k, s), core = on_the_core(l, k, s);
    EXPECT_EQ(core.end, Time::ns(7'069'000));
    expect_same_ranks(graph, core, "closed form");
    ASSERT_EQ(core.ranks.size(), 4u);
    for (const auto& r : core.ranks)
      expect_report(r, Time::ns(7'069'000), 6, 0.042, 0, 1.027, "closed form");
  }
  {
    const Setting s{1, CommunicationMode::kNetwork, std::nullopt, Time::zero()};
    const CoreRun graph = on_the_graph(l, k, s), core = on_the_core(l, k, s);
    EXPECT_EQ(core.end, Time::ns(7'049'000));
    expect_same_ranks(graph, core, "network");
    EXPECT_EQ(core.network_bytes, graph.network_bytes);
    ASSERT_EQ(core.ranks.size(), 4u);
    for (const auto& r : core.ranks)
      expect_report(r, Time::ns(7'049'000), 6, 0.030, 0, 1.019, "network");
  }
}

struct Config {
  int tp, pp, dp, micro_batches, iterations, gpus_per_host;
  std::int64_t activation, grads;
  bool recompute, distributed_optimizer;
  int leaves = 0, hosts_per_leaf = 0, spines = 0;  // 0: the star
};

std::string describe(const Config& c, bool collapsed, CommunicationMode mode) {
  return "TP " + std::to_string(c.tp) + " PP " + std::to_string(c.pp) + " DP " +
         std::to_string(c.dp) + " M " + std::to_string(c.micro_batches) + " x" +
         std::to_string(c.iterations) + ", " + std::to_string(c.gpus_per_host) + " GPUs/host" +
         (c.leaves > 0 ? ", leaf-spine" : ", star") + (c.recompute ? ", recompute" : "") +
         (c.distributed_optimizer ? ", distributed optimizer" : "") +
         (collapsed ? ", collapsed" : ", not collapsed") +
         (mode == CommunicationMode::kNetwork ? ", network" : ", closed form");
}

CoreRun run_config(const Config& c, bool collapsed, CommunicationMode mode, bool graph,
                   const StageKernels& k) {
  ParallelLayout l = layout(c.tp, c.pp, c.dp, c.micro_batches, c.activation, c.grads, collapsed);
  l.iterations = c.iterations;
  l.recompute = c.recompute;
  if (c.distributed_optimizer) l.dp_sync = DpSync::kReduceScatterAllGather;
  // The fabric is built in place, not assigned: GCC 12 at -O1 (the sanitizer build) warns that
  // assigning into an empty optional<variant> reads the variant's index uninitialised.
  const Setting s{
      c.gpus_per_host, mode,
      c.leaves > 0
          ? std::optional<TopologySpec>(
                std::in_place, LeafSpineSpec{c.leaves, c.hosts_per_leaf, c.spines, 2.0,
                                             LinkSpec{Bandwidth{1e9}, Time::from_seconds(1e-6)},
                                             Time::from_seconds(1e-6)})
          : std::nullopt};
  return graph ? on_the_graph(l, k, s) : on_the_core(l, k, s);
}

// (1) cross-check: several TP groups per host (TP 1, 2 or 4 on hosts of 4 or 8 GPUs), so that
// messages and DP groups are inside a host, across hosts, or (closed form) DP groups with several
// GPUs on each of several hosts; both modes where the graph runs them (through the network a DP
// group must be inside one host or on distinct hosts), collapsed and not, both DP syncs,
// recomputation, several iterations, stars and 2:1 leaf-spines.
TEST(MegatronTpLayoutsOnTheCore, SeveralTensorGroupsPerHostTakeTheGraphsTimes) {
  const std::vector<Config> configs = {
      // All on one host: messages and DP groups inside it.
      {2, 2, 2, 3, 1, 8, 500'000, 2'000'000, false, false},
      // DP groups inside a host, messages across hosts (stage s on host s).
      {2, 2, 2, 4, 2, 4, 250'000, 1'000'001, true, false},
      {1, 4, 4, 6, 1, 4, 400'000, 3'000'000, false, true},
      {2, 3, 2, 5, 1, 4, 300'000, 2'000'000, true, true, 2, 2, 2},
      // Two stages per host: some messages inside it, some across.
      {2, 4, 1, 6, 1, 4, 500'000, 0, false, false},
      {1, 4, 2, 5, 2, 4, 400'000, 1'500'000, true, false, 2, 1, 2},
      {4, 4, 1, 8, 1, 8, 750'000, 0, true, false, 2, 1, 2},
  };
  const std::vector<Config> closed_only = {
      // DP groups of 4 over two hosts, two GPUs on each (the graph refuses it through the
      // network): the inter-host closed form over the repeated hosts.
      {2, 2, 4, 4, 1, 4, 500'000, 2'000'000, false, false},
      {1, 2, 8, 3, 2, 4, 250'000, 1'000'000, true, true},
  };
  const StageKernels k = kernels(true);
  int runs = 0;
  for (const bool network : {true, false}) {
    const CommunicationMode mode =
        network ? CommunicationMode::kNetwork : CommunicationMode::kClosedForm;
    std::vector<Config> all = configs;
    if (!network) all.insert(all.end(), closed_only.begin(), closed_only.end());
    for (const Config& c : all)
      for (const bool collapsed : {true, false}) {
        if (c.tp == 1 && !collapsed) continue;
        const std::string what = describe(c, collapsed, mode);
        const CoreRun graph = run_config(c, collapsed, mode, true, k);
        const CoreRun core = run_config(c, collapsed, mode, false, k);
        EXPECT_GT(graph.end, Time::zero()) << what;
        expect_same_ranks(graph, core, what);
        EXPECT_EQ(core.network_bytes, graph.network_bytes) << what;
        ++runs;
      }
  }
  EXPECT_EQ(runs, 27);
}

// (3) cross-check: TP not collapsed in the closed form, one TP group per host (TP = the host's
// GPUs), against the graph not collapsed and the core collapsed: equal to the nanosecond.
TEST(MegatronTpLayoutsOnTheCore, ClosedFormNotCollapsedTakesTheGraphsTimes) {
  const std::vector<Config> configs = {
      {2, 2, 1, 4, 1, 2, 500'000, 0, false, false},
      {2, 2, 2, 3, 1, 2, 250'000, 2'000'000, true, false},
      {4, 2, 3, 5, 1, 4, 100'000, 3'000'000, false, true},
      {2, 3, 2, 4, 2, 2, 400'000, 1'000'001, true, false},
      {2, 4, 2, 6, 1, 2, 500'000, 1'000'000, true, true, 4, 2, 4},
      {4, 2, 4, 4, 2, 4, 1'000'000, 4'000'000, false, false, 4, 2, 4},
  };
  const StageKernels k = kernels(true);
  for (const Config& c : configs) {
    const std::string what = describe(c, false, CommunicationMode::kClosedForm);
    const CoreRun graph = run_config(c, false, CommunicationMode::kClosedForm, true, k);
    const CoreRun core = run_config(c, false, CommunicationMode::kClosedForm, false, k);
    EXPECT_GT(graph.end, Time::zero()) << what;
    expect_same_ranks(graph, core, what);
    // The closed form prices each GPU's share as the collapsed rank's: the symmetry holds.
    EXPECT_EQ(run_config(c, true, CommunicationMode::kClosedForm, false, k).end, core.end) << what;
  }
}

// (2) cross-check: TP groups over several hosts (TP 2 or 4 on hosts of 1 or 2 GPUs, not
// collapsed): through the network when each member is on a host of its own (rings among the
// hosts, labelled as the graph's groups), in the closed form also with several members per host.
TEST(MegatronTpLayoutsOnTheCore, TensorGroupsOverHostsTakeTheGraphsTimes) {
  const std::vector<Config> both = {
      {2, 2, 1, 4, 1, 1, 500'000, 0, false, false},
      {2, 2, 2, 3, 2, 1, 250'000, 2'000'000, true, false},
      {4, 2, 2, 4, 1, 1, 100'000, 1'000'000, false, true},
      {2, 2, 2, 5, 1, 1, 400'000, 1'000'001, true, true, 4, 2, 2},
      {2, 4, 1, 6, 1, 1, 300'000, 0, false, false, 4, 2, 4},
  };
  const std::vector<Config> closed_only = {
      {4, 2, 1, 4, 1, 2, 500'000, 0, false, false},
      {4, 2, 2, 3, 2, 2, 250'000, 2'000'000, true, true},
  };
  const StageKernels k = kernels(true);
  int runs = 0;
  for (const bool network : {true, false}) {
    const CommunicationMode mode =
        network ? CommunicationMode::kNetwork : CommunicationMode::kClosedForm;
    std::vector<Config> all = both;
    if (!network) all.insert(all.end(), closed_only.begin(), closed_only.end());
    for (const Config& c : all) {
      const std::string what = describe(c, false, mode);
      const CoreRun graph = run_config(c, false, mode, true, k);
      const CoreRun core = run_config(c, false, mode, false, k);
      EXPECT_GT(graph.end, Time::zero()) << what;
      expect_same_ranks(graph, core, what);
      EXPECT_EQ(core.network_bytes, graph.network_bytes) << what;
      ++runs;
    }
  }
  EXPECT_EQ(runs, 12);
}

// Through the loader and runner: the shipped GPT-3 1024-GPU scenario (NCCL costs, roofline
// operators, 96 layers on 16 stages, recomputation) at 64 sequences, on both cores in the new
// layouts: TP 4 on its 8-GPU hosts in the closed form (DP groups over four hosts, two GPUs on
// each) collapsed and not, and through the network at DP 2 (DP groups inside a host); TP 8 not
// collapsed in the closed form; TP 16 not collapsed (each TP group on two hosts) in the closed
// form; TP 2 not collapsed on one-GPU hosts through the network (TP rings between hosts). Every
// metric both report (iteration, mean and critical rank's compute and exposure) equal.
TEST(LlmTrainingTpLayouts, TheTrainingCoreGivesTheGraphsIterationOnTheShippedModel) {
  const std::filesystem::path gpt3 =
      std::filesystem::path(MLSIM_SOURCE_DIR) / "workloads/scenarios/llm_training_gpt3_1024.json";
  const Registries registries = test::registries_with(register_llm_training);
  auto run = [&](std::vector<std::string> sets) {
    ScenarioRequest request{gpt3, {}, {}};
    for (const auto& s : sets) {
      const auto eq = s.find('=');
      request.overrides.push_back(
          {s.substr(0, eq), nlohmann::json::parse(s.substr(eq + 1)), s.substr(0, eq)});
    }
    return run_scenario(load_scenario(request, registries), registries);
  };
  const std::string closed = "system.communication=\"closed_form\"",
                    network = "system.communication=\"network\"",
                    apart = "system.collapse_tensor_parallel=false";
  const std::vector<std::vector<std::string>> layouts = {
      {closed, "system.tp=4"},
      {closed, "system.tp=4", apart},
      {network, "system.tp=4", "system.dp=2"},
      {network, "system.tp=4", "system.dp=2", apart},
      {closed, apart},
      {closed, "system.tp=16", "system.dp=4", apart},
      {network, "system.tp=2", "system.dp=4", "topology.hardware.gpus_per_host=1", apart},
  };
  for (const auto& sets : layouts) {
    std::string what;
    for (const auto& s : sets) what += s + " ";
    auto with = [&](const char* core) {
      auto s = sets;
      s.push_back("system.global_batch=64");
      s.push_back(std::string("system.core=\"") + core + "\"");
      return run(s);
    };
    const RunOutput graph = with("graph"), core = with("training");
    const auto& g = graph.results.metrics();
    const auto& c = core.results.metrics();
    EXPECT_EQ(c.at("completed"), 1) << what;
    EXPECT_GT(c.at("iteration_time_s"), 0) << what;
    for (const char* name :
         {"iteration_time_s", "messages", "compute_s", "exposed_tp_s", "exposed_pp_s",
          "exposed_dp_s", "critical_rank_compute_s", "critical_rank_exposed_tp_s",
          "critical_rank_exposed_pp_s", "critical_rank_exposed_dp_s", "model_tflops_per_gpu"})
      EXPECT_EQ(c.at(name), g.at(name)) << name << ": " << what;
    EXPECT_EQ(core.results.details().at("critical_rank"),
              graph.results.details().at("critical_rank"))
        << what;
  }
}

}  // namespace tp_layouts_test
}  // namespace mlsim::llm_training
