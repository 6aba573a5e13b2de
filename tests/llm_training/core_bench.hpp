#pragma once
// The platform the training core's Megatron tests run on (core_cross_check, core_closed_form,
// core_distributed_optimizer, core_tensor_parallel): a topology of hosts, the flow network on
// it, its link conditions, each host's GPUs, a cost model (a roofline for the operators when
// asked) and Compute, the collective costs both cores pay, and a run on the execution graph. One
// bench, so that the cores and
// the execution graph are compared on the same platform everywhere; a test says what differs
// in a CoreBenchOptions. Header-only.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "models/llm_training/megatron_core_job.hpp"
#include "models/llm_training/megatron_source.hpp"
#include "models/llm_training/transformer_kernels.hpp"
#include "sim_core/collectives/costs.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/hardware/compute.hpp"
#include "sim_core/hardware/cost_model.hpp"
#include "sim_core/hardware/host_speeds.hpp"
#include "sim_core/hardware/node_hardware.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "sim_core/workload/graph_executor.hpp"

namespace mlsim::llm_training::core_bench {

// A small GPT (2 decoder layers, hidden 256, 4 heads, FFN 1024, vocabulary 1000, 128 tokens) as
// transformer_kernels.hpp gives its operators [assumed: small enough for a fast test, every
// operator kind present].
inline TransformerShape tiny_gpt() {
  TransformerShape m;
  m.name = "tiny-gpt";
  m.layers = 2;
  m.hidden = 256;
  m.heads = m.kv_heads = 4;
  m.ffn = 1024;
  m.vocab = 1000;
  m.sequence = 128;
  return m;
}

// Kernels of fixed times: attention forward 1 ms, backward 2 ms per layer, and, unless
// `attention_only` (the hand cases), MLP 1.5 and 3 ms, embedding 0.25 and 0.5 ms, head 0.75 and
// 1.25 ms, so that embedding and head steps are priced [assumed: round, distinct figures].
inline StageKernels fixed_kernels(bool attention_only = false) {
  const auto fixed = [](std::int64_t us) { return std::vector<Work>{FixedWork{Time::us(us)}}; };
  StageKernels k;
  k.attention_forward = fixed(1'000);
  k.attention_backward = fixed(2'000);
  if (attention_only) return k;
  k.mlp_forward = fixed(1'500);
  k.mlp_backward = fixed(3'000);
  k.embedding_forward = fixed(250);
  k.embedding_backward = fixed(500);
  k.head_forward = fixed(750);
  k.head_backward = fixed(1'250);
  return k;
}

// What differs between the tests' platforms. By default: one host per collapsed rank (pp x dp
// hosts of tp GPUs, one TP group per host) on a star of 1 GB/s links without latency; a host's
// GPUs on a 100 GB/s, 1 us NVSwitch; every collective and message pays a 5 us launch and the
// Simple protocol's 2 us per hop [assumed, round figures for the hand computations].
struct CoreBenchOptions {
  std::optional<TopologySpec> fabric = std::nullopt;  // the network instead of the star
  int hosts = 0;                                      // the star's hosts; 0: pp x dp
  Time star_latency = Time::zero();                   // of each of the star's links
  int gpus_per_host = 0;                              // 0: the layout's tp
  bool nvswitch = true;                               // else no intra-node link (one-GPU hosts)
  // The GPU prices `shape`'s operators (OperatorWork, transformer_kernels at micro-batch 1 on a
  // TP group of tp) by a roofline: 100 TFLOP/s fp16, 2 TB/s HBM, every operator at 0.6 of peak
  // FLOPs and 0.8 of the bandwidth, 2 us overhead [assumed: any price will do, both sides of a
  // comparison call the same one]. Without it, only fixed-time kernels run.
  bool operators = false;
  TransformerShape shape = tiny_gpt();
  bool costs = true;  // the launch and protocol costs above; else none
};

struct CoreBench {
  explicit CoreBench(const ParallelLayout& l, CoreBenchOptions o = {})
      : gpus_per_host(o.gpus_per_host > 0 ? o.gpus_per_host : l.tp),
        topo(build_topology(o.fabric ? *o.fabric
                                     : StarSpec{o.hosts > 0 ? o.hosts : l.pp * l.dp,
                                                LinkSpec{Bandwidth{1e9}, o.star_latency}})),
        net(engine, topo, Sharing::kMaxMin),
        links(topo, net),
        speeds(topo.nodes().size()),
        hardware(topo.nodes().size()),
        compute(engine, hardware, speeds, cost_model) {
    gpu.name = "core-bench-gpu";
    gpu.peak[Dtype::kFp16] = FlopRate{100e12};
    gpu.hbm_bandwidth = Bandwidth{2e12};
    if (o.operators) {
      auto roofline = std::make_unique<RooflineProvider>();
      const StageKernels k = transformer_kernels(o.shape, 1, l.tp);
      for (const auto* group :
           {&k.attention_forward, &k.mlp_forward, &k.attention_backward, &k.mlp_backward,
            &k.embedding_forward, &k.embedding_backward, &k.head_forward, &k.head_backward})
        for (const Work& w : *group)
          if (const auto* op = std::get_if<OperatorWork>(&w))
            roofline->add(gpu.name, std::string(op->op),
                          {RooflineRegime{0, true, 0.6, 0.8, 2e-6, 1}});
      cost_model.add(std::move(roofline));
    }
    std::optional<IntraNodeLink> intra_node;
    if (o.nvswitch)
      intra_node = IntraNodeLink{IntraNodeFabric::kNvSwitch, Bandwidth{1e11}, Time::us(1), "test"};
    for (NodeId h : topo.hosts())
      hardware.set_host(
          h, HostHardware{
                 .gpu = &gpu, .gpus = gpus_per_host, .nic = nullptr, .intra_node = intra_node});
    if (!o.costs) return;
    costs.launch = Time::us(5);
    costs.of(collectives::Protocol::kSimple) = {true, Time::us(2), 1.0};
  }
  CoreBench(const CoreBench&) = delete;
  CoreBench& operator=(const CoreBench&) = delete;

  // Per core worker, the host of its first GPU (GPU g on host g / gpus_per_host, the graph's
  // placement): the TP group's (collapsed, GPU tp x r) or the GPU's own (not collapsed).
  std::vector<NodeId> worker_hosts(const ParallelLayout& l) const {
    const int lanes = l.collapse_tensor_parallel ? 1 : l.tp;
    const int step = l.collapse_tensor_parallel ? l.tp : 1;
    std::vector<NodeId> out;
    for (int w = 0; w < l.pp * l.dp * lanes; ++w)
      out.push_back(topo.hosts().at(static_cast<std::size_t>(w * step / gpus_per_host)));
    return out;
  }

  // The training core's options on this platform: its collectives and messages pay `costs`
  // (as the graph's do) and see the links' conditions; a test sets the rest.
  MegatronCoreOptions core_options() const {
    MegatronCoreOptions options;
    options.costs = costs;
    options.links = &links;
    return options;
  }

  // `l` with kernels `k` run to its end on the execution graph (MegatronSource on a
  // GraphExecutor, in `mode`, paying `costs`), for the test to check.
  struct GraphRun {
    std::unique_ptr<MegatronSource> source;
    std::unique_ptr<workload::GraphExecutor> executor;
    Time end;  // the last rank's finish
  };
  GraphRun run_graph(const ParallelLayout& l, const StageKernels& k,
                     workload::CommunicationMode mode = workload::CommunicationMode::kNetwork) {
    GraphRun run{std::make_unique<MegatronSource>(l, k), nullptr, Time::zero()};
    workload::ExecutorOptions options;
    options.mode = mode;
    options.costs = costs;
    run.executor = std::make_unique<workload::GraphExecutor>(engine, net, compute, links,
                                                             *run.source, options, "graph");
    run.executor->start();
    engine.run();
    for (const auto& rep : run.executor->reports()) run.end = std::max(run.end, rep.finished);
    return run;
  }

  int gpus_per_host;  // every host's GPUs
  GpuSpec gpu;        // every host's (HostHardware points here)
  Engine engine;
  Topology topo;
  FluidNetwork net;
  LinkConditions links;
  HostSpeeds speeds;
  NodeHardware hardware;
  CostModel cost_model;
  Compute compute;
  collectives::CostModel costs;  // both cores' collectives and messages pay these
};

}  // namespace mlsim::llm_training::core_bench
