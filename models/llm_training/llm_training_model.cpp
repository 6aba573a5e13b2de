#include "models/llm_training/llm_training_model.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <optional>
#include <string>

#include "models/llm_training/graph_report.hpp"
#include "models/llm_training/megatron_core_job.hpp"
#include "models/llm_training/policies.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/collectives/read_costs.hpp"
#include "sim_core/hardware/compute.hpp"
#include "sim_core/hardware/cost_model.hpp"
#include "sim_core/run/simulation_model.hpp"

namespace mlsim::llm_training {

namespace {

TransformerShape read_shape(JsonReader m) {
  TransformerShape s;
  s.name = m.string("name");
  s.llama = m.choice("architecture", {"gpt", "llama"}) == "llama";
  s.layers = static_cast<int>(m.integer("layers", 1, 10'000));
  s.hidden = static_cast<int>(m.integer("hidden", 1, 1 << 20));
  s.heads = static_cast<int>(m.integer("heads", 1, 1 << 16));
  s.kv_heads = static_cast<int>(m.integer_or("kv_heads", s.heads, 1, s.heads));
  s.ffn = static_cast<int>(m.integer("ffn", 1, 1 << 22));
  s.vocab = static_cast<int>(m.integer("vocab", 1, 1 << 24));
  s.sequence = static_cast<int>(m.integer("sequence", 1, 1 << 20));
  m.ignore("_source");
  if (s.hidden % s.heads != 0)
    throw InputError(m.path_of("heads"),
                     fmt::format("hidden {} is not a multiple of {} heads", s.hidden, s.heads));
  if (s.heads % s.kv_heads != 0)
    throw InputError(m.path_of("kv_heads"),
                     fmt::format("{} heads do not share {} KV heads evenly", s.heads, s.kv_heads));
  m.finish();
  return s;
}

// Sum of what a GPU of the stage holds, times bytes per gradient.
Bytes gradient_bytes(double parameters, double bytes_per_parameter) {
  return Bytes{static_cast<std::int64_t>(parameters * bytes_per_parameter)};
}

// Per GPU and the model FLOPs rates of an iteration of `iteration_s`.
void report_rates(const TrainingParams& p, double iteration_s, Results& out) {
  const double gpus = static_cast<double>(p.layout.tp) * p.layout.pp * p.layout.dp;
  out.set_metric("gpus", gpus);
  // Model FLOPs per GPU-second: 3x the forward FLOPs per sample (forward and a backward of
  // twice its cost); with recomputation Megatron (Narayanan et al. SC'21) counts 4x, which
  // is their "achieved teraFLOP/s per GPU".
  const double fwd = forward_flops(p.shape, 1) * p.global_batch;
  if (iteration_s > 0) {
    out.set_metric("model_tflops_per_gpu", 3 * fwd / iteration_s / gpus / 1e12);
    out.set_metric("megatron_tflops_per_gpu",
                   (p.layout.recompute ? 4 : 3) * fwd / iteration_s / gpus / 1e12);
  }
}

// What both cores report of the run's set-up; each adds its own count to "layout".
void report_setup(const TrainingParams& p, Results& out) {
  auto& d = out.details();
  d["communication"] = communication_description(p.executor.mode);
  d["model"] = p.shape.name;
  d["layout"] = {{"tp", p.layout.tp},
                 {"pp", p.layout.pp},
                 {"dp", p.layout.dp},
                 {"micro_batches_per_pipeline", p.layout.micro_batches}};
}

class LlmTraining {
 public:
  LlmTraining(ModelEnv& env, const TrainingParams& p, CoreChoice choice)
      : params_(p),
        choice_(std::move(choice)),
        source_(p.layout, transformer_kernels(p.shape, p.micro_batch, p.layout.tp)),
        executor_(env.engine, env.network, env.compute, env.links, source_, p.executor,
                  "system.tp") {}

  void start() { executor_.start(); }
  double progress() const { return executor_.progress(); }

  void report(Results& out) const {
    const double iteration_s = report_graph_run(executor_, source_, params_.layout.iterations, out);
    report_rates(params_, iteration_s, out);
    report_setup(params_, out);
    auto& layout = out.details()["layout"];
    layout["graph_ranks"] = source_.ranks();
    layout["collapse_tensor_parallel"] = params_.layout.collapse_tensor_parallel;
    report_core_choice(choice_, out);
  }

 private:
  const TrainingParams& params_;
  CoreChoice choice_;
  MegatronSource source_;
  workload::GraphExecutor executor_;
};

// The same iteration on the training core (megatron_core_job.hpp), through the network or in
// the graph's closed form.
class LlmCoreTraining {
 public:
  LlmCoreTraining(ModelEnv& env, const TrainingParams& p, std::vector<NodeId> hosts,
                  bool stage_as_one_tensor, bool merge_op_steps, CoreChoice choice)
      : params_(p),
        choice_(std::move(choice)),
        job_(env.engine, env.network, env.compute, p.layout,
             transformer_kernels(p.shape, p.micro_batch, p.layout.tp), std::move(hosts),
             MegatronCoreOptions{p.executor.costs, &env.links, stage_as_one_tensor, merge_op_steps,
                                 p.executor.mode == workload::CommunicationMode::kClosedForm},
             [this] { failed_ = true; }) {}

  void start() { job_.start(); }
  double progress() const { return job_.progress(); }

  void report(Results& out) const {
    const double iteration_s =
        job_.finished() ? job_.finish_time().seconds() / params_.layout.iterations : 0;
    out.set_metric("completed", job_.finished() ? 1 : 0);
    out.set_metric("iteration_time_s", iteration_s);
    // The graph's per-phase breakdown, computed the same way (megatron_core_job.hpp, Exposure).
    if (job_.finished())
      report_exposure(job_.rank_reports(), MegatronSource::phase_names(), params_.layout.iterations,
                      out);
    // The graph's counts but `nodes` (the core runs no graph: its ops instead), with the same
    // meaning (MegatronCoreJob::counts).
    const workload::ExecutorCounts counts = job_.counts();
    out.set_metric("ops", static_cast<double>(job_.ops()));
    out.set_metric("kernels", static_cast<double>(counts.kernels));
    out.set_metric("collectives", static_cast<double>(counts.collectives));
    out.set_metric("messages", static_cast<double>(counts.messages));
    out.set_metric("network_collectives", static_cast<double>(counts.network_collectives));
    out.set_metric("dp_bytes_delivered", static_cast<double>(job_.gradients().bytes_delivered()));
    report_rates(params_, iteration_s, out);
    report_setup(params_, out);
    report_core_choice(choice_, out);
    auto& d = out.details();
    d["layout"]["core_workers"] = params_.layout.pp * params_.layout.dp *
                                  (params_.layout.collapse_tensor_parallel ? 1 : params_.layout.tp);
    d["layout"]["collapse_tensor_parallel"] = params_.layout.collapse_tensor_parallel;
    if (failed_) d["failed"] = "a transfer found no route";
  }

 private:
  const TrainingParams& params_;
  CoreChoice choice_;
  bool failed_ = false;
  MegatronCoreJob job_;
};

// Where the training core runs each worker (rank order), as GraphExecutor places the graph's
// ranks: the collapsed rank's TP group (pp x dp workers, GPUs TP x r ..) or, with TP not
// collapsed, each GPU (pp x dp x tp workers), on the topology's hosts in order with the GPUs
// topology.hardware gives each. Several workers may share a host (TP below its GPUs); not
// collapsed, a TP group may span hosts. Returns the hosts, or the error of a layout the graph
// refuses too (at system.tp): more GPUs than the hosts hold, a collapsed TP group over several
// hosts, and, through the network, a group (TP not collapsed, or a stage's DP group) with several
// GPUs on one host and others elsewhere (GraphExecutor's constructor).
struct Placement {
  std::vector<NodeId> hosts;
  std::string error;  // empty: placed
};

Placement place_core_workers(const Topology& topology, const NodeHardware& hardware,
                             const ParallelLayout& l, workload::CommunicationMode mode) {
  std::vector<NodeId> hosts;
  std::vector<std::int64_t> first_gpu;
  std::int64_t gpus = 0;
  for (NodeId h : topology.hosts()) {
    hosts.push_back(h);
    first_gpu.push_back(gpus);
    const HostHardware* hw = hardware.host(h);
    gpus += hw != nullptr ? hw->gpus : 1;
  }
  Placement out;
  const std::int64_t groups = static_cast<std::int64_t>(l.pp) * l.dp;
  if (groups * l.tp > gpus) {
    out.error = fmt::format("{} TP groups of {} GPUs need {} GPUs, the topology's hosts hold {}",
                            groups, l.tp, groups * l.tp, gpus);
    return out;
  }
  const auto host_of = [&](std::int64_t gpu) {
    return static_cast<std::size_t>(std::upper_bound(first_gpu.begin(), first_gpu.end(), gpu) -
                                    first_gpu.begin() - 1);
  };
  for (std::int64_t r = 0; r < groups; ++r) {
    const std::int64_t first = r * l.tp;
    const std::size_t h = host_of(first);
    if (host_of(first + l.tp - 1) != h && l.collapse_tensor_parallel) {
      out.error = fmt::format("TP group {} spans GPUs {}..{}, not all on one host", r, first,
                              first + l.tp - 1);
      return out;
    }
    if (l.collapse_tensor_parallel)
      out.hosts.push_back(hosts[h]);
    else
      for (std::int64_t g = first; g < first + l.tp; ++g) out.hosts.push_back(hosts[host_of(g)]);
  }
  if (mode != workload::CommunicationMode::kNetwork) return out;
  // Through the network, the graph carries a group's bytes between hosts or prices them inside
  // one host; a group mixing both it refuses.
  const auto mixed = [&](auto member, int members) {
    std::vector<NodeId> seen;
    bool one_host = true, distinct = true;
    for (int i = 0; i < members; ++i) {
      const NodeId h = out.hosts[static_cast<std::size_t>(member(i))];
      if (!seen.empty() && h != seen.front()) one_host = false;
      if (std::find(seen.begin(), seen.end(), h) != seen.end()) distinct = false;
      seen.push_back(h);
    }
    return !one_host && !distinct;
  };
  const int lanes = l.collapse_tensor_parallel ? 1 : l.tp;
  for (std::int64_t r = 0; lanes > 1 && r < groups; ++r)
    if (mixed([&](int t) { return r * lanes + t; }, lanes)) {
      out.error = fmt::format(
          "TP group {} has several GPUs on one host and others on other hosts: "
          "the network carries bytes between hosts, not between the GPUs of a "
          "host; use the closed-form mode or a layout whose groups are inside "
          "one host or on distinct hosts",
          r);
      return out;
    }
  for (int s = 0; l.dp > 1 && s < l.pp; ++s)
    for (int t = 0; t < lanes; ++t)
      if (mixed([&](int d) { return t + lanes * (d + l.dp * s); }, l.dp)) {
        out.error = fmt::format(
            "the DP group of stage {} (TP index {}) has several GPUs on one "
            "host and others on other hosts: the network carries bytes "
            "between hosts, not between the GPUs of a host; use the "
            "closed-form mode or a layout whose groups are inside one host or "
            "on distinct hosts",
            s, t);
        return out;
      }
  return out;
}

// The one decision "can the training core run this?": why it cannot, or nothing when it can
// (also when the layout is one the graph refuses too: that is the layout's error, system.tp).
// Since 2026-12-07 every layout the graph runs does (several TP groups on a host, TP not
// collapsed in the closed form, a TP group over several hosts), but one option: merged op steps
// (system.core_op_steps "merged") with a TP group over several hosts through the network (its
// all-reduces are network collectives, one after another, not one step).
std::optional<std::string> training_core_refusal(const Topology& topology,
                                                 const NodeHardware& hardware,
                                                 const TrainingParams& p, bool merged_op_steps) {
  const ParallelLayout& l = p.layout;
  const Placement placed = place_core_workers(topology, hardware, l, p.executor.mode);
  if (!placed.error.empty() || !merged_op_steps || l.collapse_tensor_parallel || l.tp <= 1 ||
      p.executor.mode != workload::CommunicationMode::kNetwork)
    return std::nullopt;
  for (std::size_t g = 0; g < placed.hosts.size(); g += static_cast<std::size_t>(l.tp))
    for (int t = 1; t < l.tp; ++t)
      if (placed.hosts[g + static_cast<std::size_t>(t)] != placed.hosts[g])
        return fmt::format(
            "merged op steps (system.core_op_steps \"merged\") run a TP group's "
            "all-reduces as one step, but TP group {} spans hosts and its "
            "all-reduces go through the network one by one; use "
            "system.core_op_steps \"each\" or system.core \"graph\"",
            g / static_cast<std::size_t>(l.tp));
  return std::nullopt;
}

// The workers' hosts for the training core; throws what training_core_refusal says at `where`
// (system.core) and a layout error at `layout_path` (system.tp, as the graph).
std::vector<NodeId> core_hosts(const Topology& topology, const NodeHardware& hardware,
                               const TrainingParams& p, bool merged_op_steps,
                               const std::string& where, const std::string& layout_path) {
  if (std::optional<std::string> reason =
          training_core_refusal(topology, hardware, p, merged_op_steps))
    throw InputError(where, *reason);
  Placement placed = place_core_workers(topology, hardware, p.layout, p.executor.mode);
  if (!placed.error.empty()) throw InputError(layout_path, placed.error);
  return std::move(placed.hosts);
}

}  // namespace

std::optional<std::string> core_refusal(const ParallelLayout& l, workload::CommunicationMode mode,
                                        std::span<const std::int64_t> host_gpus) {
  if (mode != workload::CommunicationMode::kNetwork && !l.collapse_tensor_parallel)
    return "the closed form on the training core prices a whole TP group per worker: with "
           "communication \"closed_form\" it needs collapse_tensor_parallel true (the graph, "
           "core \"graph\", runs it)";
  std::vector<std::int64_t> first_gpu;
  std::int64_t gpus = 0;
  for (std::int64_t g : host_gpus) {
    first_gpu.push_back(gpus);
    gpus += g;
  }
  const std::int64_t workers = static_cast<std::int64_t>(l.pp) * l.dp;
  if (workers * l.tp > gpus) return std::nullopt;  // does not fit: the layout's error
  std::size_t previous = first_gpu.size();
  for (std::int64_t r = 0; r < workers; ++r) {
    const std::int64_t first = r * l.tp;
    const auto h = static_cast<std::size_t>(
        std::upper_bound(first_gpu.begin(), first_gpu.end(), first) - first_gpu.begin() - 1);
    if (h == previous)
      return fmt::format(
          "the training core runs one TP group per host, but TP groups {} and {} "
          "share host {} (of the hosts in order from 0; system.tp, or a cluster model's "
          "megatron.tp, {} is less than its GPUs); the graph (core \"graph\") runs it",
          r - 1, r, h, l.tp);
    previous = h;
    const std::int64_t end = h + 1 < first_gpu.size() ? first_gpu[h + 1] : gpus;
    if (first + l.tp > end) {
      // Not collapsed, a TP group whose GPUs are each on a host of their own runs on the graph
      // (its all-reduces through the network); the core prices them inside one host only.
      bool distinct = !l.collapse_tensor_parallel;
      for (std::int64_t g = first + 1; distinct && g < first + l.tp; ++g)
        distinct = std::find(first_gpu.begin(), first_gpu.end(), g) != first_gpu.end();
      if (distinct)
        return fmt::format(
            "the training core runs a TP group's all-reduces inside one host, but "
            "TP group {} (GPUs {}..{}) spans hosts; the graph (core \"graph\") "
            "runs it through the network",
            r, first, first + l.tp - 1);
      return std::nullopt;  // a TP group across hosts the graph cannot run either: the layout's
    }
  }
  return std::nullopt;
}

CoreChoice choose_core(Core asked, const std::optional<std::string>& refusal,
                       const std::string& where) {
  CoreChoice c;
  c.asked = asked;
  if (asked == Core::kGraph) return c;
  if (!refusal) {
    c.core = Core::kTraining;
    return c;
  }
  if (asked == Core::kTraining) throw InputError(where, *refusal);
  c.fallback = refusal;
  return c;
}

void report_core_choice(const CoreChoice& choice, Results& out) {
  auto name = [](Core c) {
    return c == Core::kGraph ? "graph" : c == Core::kTraining ? "training" : "auto";
  };
  auto& d = out.details();
  d["core"] = name(choice.core);
  d["core_requested"] = name(choice.asked);
  if (choice.fallback) d["core_fallback"] = *choice.fallback;
}

TrainingParams read_training_params(JsonReader& system, JsonReader& workload) {
  TrainingParams p;
  const auto& policies = llm_training_policies();
  p.shape = read_shape(workload.object("model"));
  p.executor.mode = policies.communication.choose_or(system, "communication", "closed_form").value;
  ParallelLayout& l = p.layout;
  l.dp_sync = policies.dp_sync.choose_or(system, "dp_sync", "all_reduce").value;
  l.tp = static_cast<int>(system.integer("tp", 1, 1024));
  l.pp = static_cast<int>(system.integer("pp", 1, 4096));
  l.dp = static_cast<int>(system.integer("dp", 1, 1 << 20));
  p.micro_batch = static_cast<int>(system.integer_or("micro_batch", 1, 1, 1 << 16));
  p.global_batch = static_cast<int>(system.integer("global_batch", 1, 1 << 24));
  l.recompute = system.boolean_or("recompute", false);
  l.collapse_tensor_parallel = system.boolean_or("collapse_tensor_parallel", true);
  l.iterations = static_cast<int>(system.integer_or("iterations", 1, 1, 1000));
  const double grad_bytes = system.number_or("gradient_bytes_per_parameter", 2, 0, 16);
  if (std::optional<JsonReader> costs = system.optional_object("costs"))
    p.executor.costs = collectives::read_cost_model(*costs);

  const TransformerShape& m = p.shape;
  if (m.layers % l.pp != 0)
    throw InputError(system.path_of("pp"), fmt::format("{} layers do not split into {} equal "
                                                       "stages (Megatron needs a multiple)",
                                                       m.layers, l.pp));
  if (m.heads % l.tp != 0 || m.kv_heads % l.tp != 0 || m.ffn % l.tp != 0 || m.vocab % l.tp != 0)
    throw InputError(system.path_of("tp"),
                     fmt::format("tensor parallel degree {} must divide the heads ({}), KV heads "
                                 "({}), FFN size ({}) and vocabulary ({})",
                                 l.tp, m.heads, m.kv_heads, m.ffn, m.vocab));
  const std::int64_t per_step = static_cast<std::int64_t>(p.micro_batch) * l.dp;
  if (p.global_batch % per_step != 0)
    throw InputError(system.path_of("global_batch"),
                     fmt::format("{} sequences do not split into micro-batches of {} over {} "
                                 "data-parallel replicas",
                                 p.global_batch, p.micro_batch, l.dp));
  l.micro_batches = static_cast<int>(p.global_batch / per_step);
  l.layers_per_stage = m.layers / l.pp;
  l.activation = Bytes{static_cast<std::int64_t>(p.micro_batch) * m.sequence * m.hidden * 2};
  const double layers = l.layers_per_stage * m.layer_parameters_per_gpu(l.tp);
  const double embedding = m.embedding_parameters_per_gpu(l.tp);
  // The first stage holds the embedding, the last the LM head (gpt: a tied copy of the word
  // embedding, as Megatron keeps on the last stage; llama: its own output matrix).
  const double head = static_cast<double>(m.vocab) * m.hidden / l.tp;
  l.first_stage_grads = gradient_bytes(layers + embedding + (l.pp == 1 ? head : 0), grad_bytes);
  l.middle_stage_grads = gradient_bytes(layers, grad_bytes);
  l.last_stage_grads = gradient_bytes(layers + head, grad_bytes);
  return p;
}

std::unique_ptr<Model> make_llm_training_model(ModelSetup& setup) {
  JsonReader system = setup.root.object("system");
  system.ignore("model");
  JsonReader workload = setup.root.object("workload");
  const Core asked = llm_training_policies().core.choose_or(system, "core", "auto").value;
  const std::string core_path = system.path_of("core");
  // Options of the training core: read unless the graph was asked for (an error then, below).
  const bool options_given = system.has("stage_as_one_tensor") || system.has("core_op_steps");
  const bool one_tensor =
      asked != Core::kGraph ? system.boolean_or("stage_as_one_tensor", true) : true;
  const bool merged = asked != Core::kGraph &&
                      system.choice_or("core_op_steps", {"each", "merged"}, "each") == "merged";
  for (const char* key : {"stage_as_one_tensor", "core_op_steps"})
    if (asked == Core::kGraph && system.has(key))
      throw InputError(system.path_of(key),
                       "an option of the training core (system.core: "
                       "training); the graph runs every kernel and "
                       "all-reduces each stage's gradients at once");
  auto params = std::make_shared<TrainingParams>(read_training_params(system, workload));
  system.finish();
  workload.finish();
  const CoreChoice choice = choose_core(
      asked, training_core_refusal(setup.topology, setup.node_hardware, *params, merged),
      core_path);
  if (choice.fallback && options_given)
    throw InputError(core_path,
                     "system.stage_as_one_tensor and system.core_op_steps are options "
                     "of the training core, which cannot run this layout: " +
                         *choice.fallback);
  const Core core = choice.core;
  std::vector<NodeId> hosts;
  if (core == Core::kTraining)
    hosts = core_hosts(setup.topology, setup.node_hardware, *params, merged, core_path,
                       system.path_of("tp"));

  // Every operator on every GPU the run uses must be priced (GPUs of the first tp x pp x dp).
  const StageKernels kernels =
      transformer_kernels(params->shape, params->micro_batch, params->layout.tp);
  std::vector<const GpuSpec*> checked;
  for (NodeId h : setup.topology.hosts()) {
    const HostHardware* hw = setup.node_hardware.host(h);
    const GpuSpec& gpu = setup.node_hardware.gpu(h, "topology.hardware");
    if (hw == nullptr || std::find(checked.begin(), checked.end(), &gpu) != checked.end()) continue;
    checked.push_back(&gpu);
    for (const auto* list : {&kernels.attention_forward, &kernels.mlp_forward,
                             &kernels.embedding_forward, &kernels.head_forward})
      for (const Work& w : *list)
        setup.costs.check_operator(std::get<OperatorWork>(w).op, gpu, "compute");
  }

  // Budget: about two events per node (its start or message, its end).
  const double ranks = static_cast<double>(params->layout.pp) * params->layout.dp *
                       (params->layout.collapse_tensor_parallel ? 1 : params->layout.tp);
  const double per_rank_mb = params->layout.layers_per_stage * (params->layout.recompute ? 12 : 8);
  setup.estimate.events.push_back(
      {2 * ranks * per_rank_mb * params->layout.micro_batches * params->layout.iterations,
       "graph nodes: ranks x micro-batches x layers per stage x nodes per layer",
       "system.global_batch"});

  if (core == Core::kTraining)
    return std::make_unique<SimulationModel<LlmCoreTraining>>(
        setup.env, [params, hosts, one_tensor, merged, choice](ModelEnv& env) {
          return std::make_unique<LlmCoreTraining>(env, *params, hosts, one_tensor, merged, choice);
        });
  return std::make_unique<SimulationModel<LlmTraining>>(setup.env, [params, choice](ModelEnv& env) {
    return std::make_unique<LlmTraining>(env, *params, choice);
  });
}

}  // namespace mlsim::llm_training
