#include "models/llm_training/llm_training_model.hpp"

#include <fmt/format.h>
#include <algorithm>

#include "models/llm_training/graph_report.hpp"
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

class LlmTraining {
 public:
  LlmTraining(ModelEnv& env, const TrainingParams& p)
      : params_(p),
        source_(p.layout, transformer_kernels(p.shape, p.micro_batch, p.layout.tp)),
        executor_(env.engine, env.network, env.compute, env.links, source_, p.executor,
                  "system.tp") {}

  void start() { executor_.start(); }
  double progress() const { return executor_.progress(); }

  void report(Results& out) const {
    const double iteration_s = report_graph_run(executor_, source_, params_.layout.iterations, out);
    const double gpus =
        static_cast<double>(params_.layout.tp) * params_.layout.pp * params_.layout.dp;
    out.set_metric("gpus", gpus);
    // Model FLOPs per GPU-second: 3x the forward FLOPs per sample (forward and a backward of
    // twice its cost); with recomputation Megatron (Narayanan et al. SC'21) counts 4x, which
    // is their "achieved teraFLOP/s per GPU".
    const double fwd = forward_flops(params_.shape, 1) * params_.global_batch;
    if (iteration_s > 0) {
      out.set_metric("model_tflops_per_gpu", 3 * fwd / iteration_s / gpus / 1e12);
      out.set_metric("megatron_tflops_per_gpu",
                     (params_.layout.recompute ? 4 : 3) * fwd / iteration_s / gpus / 1e12);
    }
    auto& d = out.details();
    d["communication"] = communication_description(params_.executor.mode);
    d["model"] = params_.shape.name;
    d["layout"] = {{"tp", params_.layout.tp},
                   {"pp", params_.layout.pp},
                   {"dp", params_.layout.dp},
                   {"micro_batches_per_pipeline", params_.layout.micro_batches},
                   {"graph_ranks", source_.ranks()},
                   {"collapse_tensor_parallel", params_.layout.collapse_tensor_parallel}};
  }

 private:
  const TrainingParams& params_;
  MegatronSource source_;
  workload::GraphExecutor executor_;
};

}  // namespace

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
  auto params = std::make_shared<TrainingParams>(read_training_params(system, workload));
  system.finish();
  workload.finish();

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

  return std::make_unique<SimulationModel<LlmTraining>>(
      setup.env, [params](ModelEnv& env) { return std::make_unique<LlmTraining>(env, *params); });
}

}  // namespace mlsim::llm_training
