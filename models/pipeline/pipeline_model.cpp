#include "models/pipeline/pipeline_model.hpp"

#include <algorithm>
#include <set>
#include <string>

#include "models/pipeline/policies.hpp"
#include "models/pipeline/stage_memory.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/collectives/read_costs.hpp"
#include "sim_core/hardware/cost_model.hpp"
#include "sim_core/hardware/dnn_profile.hpp"
#include "sim_core/run/events.hpp"
#include "sim_core/run/simulation_model.hpp"

namespace mlsim::pipeline {

TrainingParams read_training_params(JsonReader& system, JsonReader& workload,
                                    const Topology& topology, const HardwareCatalog& hardware,
                                    const std::filesystem::path& scenario_dir) {
  TrainingParams p;
  p.policy = pipeline_policies().policies.choose(system, "policy").value;
  const auto hosts = static_cast<std::int64_t>(topology.hosts().size());
  reject_moved_key(system, "stages", "the number of hosts the job uses (\"hosts\")");
  const auto job_hosts = static_cast<std::size_t>(
      system.integer_or("hosts", hosts, 1, std::max<std::int64_t>(hosts, 1)));
  p.schedule = pipeline_policies().schedules.choose_or(system, "schedule", "1f1b").value;
  // GPipe's flush: every 4 x hosts micro-batches by default [assumed: GPipe (Huang et al.,
  // NeurIPS 2019) finds the bubble negligible from 4 micro-batches per stage on; not in
  // ../shared/papers.md].
  if (p.schedule == training::PipelineSchedule::Kind::kGPipe) {
    p.gpipe_group = static_cast<std::size_t>(system.integer_or(
        "micro_batches_per_flush", 4 * static_cast<std::int64_t>(job_hosts), 1, 100'000'000));
  } else if (system.has("micro_batches_per_flush")) {
    throw InputError(system.path_of("micro_batches_per_flush"),
                     "only a \"gpipe\" schedule flushes (system.schedule is \"1f1b\")");
  }
  // AutoPipe's planner: the exact search by default, the DP, or the RL agent and its options.
  if (p.policy == Policy::kAutoPipe) {
    p.planner = pipeline_policies().planners.choose_or(system, "planner", "exact").value;
  } else if (system.has("planner")) {
    throw InputError(system.path_of("planner"), "only the \"autopipe\" policy has a planner");
  }
  if (p.policy == Policy::kAutoPipe) {
    p.switching =
        pipeline_policies().switchings.choose_or(system, "switching", "drain_and_copy").value;
  } else if (system.has("switching")) {
    throw InputError(system.path_of("switching"), "only the \"autopipe\" policy switches");
  }
  if (p.planner == Planner::kRl) {
    JsonReader rl = system.object_or_empty("rl");
    // [inferred] defaults (RlOptions, rl_planner.hpp): the paper's training budget is not readable.
    const RlOptions d;
    p.rl.episodes = static_cast<std::size_t>(
        rl.integer_or("episodes", static_cast<std::int64_t>(d.episodes), 2, 1'000'000));
    p.rl.batch = static_cast<std::size_t>(
        rl.integer_or("batch", static_cast<std::int64_t>(d.batch), 2, 100'000));
    p.rl.learning_rate = rl.number_or("learning_rate", d.learning_rate, 1e-9, 100);
    rl.finish();
  } else if (system.has("rl")) {
    throw InputError(system.path_of("rl"), "only the \"rl\" planner (system.planner) is trained");
  }
  p.min_gain = system.number_or("min_gain", 0.05, 0, 1);
  p.migrated_state_factor = system.number_or("migrated_state_factor", 2, 0, 100);
  // PipeDream's optimizer options, with its command-line defaults (pipedream_partitioner.hpp).
  p.straight = system.boolean_or("straight_pipeline", false);
  if (system.has("activation_compression_ratio"))
    p.activation_compression_ratio = system.number("activation_compression_ratio", 1e-6, 1e9);
  // GPU memory as a constraint (stage_memory.hpp): off by default, as PipeDream's
  // --use_memory_constraint.
  {
    const MemorySettings memory = read_memory_settings(system);
    p.memory_constraint = memory.constraint;
    p.memory_capacity_override = memory.capacity;
    p.optimizer_state_factor = memory.optimizer_state_factor;
  }
  // PipeDream's hierarchical solve (pipedream_partitioner.hpp): the optimizer's
  // --all_num_machines and --network_bandwidths, innermost level first. The star's one link per
  // host has no servers, so the levels are the optimizer's input (its user's view of the
  // cluster), not the run's network; the outermost level's bandwidth defaults to the job's
  // narrowest host link, the topology's.
  if (system.has("pipedream_levels")) {
    const std::string where = system.path_of("pipedream_levels");
    if (p.policy != Policy::kPipeDream)
      throw InputError(where, "only the \"pipedream\" policy runs PipeDream's optimizer");
    if (p.memory_constraint)
      throw InputError(where,
                       "PipeDream's memory check (system.memory) is not modelled with levels");
    std::vector<JsonReader> levels = system.objects("pipedream_levels");
    if (levels.empty()) throw InputError(where, "expected at least one level");
    std::size_t product = 1;
    for (std::size_t l = 0; l < levels.size(); ++l) {
      JsonReader& level = levels[l];
      PipeDreamOptions::Level v;
      v.machines = static_cast<std::size_t>(level.integer("machines", 1, 1'000'000));
      product *= v.machines;
      if (level.has("bandwidth"))
        v.bandwidth = level.bandwidth("bandwidth").bytes_per_s;
      else if (l + 1 < levels.size())
        throw InputError(level.path_of("bandwidth"),
                         "required below the outermost level (only that one defaults to the "
                         "hosts' links)");
      level.finish();
      p.pipedream_levels.push_back(v);
      if (product > job_hosts) break;
    }
    if (product != job_hosts)
      throw InputError(where, "the levels' machines multiply to " + std::to_string(product) +
                                  ", not the job's " + std::to_string(job_hosts) + " hosts");
  }
  // The collective layer's costs for every message and all-reduce (docs/collectives.md).
  p.collective_costs =
      collectives::read_message_costs(system, "the pipeline model has no parameter server");

  const DnnProfile profile = read_pipedream_graph_field(workload, "profile", scenario_dir);
  p.layers = layer_costs(profile);
  if (p.straight && p.layers.size() < job_hosts)
    throw InputError(workload.path_of("profile"),
                     "the profile has " + std::to_string(p.layers.size()) +
                         " layers, fewer than the " + std::to_string(job_hosts) +
                         " stages of a straight pipeline on that many hosts");
  // Which GPU measured PipeDream's profiles is not recorded in the files or their repository
  // (workloads/dnn/pipedream/README.md), so the scenario must say which catalog GPU it takes
  // them to be from: no default.
  p.profiled_on = &hardware.gpu(workload.string("profiled_on"), workload.path_of("profiled_on"));
  p.samples_per_minibatch = workload.number("samples_per_minibatch", 1, 1e9);
  p.minibatches = static_cast<std::size_t>(workload.integer("minibatches", 1, 100'000'000));

  // GPU speeds and bandwidth changes are platform events now.
  reject_moved_key(workload, "gpu_speed", "GPU speeds (host speed changes at \"0s\")");
  reject_moved_key(workload, "changes",
                   "GPU speed and host bandwidth changes (host speed; "
                   "\"links_of\" a host)");
  place_stages(p, topology, job_hosts);
  return p;
}

void apply_memory_limit(TrainingParams& p, const NodeHardware& hardware, const JsonReader& system) {
  p.memory = {};
  if (!p.memory_constraint) return;
  const std::size_t H = p.hosts.size();
  std::set<std::string> gpus;
  for (std::size_t h = 0; h < H; ++h) {
    const GpuSpec& gpu =
        hardware.gpu(p.hosts[h], "topology.hardware (pipeline host " + std::to_string(h) + ")");
    gpus.insert(gpu.name);
    p.memory.capacity.push_back(p.memory_capacity_override
                                    ? *p.memory_capacity_override
                                    : static_cast<double>(gpu.hbm_capacity.count));
  }
  p.memory.optimizer_state_factor = p.optimizer_state_factor;
  // Whether any configuration fits depends only on the sizes, the hosts' memory and the
  // schedule, not on speeds or links: checked here, before anything runs.
  const bool pipedream = p.policy == Policy::kPipeDream;
  StageMemory check(p.layers, p.memory, {p.schedule, p.gpipe_group}, H,
                    pipedream ? MemoryRule::kPipeDream : MemoryRule::kMlsim);
  check.set_straight(p.straight);
  if (check.any_fits()) return;
  std::string names;
  for (const std::string& g : gpus) names += (names.empty() ? "" : ", ") + g;
  const double smallest = *std::min_element(p.memory.capacity.begin(), p.memory.capacity.end());
  const std::string path = p.memory_capacity_override ? system.path_of("memory") + ".capacity"
                                                      : system.path_of("memory") + ".constraint";
  throw InputError(
      path,
      "no configuration of the " + std::to_string(p.layers.size()) + " layers on " +
          std::to_string(H) + " hosts has every stage fit in " +
          to_string(Bytes{static_cast<std::int64_t>(smallest)}) + " of GPU memory per host (" +
          (p.memory_capacity_override ? std::string("system.memory.capacity")
                                      : "topology.hardware: " + names) +
          ", " + (pipedream ? "PipeDream's --use_memory_constraint check" : "mlsim's accounting") +
          ", docs/pipeline.md \"GPU memory\"); give the job more hosts or GPUs with more memory");
}

void place_stages(TrainingParams& p, const Topology& topology, std::size_t hosts) {
  p.hosts.clear();
  p.host_links.clear();
  p.latency_out.clear();
  p.latency_in.clear();
  for (std::size_t i = 0; i < hosts; ++i) {
    const NodeId h = topology.hosts()[i];
    p.hosts.push_back(h);
    const AccessLinks links = host_access_links(topology, h, "pipeline host " + std::to_string(i));
    p.host_links.push_back(links);
    p.latency_out.push_back(topology.link(links.up).latency.seconds());
    p.latency_in.push_back(topology.link(links.down).latency.seconds());
  }
}

void check_stage_gpus(const TrainingParams& p, const NodeHardware& hardware,
                      const std::string& profiled_on_where) {
  for (std::size_t s = 0; s < p.hosts.size(); ++s) {
    const std::string where = "topology.hardware (pipeline host " + std::to_string(s) + ")";
    const GpuSpec& gpu = hardware.gpu(p.hosts[s], where);
    // Throws at the GPU lacking an FP32 rate, before any layer is priced.
    scale_profiled_time(1, 0, Dtype::kFp32, *p.profiled_on, gpu, profiled_on_where, where);
  }
}

std::unique_ptr<Model> make_pipeline_model(ModelSetup& setup) {
  JsonReader system = setup.root.object("system");
  system.ignore("model");
  JsonReader workload = setup.root.object("workload");
  TrainingParams params =
      read_training_params(system, workload, setup.topology, setup.hardware, setup.scenario_dir);
  check_stage_gpus(params, setup.node_hardware, workload.path_of("profiled_on"));
  apply_memory_limit(params, setup.node_hardware, system);
  params.seed = setup.seed;
  system.finish();
  workload.finish();
  return std::make_unique<SimulationModel<PipelineTraining>>(
      setup.env, [params = std::move(params)](ModelEnv& env) {
        return std::make_unique<PipelineTraining>(env.engine, env.network, env.compute,
                                                  env.host_speeds, env.links, params);
      });
}

}  // namespace mlsim::pipeline
