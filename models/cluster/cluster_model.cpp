#include "models/cluster/cluster_model.hpp"

#include "models/cluster/policies.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/hardware/profile_scaling.hpp"
#include "sim_core/network/topology_hardware.hpp"
#include "sim_core/run/events.hpp"
#include "sim_core/run/simulation_model.hpp"

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

std::function<std::unique_ptr<JobSource>(std::uint64_t)> read_jobs(
    JsonReader& workload, const std::vector<GpuType>& types,
    const std::filesystem::path& scenario_dir) {
  JsonReader jobs = workload.object("jobs");
  const std::string kind = jobs.choice("source", {"trace", "poisson"});
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

}  // namespace

ModelParams read_cluster_params(JsonReader& system, JsonReader& workload,
                                const HardwareCatalog& hardware, const Topology& topology,
                                const NodeHardware& node_hardware,
                                const std::filesystem::path& scenario_dir) {
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
  c.series_interval = system.duration_or("series_interval", "1h");
  if (c.series_interval <= Time::zero())
    throw InputError(system.path_of("series_interval"), "must be positive");
  p.make_source = read_jobs(workload, c.types, scenario_dir);
  return p;
}

namespace {

void check_events(const PlatformEvents& events) {
  // Job runtimes come from the trace (scaled per GPU type); a host speed is not modelled.
  if (events.has(EventChange::kSpeed))
    throw InputError("events",
                     "the cluster model does not model host speed changes (job "
                     "runtimes come from the trace and the GPU type)");
}

}  // namespace

std::unique_ptr<Model> make_cluster_model(ModelSetup& setup) {
  JsonReader system = setup.root.object("system");
  system.ignore("model");
  JsonReader workload = setup.root.object("workload");
  ModelParams params = read_cluster_params(system, workload, setup.hardware, setup.topology,
                                           setup.node_hardware, setup.scenario_dir);
  system.finish();
  workload.finish();
  check_events(setup.events);
  return std::make_unique<SimulationModel<ClusterSimulation>>(
      setup.env, [params = std::move(params)](ModelEnv& env) {
        return std::make_unique<ClusterSimulation>(env.engine, params.cluster,
                                                   params.make_source(env.seed), env.seed,
                                                   &env.nodes, env.topology.hosts());
      });
}

}  // namespace mlsim::cluster
