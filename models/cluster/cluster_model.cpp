#include "models/cluster/cluster_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "models/cluster/policies.hpp"
#include "models/ina/dsa_priority.hpp"
#include "models/ina/job_plan.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/collectives/read_costs.hpp"
#include "sim_core/hardware/dnn_profile.hpp"
#include "sim_core/hardware/profile_scaling.hpp"
#include "sim_core/network/host_access_links.hpp"
#include "sim_core/network/topology_hardware.hpp"
#include "sim_core/run/events.hpp"
#include "sim_core/run/simulation_model.hpp"
#ifdef MLSIM_HAVE_CHAKRA
#include "sim_core/workload/chakra/chakra_source.hpp"
#endif

namespace mlsim::cluster {
namespace {

// The node pool is the topology's hosts: pool node i is topology host i, with the GPU type and
// count topology.hardware gives it (consecutive hosts alike form one group). GPU types are in
// order of first use; each type's speed relative to the reference GPU the trace's durations were
// measured on is how the platform's Compute prices a time measured there
// (profile_scaling.hpp: profiled_time_factor; with no HBM traffic known, the ratio of the two
// GPUs' peaks in `speed_dtype`).
void read_nodes(JsonReader& system, const HardwareCatalog& hardware, const Topology& topology,
                const NodeHardware& node_hardware, ClusterParams& c) {
  reject_moved_to_topology_hardware(
      system, "nodes",
      "the node pool is the topology's hosts (host i is pool node i), each with the GPU type and "
      "gpus_per_host that topology.hardware gives it");
  const std::string ref_where = system.path_of("reference_gpu");
  const GpuSpec& reference = hardware.gpu(system.string("reference_gpu"), ref_where);
  const std::string dtype_where = system.path_of("speed_dtype");
  const Dtype dtype = parse_dtype(system.string_or("speed_dtype", "fp32"), dtype_where);
  (void)reference.peak_for(dtype, ref_where);  // the reference must have the format
  if (topology.hosts().empty()) throw InputError("topology", "the node pool needs hosts");
  if (topology.hosts().size() > 100'000)
    throw InputError("topology", "more than 100000 pool nodes");
  for (std::size_t i = 0; i < topology.hosts().size(); ++i) {
    const NodeId host = topology.hosts()[i];
    const std::string where = "topology.hardware (pool node " + std::to_string(i) + ", host " +
                              topology.node(host).name + ")";
    const GpuSpec& gpu = node_hardware.gpu(host, where);
    const int gpus = node_hardware.host(host)->gpus;
    int type = -1;
    for (std::size_t t = 0; t < c.types.size(); ++t)
      if (c.types[t].name == gpu.name) type = static_cast<int>(t);
    if (type < 0) {
      if (c.types.size() == kMaxGpuTypes)
        throw InputError(where, "at most 32 GPU types in one pool");
      type = static_cast<int>(c.types.size());
      c.types.push_back({gpu.name, profiled_time_factor(reference, gpu, dtype, ref_where, where)});
    }
    if (!c.groups.empty() && c.groups.back().type == type && c.groups.back().gpus_per_node == gpus)
      ++c.groups.back().nodes;
    else
      c.groups.push_back({type, 1, gpus});
  }
}

void read_failures(JsonReader& system, ClusterParams& c) {
  // Failures are platform events now: {"node": i, "up": false, "repair_after": ...} and
  // "random_failures" in the scenario's events section.
  reject_moved_key(system, "failures", "node failures (\"node\": host i, \"up\": false)");
  reject_moved_key(system, "node_mtbf", "random failures (\"random_failures\")");
  reject_moved_key(system, "repair_time", "random failures (\"random_failures\")");
  c.requeue_on_failure =
      system.choice_or("on_failure", {"requeue", "drop"}, "requeue") == "requeue";
}

// workload.jobs.list: each job's submit time, GPUs, runtime (or, in the detailed mode,
// iterations of its model), user and GPU type, in submit order.
std::function<std::unique_ptr<JobSource>(std::uint64_t)> read_job_list(
    JsonReader& jobs, const std::vector<GpuType>& types, const CommunicationParams* training) {
  std::vector<std::string> names;
  for (const GpuType& t : types) names.push_back(t.name);
  std::vector<JobSpec> list;
  UserTable users;
  for (JsonReader& e : jobs.objects("list")) {
    JobSpec j;
    j.submit = e.duration("submit");
    if (!list.empty() && j.submit < list.back().submit)
      throw InputError(e.path_of("submit"), "jobs must be listed in submit order");
    j.gpus = static_cast<int>(e.integer("gpus", 1, 1'000'000));
    j.user = users.index_of(e.string_or("user", "all"));
    j.types = parse_type_list(e.string_or("gpu_type", ""), names, e.path_of("gpu_type"));
    if ((e.has("model") || e.has("iterations")) && !training)
      throw InputError(e.path_of(e.has("model") ? "model" : "iterations"),
                       "names a training model: needs workload.training");
    if (training && e.has("model")) {
      const std::string model = e.string("model");
      std::string known;
      for (std::size_t m = 0; m < training->models.size(); ++m) {
        if (training->models[m].name == model) j.model = static_cast<int>(m);
        known += (m ? ", " : "") + training->models[m].name;
      }
      if (j.model < 0)
        throw InputError(e.path_of("model"),
                         "unknown model '" + model + "' (workload.training.models: " + known + ")");
    }
    if (j.model >= 0) {
      const TrainingModel& tm = training->models[static_cast<std::size_t>(j.model)];
      if (tm.megatron) {
        for (const char* key : {"planner", "stages"})
          if (e.has(key))
            throw InputError(e.path_of(key), "model '" + tm.name +
                                                 "' is a Megatron model: its pipeline stages "
                                                 "are its megatron.pp");
        // Any whole number of tp x pp replicas that splits the global batch: dp from the
        // job's GPUs (MegatronModel::misfit).
        if (const std::string why = tm.megatron->misfit(j.gpus); !why.empty())
          throw InputError(e.path_of("gpus"), "model '" + tm.name + "' " + why);
      }
      if (tm.chakra) {
        for (const char* key : {"planner", "stages"})
          if (e.has(key))
            throw InputError(e.path_of(key), "model '" + tm.name +
                                                 "' is a Chakra trace: its stages are the trace's");
        if (!tm.fits(j.gpus))
          throw InputError(e.path_of("gpus"),
                           fmt::format("model '{}' is a Chakra trace of {} ranks (one GPU each)",
                                       tm.name, tm.chakra->ranks));
      }
      j.gpus_per_node = tm.gpus_per_node();  // a TP group or a trace rank per host
    }
    if (e.has("planner")) {
      if (j.model < 0) throw InputError(e.path_of("planner"), "needs the job's model (\"model\")");
      const TrainingModel& tm = training->models[static_cast<std::size_t>(j.model)];
      j.planner = static_cast<int>(parse_stage_planner(e.string("planner"), e.path_of("planner")));
      if (tm.pipeline.memory.constraint && j.planner == static_cast<int>(StagePlanner::kEven))
        throw InputError(e.path_of("planner"),
                         "model '" + tm.name +
                             "' plans under a memory limit (its pipeline.memory), which the even "
                             "split does not look at: give a planner (pipedream, dp, exact)");
      if (!tm.has_pipeline())
        throw InputError(e.path_of("planner"),
                         "model '" + tm.name +
                             "' has no pipeline (its op schedule and micro-batches): give it "
                             "workload.training.models[].pipeline");
    }
    if (e.has("stages")) {
      if (j.model < 0) throw InputError(e.path_of("stages"), "needs the job's model (\"model\")");
      const TrainingModel& tm = training->models[static_cast<std::size_t>(j.model)];
      j.stages = static_cast<int>(e.integer("stages", 1, 1024));
      if (j.stages > 1 && !tm.has_pipeline())
        throw InputError(e.path_of("stages"),
                         "model '" + tm.name +
                             "' has no pipeline (its op schedule and micro-batches): give it "
                             "workload.training.models[].pipeline");
      if (j.stages > 1 && tm.planner_for(j.planner) != StagePlanner::kEven)
        throw InputError(e.path_of("stages"),
                         std::string("the planner \"") +
                             stage_planner_name(tm.planner_for(j.planner)) +
                             "\" chooses the stages (1: data parallel; or \"planner\": \"even\")");
      if (static_cast<std::size_t>(j.stages) > tm.parameters.size())
        throw InputError(e.path_of("stages"),
                         "more stages than model '" + tm.name + "' has layers");
    }
    if (j.model >= 0 && j.stages != 1 && j.planner == static_cast<int>(StagePlanner::kEven) &&
        training->models[static_cast<std::size_t>(j.model)].stages_for(j.stages) < 1)
      throw InputError(e.path_of("planner"),
                       "the even split needs a stage count: give the job's \"stages\"");
    if (training && e.has("iterations")) {
      if (e.has("duration"))
        throw InputError(e.path_of("duration"), "give either duration or iterations, not both");
      if (j.model < 0)
        throw InputError(e.path_of("iterations"), "needs the job's model (\"model\")");
      j.iterations = static_cast<std::uint64_t>(e.integer("iterations", 1, 1'000'000'000));
      // The runtime the schedulers estimate from: the iterations' compute on the reference GPU.
      j.work = Time::from_seconds_ceil(
          static_cast<double>(j.iterations) *
          training->models[static_cast<std::size_t>(j.model)].reference_iteration_for(j.gpus));
    } else {
      j.work = e.duration("duration");
      if (j.work <= Time::zero()) throw InputError(e.path_of("duration"), "must be positive");
    }
    e.finish();
    list.push_back(j);
  }
  if (list.empty()) throw InputError(jobs.path_of("list"), "expected at least one job");
  return [list = std::move(list), users](std::uint64_t) -> std::unique_ptr<JobSource> {
    return std::make_unique<ListJobSource>(list, users);
  };
}

std::function<std::unique_ptr<JobSource>(std::uint64_t)> read_jobs(
    JsonReader& workload, const std::vector<GpuType>& types,
    const std::filesystem::path& scenario_dir, const CommunicationParams* training) {
  JsonReader jobs = workload.object("jobs");
  const std::string kind = jobs.choice("source", {"trace", "poisson", "list"});
  if (kind == "list") {
    auto make = read_job_list(jobs, types, training);
    jobs.finish();
    return make;
  }
  std::function<std::unique_ptr<JobSource>(std::uint64_t)> make;
  if (kind == "trace") {
    TraceOptions o;
    o.file = jobs.string("file");
    if (o.file.is_relative()) o.file = scenario_dir / o.file;
    o.submit_column = jobs.string_or("submit_column", "timestamp");
    o.datetime = jobs.choice_or("submit_format", {"datetime", "seconds"}, "datetime") == "datetime";
    o.duration_column = jobs.string_or("duration_column", "duration");
    o.gpus_column = jobs.string_or("gpus_column", "num_gpus");
    o.user_column = jobs.string_or("user_column", "");
    o.gpu_type_column = jobs.string_or("gpu_type_column", "");
    o.limit = static_cast<std::uint64_t>(jobs.integer_or("limit", 1'000'000'000, 1, 1'000'000'000));
    o.duration_scale = jobs.number_or("duration_scale", 1.0, 1e-6, 1e6);
    o.submit_scale = jobs.number_or("submit_scale", 1.0, 1e-6, 1e6);
    std::vector<std::string> names;
    for (const GpuType& t : types) names.push_back(t.name);
    // Scanned now, so that a bad trace is an input error before the run.
    auto checked = std::make_shared<TraceJobSource>(o, names, jobs.path_of("file"));
    const std::string where = jobs.path_of("file");
    make = [o, names, where](std::uint64_t) -> std::unique_ptr<JobSource> {
      return std::make_unique<TraceJobSource>(o, names, where);
    };
  } else {
    PoissonOptions o;
    o.jobs = static_cast<std::uint64_t>(jobs.integer("jobs", 1, 100'000'000));
    o.mean_interarrival = jobs.duration("mean_interarrival");
    o.mean_duration = jobs.duration("mean_duration");
    if (o.mean_interarrival <= Time::zero())
      throw InputError(jobs.path_of("mean_interarrival"), "must be positive");
    if (o.mean_duration <= Time::zero())
      throw InputError(jobs.path_of("mean_duration"), "must be positive");
    o.gpus.clear();
    for (std::int64_t g : jobs.integers("gpus", 1, 1'000'000))
      o.gpus.push_back(static_cast<int>(g));
    if (o.gpus.empty()) throw InputError(jobs.path_of("gpus"), "expected at least one GPU count");
    o.users = static_cast<int>(jobs.integer_or("users", 1, 1, 100'000));
    make = [o](std::uint64_t seed) -> std::unique_ptr<JobSource> {
      return std::make_unique<PoissonJobSource>(o, RandomStream(seed, "cluster.jobs"));
    };
  }
  jobs.finish();
  return make;
}

std::optional<ina::PolicyKind> ina_policy_of(const std::string& sync) {
  if (sync == "switchml") return ina::PolicyKind::kSwitchMl;
  if (sync == "atp") return ina::PolicyKind::kAtp;
  if (sync == "dsa") return ina::PolicyKind::kDsa;
  return std::nullopt;
}

// system.ina: the switches' aggregation settings for models whose sync is switchml, atp or dsa
// (docs/cluster.md, "In-network aggregation"; defaults as the ina model's, docs/ina.md).
ina::ClusterParams read_ina(JsonReader& system) {
  ina::ClusterParams p;
  JsonReader s = system.object_or_empty("ina");
  p.aggregator_memory = s.bytes_or("aggregator_memory", std::to_string(20000 * 248) + "B");
  if (p.aggregator_memory.count <= 0 || p.aggregator_memory.count > (std::int64_t{1} << 30))
    throw InputError(s.path_of("aggregator_memory"), "must be positive and at most 1GiB");
  p.burst_values = static_cast<int>(s.integer_or("burst_values", 1, 1, 1'000'000));
  p.header_bytes = s.bytes_or("header", "60B");
  p.ecn_threshold_bytes = static_cast<double>(s.bytes_or("ecn_threshold", "100KB").count);
  p.switch_latency = s.duration_or("switch_latency", "400ns");
  // "one_switch": every worker sends to the job's aggregation switch (the default, as before);
  // "two_level": ATP/DSA jobs aggregate at each rack's ToR first (docs/cluster.md).
  const std::string levels = s.string_or("levels", "one_switch");
  if (levels != "one_switch" && levels != "two_level")
    throw InputError(s.path_of("levels"), "must be \"one_switch\" or \"two_level\"");
  p.two_level = levels == "two_level";
  JsonReader atp = s.object_or_empty("atp");
  p.atp_values_per_packet = static_cast<int>(atp.integer_or("values_per_packet", 62, 1, 4096));
  p.atp_timeout = atp.duration_or("timeout", "1ms");
  if (p.atp_timeout <= Time::zero()) throw InputError(atp.path_of("timeout"), "must be positive");
  atp.finish();
  JsonReader sml = s.object_or_empty("switchml");
  p.switchml_values_per_packet =
      static_cast<int>(sml.integer_or("values_per_packet", 256, 1, 4096));
  p.switchml_timeout = sml.duration_or("timeout", "10ms");
  if (p.switchml_timeout <= Time::zero())
    throw InputError(sml.path_of("timeout"), "must be positive");
  // Static partitions per switch [assumed: SwitchML's controller gives each job a fixed share;
  // with jobs coming and going, the switch is cut into a fixed number of them].
  p.switchml_partitions = static_cast<int>(sml.integer_or("partitions", 4, 1, 65535));
  if (sml.has("memory")) {
    p.switchml_memory = sml.bytes("memory");
    if (p.switchml_memory.count <= 0) throw InputError(sml.path_of("memory"), "must be positive");
  }
  sml.finish();
  JsonReader dsa = s.object_or_empty("dsa");
  p.selective_retransmission = dsa.boolean_or("selective_retransmission", true);
  if (dsa.has("priority"))
    p.dsa_priority = ina::dsa_priority_kind(dsa.string("priority"), dsa.path_of("priority"));
  dsa.finish();
  s.finish();
  return p;
}

// The INA models' DSA priorities: the models ranked by communication intensity (one worker's
// gradient on the wire per iteration over the first host's link speed, over the compute per
// iteration on the reference GPU [assumed: a job's hosts are not known before placement]).
void finish_ina(const ina::ClusterParams& p, const Topology& topology, const std::string& where,
                CommunicationParams& out) {
  std::vector<std::size_t> ina_models;
  bool atp = false, dsa = false;
  for (std::size_t m = 0; m < out.ina_models.size(); ++m) {
    if (!out.ina_models[m].plan) continue;
    ina_models.push_back(m);
    atp |= out.ina_models[m].policy == ina::PolicyKind::kAtp;
    dsa |= out.ina_models[m].policy == ina::PolicyKind::kDsa;
  }
  if (ina_models.empty()) return;
  if (atp && dsa)
    throw InputError(where,
                     "ATP and DSA models in one run are not modelled (one shared-pool program per "
                     "switch); SwitchML models may run beside either");
  const double link =
      topology.link(host_access_links(topology, topology.hosts().front(), "a cluster node").up)
          .bandwidth.bytes_per_s;
  std::vector<double> intensity;
  std::vector<std::uint32_t> layers;
  for (const std::size_t m : ina_models) {
    const ina::JobPlan& plan = *out.ina_models[m].plan;
    const bool switchml = out.ina_models[m].policy == ina::PolicyKind::kSwitchMl;
    const double packet = static_cast<double>(p.header_bytes.count) +
                          4.0 * (switchml ? p.switchml_values_per_packet : p.atp_values_per_packet);
    intensity.push_back(static_cast<double>(plan.packets()) * packet / link /
                        out.models[m].reference_iteration_s);
    layers.push_back(static_cast<std::uint32_t>(plan.layers.size()));
  }
  const ina::DsaPriorities priorities(p.dsa_priority, intensity, layers);
  for (std::size_t i = 0; i < ina_models.size(); ++i)
    out.ina_models[ina_models[i]].priority = priorities.of_job(i);
  out.ina = p;
}

// workload.training.models[i].megatron: a Megatron-LM job's model, read with the llm_training
// model's own reader (its system keys and its workload.model shape, here in one object), less
// what a cluster job does not choose: its communication (always through the run's network) and
// its iterations (the job's). Every operator must be priced on every GPU of the pool and on the
// reference GPU; each host that may hold a job needs tp GPUs and, for tp > 1, an intra_node link.
void read_megatron(JsonReader& m, TrainingModel& t, const GpuSpec& reference,
                   const Topology& topology, const NodeHardware& node_hardware,
                   const CostModel* costs) {
  JsonReader mg = m.object("megatron");
  if (mg.has("communication"))
    throw InputError(mg.path_of("communication"),
                     "a cluster job's collectives and messages always go through the run's "
                     "network (the llm_training model's \"network\" mode): not a key here");
  if (mg.has("iterations"))
    throw InputError(mg.path_of("iterations"),
                     "a job's iterations are its own: from its trace duration, or a listed job's "
                     "\"iterations\" (workload.jobs.list[i])");
  auto model = std::make_shared<MegatronModel>();
  // The llm_training model's `core` choice, here per model: the graph, the training core, or
  // (auto, the default) the core whenever it can run the layout. A job's placement gives each of
  // its pp x dp TP groups a host of its own with tp GPUs, through the run's network: what the
  // shared decision (llm_training::core_refusal) is asked about.
  const llm_training::Core asked =
      llm_training::llm_training_policies().core.choose_or(mg, "core", "auto").value;
  model->params = llm_training::read_training_params(mg, mg);
  {
    const llm_training::ParallelLayout& l = model->params.layout;
    const std::vector<std::int64_t> placed(static_cast<std::size_t>(l.pp) * l.dp, l.tp);
    const llm_training::CoreChoice choice = llm_training::choose_core(
        asked, llm_training::core_refusal(l, workload::CommunicationMode::kNetwork, placed),
        mg.path_of("core"));
    model->core = choice.core;
    model->core_requested = choice.asked;
    model->core_fallback = choice.fallback;
  }
  mg.finish();
  model->params.executor.mode = workload::CommunicationMode::kNetwork;
  const llm_training::TrainingParams& p = model->params;
  const llm_training::ParallelLayout& l = p.layout;
  model->kernels = llm_training::transformer_kernels(p.shape, p.micro_batch, l.tp);
  MLSIM_CHECK(costs != nullptr, "a Megatron model needs the run's cost providers");
  std::vector<const GpuSpec*> gpus = {&reference};
  bool room = false;
  for (NodeId h : topology.hosts()) {
    const HostHardware* hw = node_hardware.host(h);
    if (hw == nullptr || hw->gpu == nullptr || hw->gpus < l.tp) continue;
    room = true;
    if (l.tp > 1 && !hw->intra_node)
      throw InputError("topology.hardware (host " + topology.node(h).name + ")",
                       "a Megatron job's tensor-parallel all-reduces run over the host's "
                       "intra_node link, which this host lacks");
    if (std::find(gpus.begin(), gpus.end(), hw->gpu) == gpus.end()) gpus.push_back(hw->gpu);
  }
  if (!room)
    throw InputError(mg.path_of("tp"),
                     fmt::format("no host has {} GPUs: a Megatron job puts one whole "
                                 "tensor-parallel group on each of its hosts",
                                 l.tp));
  const llm_training::StageKernels& k = model->kernels;
  for (const GpuSpec* gpu : gpus)
    for (const auto* list :
         {&k.attention_forward, &k.mlp_forward, &k.embedding_forward, &k.head_forward})
      for (const Work& w : *list)
        if (const auto* op = std::get_if<OperatorWork>(&w))
          costs->check_operator(op->op, *gpu, "compute");
  // The busiest stage's compute per iteration on the reference GPU: what its GPUs run,
  // communication aside (megatron_source.hpp: per micro-batch and layer attention and MLP
  // forward, their backward, the forward again with recomputation; embedding on the first
  // stage, head on the last).
  auto price = [&](const std::vector<Work>& list) {
    double sec = 0;
    for (const Work& w : list) sec += costs->seconds(w, reference);
    return sec;
  };
  const double forward = price(k.attention_forward) + price(k.mlp_forward);
  const double backward = price(k.attention_backward) + price(k.mlp_backward);
  const double layer = forward + backward + (l.recompute ? forward : 0);
  for (int s = 0; s < l.pp; ++s) {
    double stage = l.layers_per_stage * layer;
    if (s == 0) stage += price(k.embedding_forward) + price(k.embedding_backward);
    if (s == l.pp - 1) stage += price(k.head_forward) + price(k.head_backward);
    model->stage_s_per_micro_batch = std::max(model->stage_s_per_micro_batch, stage);
  }
  if (model->stage_s_per_micro_batch <= 0)
    throw InputError(mg.path_of("model"), "the model's kernels take no time");
  // At its configured dp (a job's own: TrainingModel::reference_iteration_for).
  t.reference_iteration_s = model->stage_s_per_micro_batch * l.micro_batches;
  t.scheduler = "megatron";
  t.sync =
      l.dp_sync == llm_training::DpSync::kAllReduce ? "all_reduce" : "reduce_scatter_all_gather";
  t.megatron = std::move(model);
}

// workload.training.models[i].chakra: a Chakra execution trace (ASTRA-sim's input format) as a
// job's one iteration, read with the chakra_trace model's keys (`trace`, `ranks`, `comm_groups`,
// `costs`; paths relative to the scenario), read and checked now. Its busiest rank's compute on
// the reference GPU (the trace's measured times: FixedWork) is its reference iteration.
void read_chakra(JsonReader& m, TrainingModel& t, const GpuSpec& reference,
                 const std::filesystem::path& scenario_dir, const CostModel* costs) {
  JsonReader c = m.object("chakra");
#ifdef MLSIM_HAVE_CHAKRA
  if (c.has("communication"))
    throw InputError(c.path_of("communication"),
                     "a cluster job's collectives and messages always go through the run's "
                     "network (the chakra_trace model's \"network\" mode): not a key here");
  auto model = std::make_shared<ChakraModel>();
  workload::ChakraTraceSpec spec;
  spec.prefix = scenario_dir / c.string("trace");
  spec.ranks = static_cast<workload::RankId>(c.integer("ranks", 1, 1 << 20));
  spec.where = c.path_of("trace");
  if (c.has("comm_groups"))
    spec.groups = workload::read_chakra_groups(scenario_dir / c.string("comm_groups"),
                                               c.path_of("comm_groups"));
  model->executor.mode = workload::CommunicationMode::kNetwork;
  if (std::optional<JsonReader> cost = c.optional_object("costs"))
    model->executor.costs = collectives::read_cost_model(*cost);
  c.finish();
  auto trace = std::make_shared<const workload::ChakraSource>(spec);  // reads and checks it
  model->ranks = static_cast<int>(spec.ranks);
  model->nodes_per_iteration = trace->expected_nodes();
  model->make_source = [trace] { return std::make_unique<workload::ChakraSource>(*trace); };
  MLSIM_CHECK(costs != nullptr, "a Chakra model needs the run's cost providers");
  workload::ChakraSource pass(*trace);
  std::vector<workload::Node> nodes;
  for (workload::RankId r = 0; r < pass.ranks(); ++r) {
    double compute = 0;
    nodes.clear();
    while (pass.next(r, nodes)) {
    }
    for (const workload::Node& n : nodes)
      if (n.kind == workload::NodeKind::kCompute)
        for (const Work& w : pass.kernels()[static_cast<std::size_t>(n.target)])
          compute += costs->seconds(w, reference);
    t.reference_iteration_s = std::max(t.reference_iteration_s, compute);
  }
  if (t.reference_iteration_s <= 0)
    throw InputError(spec.where,
                     "the trace's compute nodes take no time: its jobs' iterations "
                     "cannot come from a duration");
  t.scheduler = "chakra";
  t.sync = "trace";
  t.chakra = std::move(model);
#else
  (void)t;
  (void)reference;
  (void)scenario_dir;
  (void)costs;
  throw InputError(c.path_of("trace"),
                   "this mlsim was built without protobuf, so without Chakra "
                   "traces (tools/setup.sh installs it)");
#endif
}

// A planned pipeline model's memory limit (`pipeline.memory` with constraint true): each host's
// GPU memory (memory.capacity, else its GPU's hbm_capacity from the catalog), and an error at
// `where` when its stages fit in no configuration on any number of hosts, from 2 to all the
// pool's hosts of one GPU type (a job runs on one type; a job on one host runs data parallel).
void check_pipeline_memory(TrainingModel& t, const Topology& topology,
                           const NodeHardware& node_hardware, NodeId max_host,
                           const std::string& where) {
  const pipeline::MemorySettings& memory = t.pipeline.memory;
  t.pipeline.memory_capacity.assign(static_cast<std::size_t>(max_host) + 1, 0);
  // The pool's hosts of each GPU, by name (a deterministic order for the message).
  std::map<std::string, std::pair<const GpuSpec*, std::size_t>> hosts_of;
  for (NodeId h : topology.hosts()) {
    const HostHardware* hw = node_hardware.host(h);
    if (hw == nullptr || hw->gpu == nullptr) continue;
    auto& [gpu_of, count] = hosts_of[hw->gpu->name];
    gpu_of = hw->gpu;
    ++count;
    t.pipeline.memory_capacity[h] =
        memory.capacity ? *memory.capacity : static_cast<double>(hw->gpu->hbm_capacity.count);
  }
  const std::vector<pipeline::LayerCost> layers = planner_layer_sizes(t);
  std::string gpus;
  for (const auto& [name, of] : hosts_of) {
    const auto& [gpu, n] = of;
    const double capacity =
        memory.capacity ? *memory.capacity : static_cast<double>(gpu->hbm_capacity.count);
    // A straight pipeline plans over at most one host per layer (plan_stages).
    const std::size_t most = t.pipeline.straight ? std::min(n, layers.size()) : n;
    for (std::size_t hosts = 2; hosts <= most; ++hosts)
      if (pipeline_memory_fits(t, t.pipeline.planner, layers, std::vector<double>(hosts, capacity)))
        return;
    gpus += fmt::format("{}{} hosts of {} with {} each", gpus.empty() ? "" : ", ", n, gpu->name,
                        to_string(Bytes{static_cast<std::int64_t>(capacity)}));
  }
  throw InputError(
      where + (memory.capacity ? ".capacity" : ".constraint"),
      fmt::format("no configuration of the model's {} layers has every stage fit in its GPUs' "
                  "memory on any number of hosts of one GPU type ({}; {}, docs/pipeline.md "
                  "\"GPU memory\"): give GPUs with more memory or a smaller model",
                  layers.size(), gpus.empty() ? "no host with a GPU" : gpus,
                  t.pipeline.planner == StagePlanner::kPipeDream
                      ? "PipeDream's --use_memory_constraint check"
                      : "mlsim's accounting"));
}

// workload.training (detailed mode): the training models jobs run, each a DNN profile with its
// communication scheduler and gradient-synchronisation strategy, chosen by name from the
// training core's registries (models/training/policies.cpp), so a strategy registered there
// (e.g. in-network aggregation) is usable here by its name.
std::shared_ptr<CommunicationParams> read_training(
    JsonReader& workload, const HardwareCatalog& hardware, const GpuSpec& reference,
    const std::string& reference_where, const Topology& topology, const NodeHardware& node_hardware,
    const std::filesystem::path& scenario_dir, const ina::ClusterParams& ina,
    const CostModel* costs) {
  constexpr std::int64_t kMillion = 1'000'000;
  auto out = std::make_shared<CommunicationParams>();
  JsonReader training = workload.object("training");
  NodeId max_host = 0;
  for (NodeId h : topology.hosts()) max_host = std::max(max_host, h);
  double weights = 0;
  for (JsonReader& m : training.objects("models")) {
    TrainingModel t;
    t.name = m.string("name");
    for (const TrainingModel& other : out->models)
      if (other.name == t.name)
        throw InputError(m.path_of("name"), "model '" + t.name + "' is listed twice");
    t.weight = m.number_or("weight", 1.0, 0.0, 1e9);
    weights += t.weight;
    if (m.has("megatron") || m.has("chakra")) {
      if (m.has("megatron") && m.has("chakra"))
        throw InputError(m.path_of("chakra"), "a model is a Megatron job or a Chakra trace");
      if (m.has("megatron"))
        read_megatron(m, t, reference, topology, node_hardware, costs);
      else
        read_chakra(m, t, reference, scenario_dir, costs);
      m.finish();  // a profiled model's keys (profile, scheduler, sync, pipeline) are errors here
      out->ina_models.emplace_back();
      out->models.push_back(std::move(t));
      continue;
    }
    const auto& scheduler = training::training_policies().schedulers.choose(m, "scheduler");
    t.scheduler = scheduler.name;
    t.make_scheduler = scheduler.value;
    // In-network aggregation is built by the run's INA fabric (its switches' programs), the
    // other strategies by the training core's registry.
    const std::optional<ina::PolicyKind> ina_policy = ina_policy_of(m.string("sync"));
    if (ina_policy) {
      t.sync = m.string("sync");
      if (*ina_policy == ina::PolicyKind::kSwitchMl && t.scheduler != "fifo")
        throw InputError(m.path_of("scheduler"),
                         "SwitchML streams a job's chunks through its slots in production order; "
                         "only the framework's \"fifo\" order is modelled with it");
    } else {
      const std::string name = m.string("sync");
      if (!training::training_policies().syncs.find(name)) {
        std::string known;
        for (const std::string& n : training::training_policies().syncs.names())
          known += (known.empty() ? "" : ", ") + n;
        throw InputError(m.path_of("sync"), "unknown sync \"" + name + "\" (registered: " + known +
                                                "; in-network aggregation: switchml, atp, dsa)");
      }
      const auto& sync = training::training_policies().syncs.choose(m, "sync");
      t.sync = sync.name;
      t.make_sync = sync.value;
    }
    if (t.scheduler == "fifo") {
      for (const char* key : {"partition", "credit"})
        if (m.has(key))
          throw InputError(m.path_of(key), "the fifo scheduler sends whole tensors, untuned");
    } else {
      // ByteScheduler's defaults [code: bytedance/byteps bytescheduler/common/bytecore.py,
      // ByteCore.__init__: partition 1M and credit 4M parameters; docs/scheduling.md: 8M and
      // 16M for all-reduce] (as commsched). In-network aggregation takes the PS ones: ATP's end
      // host is BytePS with PS-lite's push/pull replaced by ATP's (in-ATP/ATP-BytePS, README),
      // so a worker pushes to and pulls from the switch as from a PS [no INA setting is
      // published: the ina model's study uses the same].
      const bool ps = t.sync == "ps" || ina_policy.has_value();
      t.config.partition =
          m.integer_or("partition", ps ? kMillion : 8 * kMillion, 1, 1'000'000'000'000);
      t.config.credit =
          m.integer_or("credit", ps ? 4 * kMillion : 16 * kMillion, 1, 1'000'000'000'000);
      // Over in-network aggregation one order for the job (ina::ClusterParams::ordering).
      if (ina_policy)
        t.ordering =
            training::training_policies().orderings.choose_or(m, "scheduling", "job").value;
    }
    if (m.has("scheduling") && !(ina_policy && t.scheduler != "fifo"))
      throw InputError(m.path_of("scheduling"),
                       "who orders ByteScheduler's chunks over in-network aggregation: only with "
                       "scheduler \"bytescheduler\" and sync switchml, atp or dsa");
    const DnnProfile profile = read_pipedream_graph_field(m, "profile", scenario_dir);
    const std::string profiled_where = m.path_of("profiled_on");
    const GpuSpec& profiled = hardware.gpu(m.string("profiled_on"), profiled_where);
    for (const LayerProfile& l : profile.layers) {
      if (l.is_input) continue;  // data loading runs on the host, not the GPU
      t.parameters.push_back((l.parameters.count + 3) / 4);  // fp32
      const LayerSeconds s =
          layer_seconds_on(l, profiled, reference, profiled_where, reference_where);
      t.reference_iteration_s += s.forward + s.backward;
      t.reference_layer_s.push_back(s.forward + s.backward);
      t.activation_bytes.push_back(l.activation.count);
    }
    if (t.parameters.empty()) throw InputError(m.path_of("profile"), "the profile has no layers");
    // A pipeline cut's bytes from the profile's edges, as the pipeline model counts them.
    for (const pipeline::LayerCost& l : pipeline::layer_costs(profile))
      t.boundary_bytes.push_back(l.cut_bytes());
    // Pipeline parallelism (communication_mode.hpp, pipeline_job.hpp): stages, the op schedule
    // (PipeDream's 1F1B or GPipe with one flush per iteration) and micro-batches per replica and
    // iteration; every key required (no default is a published one).
    if (m.has("pipeline")) {
      JsonReader pl = m.object("pipeline");
      if (ina_policy)
        throw InputError(m.path_of("pipeline"),
                         "pipeline stages over in-network aggregation are not modelled (a stage's "
                         "replicas would need an aggregation switch program of their own)");
      // "even" (the default) needs the stage count; a planner of models/pipeline chooses it.
      if (pl.has("planner"))
        t.pipeline.planner = parse_stage_planner(pl.string("planner"), pl.path_of("planner"));
      if (t.pipeline.planner == StagePlanner::kEven) {
        t.pipeline.stages = static_cast<std::size_t>(pl.integer("stages", 1, 1024));
        if (t.pipeline.stages > t.parameters.size())
          throw InputError(
              pl.path_of("stages"),
              "more stages than the profile's " + std::to_string(t.parameters.size()) + " layers");
        if (pl.has("straight"))
          throw InputError(pl.path_of("straight"),
                           "only with a planner (pipedream, dp, exact): the even split gives "
                           "every stage the same replicas");
      } else {
        if (pl.has("stages"))
          throw InputError(pl.path_of("stages"),
                           std::string("the planner \"") + stage_planner_name(t.pipeline.planner) +
                               "\" chooses the stages and their replicas over the job's hosts");
        t.pipeline.stages = 0;
        t.pipeline.straight = pl.boolean_or("straight", false);
      }
      t.pipeline.schedule = pl.choice("schedule", {"1f1b", "gpipe"}) == "gpipe"
                                ? training::PipelineSchedule::Kind::kGPipe
                                : training::PipelineSchedule::Kind::kOneFOneB;
      t.pipeline.micro_batches = static_cast<std::size_t>(pl.integer("micro_batches", 1, 4096));
      // GPU memory as the planners' constraint: models/pipeline's own reader (its system.memory
      // keys, stage_memory.hpp).
      t.pipeline.memory = pipeline::read_memory_settings(pl);
      if (t.pipeline.memory.constraint && t.pipeline.planner == StagePlanner::kEven)
        throw InputError(pl.path_of("memory"),
                         "only with a planner (pipedream, dp, exact): the even split does not "
                         "choose its stages by memory");
      if (t.pipeline.memory.constraint)
        check_pipeline_memory(t, topology, node_hardware, max_host, pl.path_of("memory"));
      pl.finish();
    }
    if (t.reference_iteration_s <= 0)
      throw InputError(m.path_of("profile"), "the profile's layers take no time");
    const auto tables = profile_seconds_on_hosts(
        profile, false, profiled, profiled_where, node_hardware, topology.hosts(),
        [&](std::size_t i) {
          return "topology.hardware (host " + topology.node(topology.hosts()[i]).name + ")";
        });
    t.times.assign(static_cast<std::size_t>(max_host) + 1, nullptr);
    for (std::size_t i = 0; i < topology.hosts().size(); ++i)
      t.times[topology.hosts()[i]] = tables[i];
    ina::FabricModel fm;
    if (ina_policy) {
      fm.policy = *ina_policy;
      const bool switchml = *ina_policy == ina::PolicyKind::kSwitchMl;
      ina::PlanOptions o;
      o.values_per_packet = switchml ? ina.switchml_values_per_packet : ina.atp_values_per_packet;
      o.burst_packets = std::max(1, ina.burst_values / o.values_per_packet);
      o.partition = t.config.partition;
      if (o.partition > 0 && o.partition < o.values_per_packet)
        throw InputError(m.path_of("partition"),
                         "a chunk smaller than one packet's " +
                             std::to_string(o.values_per_packet) +
                             " values is not modelled (a packet carries one chunk)");
      fm.plan = std::make_shared<const ina::JobPlan>(ina::make_job_plan(profile, o));
      MLSIM_CHECK(fm.plan->layers.size() == t.parameters.size(), "a plan layer per layer");
    }
    out->ina_models.push_back(std::move(fm));
    m.finish();
    out->models.push_back(std::move(t));
  }
  if (out->models.empty())
    throw InputError(training.path_of("models"), "expected at least one training model");
  if (weights <= 0)
    throw InputError(training.path_of("models"), "at least one model needs a positive weight");
  training.finish();
  finish_ina(ina, topology, training.path_of("models"), *out);
  return out;
}

}  // namespace

ModelParams read_cluster_params(JsonReader& system, JsonReader& workload,
                                const HardwareCatalog& hardware, const Topology& topology,
                                const NodeHardware& node_hardware,
                                const std::filesystem::path& scenario_dir, const CostModel* costs) {
  ModelParams p;
  ClusterParams& c = p.cluster;
  // A policy presets the scheduler's options; each can be set apart (ablations).
  const SchedulingPreset& preset = cluster_policies().policies.choose(system, "policy").value;
  c.policy = preset.policy;
  c.order = cluster_policies().orders.choose_or(system, "order", preset.order).value;
  c.flexible_types = system.boolean_or("flexible_types", preset.flexible_types);
  c.preinitialised = system.boolean_or("preinitialised", preset.preinitialised);
  read_nodes(system, hardware, topology, node_hardware, c);
  c.estimate_factor = system.number_or("estimate_factor", 1.0, 1.0, 1000.0);
  c.backfill_depth = static_cast<int>(system.integer_or("backfill_depth", 100, 1, 1'000'000));
  c.fair_share_half_life = system.duration_or("fair_share_half_life", "0s");
  c.user_gpu_quota = static_cast<int>(system.integer_or("user_gpu_quota", 0, 0, 10'000'000));
  c.startup_cold = system.duration_or("startup_cold", "0s");
  c.startup_warm = system.duration_or("startup_warm", "0s");
  if (c.startup_warm > c.startup_cold)
    throw InputError(system.path_of("startup_warm"),
                     "a pre-initialised start cannot be slower than a cold one (startup_cold)");
  read_failures(system, c);
  // Where a job that fits no single node goes: the fewest nodes anywhere (the default), or
  // within one rack (the switch its hosts hang off) when one has room.
  if (cluster_policies().placements.choose_or(system, "placement", "fewest_nodes").value ==
      PlacementRule::kRackLocal) {
    std::vector<NodeId> switches;
    for (NodeId host : topology.hosts()) {
      const NodeId sw = topology.link(host_access_links(topology, host, "a cluster node").up).dst;
      const auto it = std::find(switches.begin(), switches.end(), sw);
      c.racks.push_back(static_cast<int>(it - switches.begin()));
      if (it == switches.end()) switches.push_back(sw);
    }
  }
  c.series_interval = system.duration_or("series_interval", "1h");
  if (c.series_interval <= Time::zero())
    throw InputError(system.path_of("series_interval"), "must be positive");
  // The job-level mode times a job by its trace runtime; the detailed mode simulates the
  // communication of the jobs it places on several hosts (communication_mode.hpp). The training
  // models are read (and checked) in both, so that one scenario runs either mode; the job-level
  // mode uses them only for a listed job's iterations.
  const bool detailed =
      cluster_policies().details.choose_or(system, "detail", "job").value == Detail::kCommunication;
  std::shared_ptr<CommunicationParams> training;
  if (detailed || workload.has("training")) {
    const std::string ref_where = system.path_of("reference_gpu");
    const ina::ClusterParams ina = read_ina(system);
    training =
        read_training(workload, hardware, hardware.gpu(system.string("reference_gpu"), ref_where),
                      ref_where, topology, node_hardware, scenario_dir, ina, costs);
    // Without a model aggregating in the network system.ina is read and checked but unused
    // (so that one scenario's variants may switch its models' sync to ring or ps).
  } else if (system.has("ina")) {
    throw InputError(system.path_of("ina"),
                     "needs workload.training (models aggregating in the "
                     "network)");
  }
  if (detailed) {
    // CommunicationParams::stall_timeout: a stalled job is dropped and reported.
    training->stall_timeout = system.duration_or("stall_timeout", "600s");
    if (training->stall_timeout <= Time::zero())
      throw InputError(system.path_of("stall_timeout"),
                       "expected a positive duration (how long a simulated job may make no "
                       "progress before the watchdog ends it)");
    p.communication = training;
  } else if (system.has("stall_timeout")) {
    throw InputError(system.path_of("stall_timeout"),
                     "only in the detailed mode (system.detail \"communication\"): the stall "
                     "watchdog of the jobs whose communication is simulated");
  }
  p.make_source = read_jobs(workload, c.types, scenario_dir, training.get());
  return p;
}

namespace {

void check_events(const PlatformEvents& events) {
  // Job runtimes come from the trace (scaled per GPU type); a host speed is not modelled.
  if (events.has(EventChange::kSpeed))
    throw InputError("events",
                     "the cluster model does not model host speed changes (job "
                     "runtimes come from the trace and the GPU type)");
  // Node and link failures are accepted in both modes: in the detailed mode a node failure
  // kills the simulated jobs on it, and a job whose transfers find no route fails
  // (ClusterSimulation::on_job_failed); both are requeued or dropped by system.on_failure.
}

}  // namespace

double sync_transfers_per_chunk(const std::string& sync, int workers) {
  const auto w = static_cast<double>(workers);
  if (workers < 2) return 0;
  if (sync == "ring") return 2 * (w - 1) * w;  // 2(W-1) steps, each a transfer out of every worker
  // tree: every non-root sends the chunk up once and receives it down once (tree.cpp); rat: per
  // piece n - r gathers, r - 1 reductions up, r - 1 broadcasts down, n - r scatters, 2(n - 1)
  // (rat.cpp); ps: a push and a pull for each worker but the one colocated with the chunk's
  // server (a chunk sliced over several servers sends more).
  if (sync == "tree" || sync == "rat" || sync == "ps") return 2 * (w - 1);
  // Another strategy (in-network aggregation): at least one transfer from each other worker.
  return w - 1;
}

double sync_bytes_per_gradient_byte(const std::string& sync, int workers) {
  const auto w = static_cast<double>(workers);
  if (workers < 2) return 0;
  // ring: 2(W-1) steps of W transfers of 1/W of the chunk; tree, rat: 2(W-1) transfers of the
  // whole chunk; ps (colocated servers): every worker pushes and pulls all of it, W of each,
  // the colocated one's through no link but still counted by the strategy.
  if (sync == "ring" || sync == "tree" || sync == "rat") return 2 * (w - 1);
  if (sync == "ps") return 2 * w;
  return w - 1;
}

// Lower bounds of the detailed mode's work (budget.hpp), from one pass over the job source (a
// trace is streamed, as in the run): a job of G GPUs spans at least ceil(G / the largest
// host's GPUs) hosts; on W >= 2 hosts every iteration computes forward and backward of every
// layer on every worker, and sends each gradient chunk over the network
// sync_transfers_per_chunk times (exact for ring, tree and rat, a lower bound for ps and
// in-network aggregation). Until 2026-12-06 tree and rat were counted W - 1, half their
// transfers.
void estimate_work(const ModelParams& p, int max_gpus_per_host, int pool_hosts,
                   WorkEstimate& estimate) {
  if (!p.communication) return;
  const auto& models = p.communication->models;
  std::vector<double> chunks(models.size(), 0);
  for (std::size_t m = 0; m < models.size(); ++m)
    for (std::int64_t n : models[m].parameters)
      if (n > 0)
        chunks[m] += models[m].config.partition > 0
                         ? std::ceil(static_cast<double>(n) /
                                     static_cast<double>(models[m].config.partition))
                         : 1.0;
  double transfers = 0, events = 0;
  std::uint64_t spanning = 0, index = 0;
  auto source = p.make_source(1);
  while (const std::optional<JobSpec> job = source->next()) {
    // In-network aggregation counts workers in a 32-bit bitmap (packet.hpp): a job that may
    // draw such a model and may be placed on more than 32 hosts (at most one per GPU) is
    // refused before the run.
    if (p.communication->ina && std::min(job->gpus, pool_hosts) > 32) {
      for (std::size_t m = 0; m < models.size(); ++m) {
        const bool may_run =
            job->model >= 0 ? static_cast<std::size_t>(job->model) == m : models[m].weight > 0;
        if (may_run && p.communication->ina_models[m].plan)
          throw InputError("workload.jobs",
                           fmt::format("job {} asks for {} GPUs and may run model '{}', whose "
                                       "in-network aggregation holds at most 32 workers (hosts)",
                                       index, job->gpus, models[m].name));
      }
    }
    ++index;
    const int hosts = (job->gpus + max_gpus_per_host - 1) / max_gpus_per_host;
    if (hosts < 2) continue;
    ++spanning;
    const auto w = static_cast<double>(hosts);
    double least_t = std::numeric_limits<double>::infinity(), least_e = least_t;
    for (std::size_t m = 0; m < models.size(); ++m) {
      if (job->model >= 0 && static_cast<std::size_t>(job->model) != m) continue;
      if (job->model < 0 && !models[m].fits(job->gpus)) continue;
      const double iterations =
          job->iterations > 0
              ? static_cast<double>(job->iterations)
              : std::max(1.0, std::round(job->work.seconds() /
                                         models[m].reference_iteration_for(job->gpus)));
      if (models[m].megatron || models[m].chakra) {
        // Its graph's nodes, each ending once (its messages and collectives may carry
        // nothing across the network: all its hosts may be one).
        least_e =
            std::min(least_e, iterations * (models[m].megatron
                                                ? models[m].megatron->nodes_per_iteration(job->gpus)
                                                : models[m].chakra->nodes_per_iteration));
        least_t = std::min(least_t, 0.0);
        continue;
      }
      if (models[m].runs_pipeline(job->stages, job->planner)) {
        const auto mb = static_cast<double>(models[m].pipeline.micro_batches);
        if (models[m].planner_for(job->planner) != StagePlanner::kEven) {
          // A planner's configuration is known only once placed: at least one stage, every
          // micro-batch's forward and backward on it, and maybe nothing to send (one stage
          // whose replicas' all-reduce is not counted).
          least_e = std::min(least_e, iterations * 2 * mb);
          least_t = std::min(least_t, 0.0);
          continue;
        }
        // The even split: at least min(stages, W) stages of one replica, each worker running
        // a forward and a backward per micro-batch, an activation and its gradient per
        // boundary.
        const double p = std::min(static_cast<double>(models[m].stages_for(job->stages)), w);
        least_t = std::min(least_t, iterations * 2 * (p - 1) * mb);
        least_e = std::min(least_e, iterations * 2 * mb * p);
        continue;
      }
      least_t = std::min(least_t,
                         iterations * chunks[m] * sync_transfers_per_chunk(models[m].sync, hosts));
      least_e =
          std::min(least_e, iterations * 2 * static_cast<double>(models[m].parameters.size()) * w);
    }
    // No model fits the job (only Megatron models, of other sizes): the job-level timing.
    if (std::isinf(least_t)) least_t = 0;
    if (std::isinf(least_e)) least_e = 0;
    transfers += least_t;
    events += least_e;
  }
  const std::string key = "workload.jobs";
  estimate.transfers.push_back(
      {transfers, fmt::format("gradient chunks of {} jobs spanning several hosts", spanning), key});
  estimate.events.push_back(
      {events, fmt::format("forward and backward ops of {} jobs spanning several hosts", spanning),
       key});
}

namespace {

// The detailed mode's runner beside the cluster simulation (declared first: it outlives it).
class ClusterRun {
 public:
  ClusterRun(ModelEnv& env, const ModelParams& params) {
    if (params.communication)
      runner_ = std::make_unique<CommunicationMode>(env.engine, env.network, env.compute,
                                                    *params.communication,
                                                    env.stream("cluster.job_models"));
    if (runner_) runner_->set_links(&env.links);
    if (params.communication && params.communication->ina) {
      // The switches' aggregator pools belong to the run: every job aggregating at a switch
      // shares its pools (ina_fabric.hpp).
      fabric_ = std::make_unique<ina::InaFabric>(env.engine, env.network, env.topology,
                                                 *params.communication->ina,
                                                 params.communication->ina_models);
      runner_->set_sync_builder([f = fabric_.get()](std::size_t model, training::SyncEvents& ev,
                                                    std::vector<NodeId> workers) {
        return f->attach(model, ev, std::move(workers));
      });
    }
    sim_ = std::make_unique<ClusterSimulation>(env.engine, params.cluster,
                                               params.make_source(env.seed), env.seed, &env.nodes,
                                               env.topology.hosts());
    sim_->set_runner(runner_.get());
    // A job held after its communication failed may be placed again once the links change.
    if (runner_) env.links.on_change([sim = sim_.get()](auto) { sim->on_links_changed(); });
  }
  void start() { sim_->start(); }
  double progress() const { return sim_->progress(); }
  void report(Results& out) const {
    sim_->report(out);
    if (fabric_) fabric_->report(out);
  }

 private:
  std::unique_ptr<ina::InaFabric> fabric_;  // outlives the jobs' strategies
  std::unique_ptr<CommunicationMode> runner_;
  std::unique_ptr<ClusterSimulation> sim_;
};

}  // namespace

std::unique_ptr<Model> make_cluster_model(ModelSetup& setup) {
  JsonReader system = setup.root.object("system");
  system.ignore("model");
  JsonReader workload = setup.root.object("workload");
  ModelParams params = read_cluster_params(system, workload, setup.hardware, setup.topology,
                                           setup.node_hardware, setup.scenario_dir, &setup.costs);
  system.finish();
  workload.finish();
  check_events(setup.events);
  if (params.communication && params.communication->ina && !setup.network.hosts_switch_programs)
    throw InputError("network.backend", "the \"" + setup.network.backend +
                                            "\" backend cannot end transfers at a switch node, so "
                                            "it cannot host in-network aggregation (a model's "
                                            "sync switchml, atp or dsa)");
  int max_gpus_per_host = 1;
  for (const NodeGroup& g : params.cluster.groups)
    max_gpus_per_host = std::max(max_gpus_per_host, g.gpus_per_node);
  estimate_work(params, max_gpus_per_host, static_cast<int>(setup.topology.hosts().size()),
                setup.estimate);
  return std::make_unique<SimulationModel<ClusterRun>>(
      setup.env, [params = std::move(params)](ModelEnv& env) {
        return std::make_unique<ClusterRun>(env, params);
      });
}

}  // namespace mlsim::cluster
