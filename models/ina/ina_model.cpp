#include "models/ina/ina_model.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <optional>
#include <set>
#include <span>
#include <tuple>

#include "models/ina/arrival_trace.hpp"
#include "models/ina/ina_cluster.hpp"
#include "models/ina/policies.hpp"
#include "models/training/policies.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/collectives/read_costs.hpp"
#include "sim_core/engine/random.hpp"
#include "sim_core/hardware/profile_scaling.hpp"
#include "sim_core/network/topology_hardware.hpp"
#include "sim_core/run/events.hpp"
#include "sim_core/run/simulation_model.hpp"

namespace mlsim::ina {
namespace {

// The host links of a one-switch star: all equal, or the model cannot place its hosts.
Link star_host_link(const Topology& topology) {
  std::size_t switches = 0;
  for (const Node& n : topology.nodes())
    if (n.kind == NodeKind::kSwitch) ++switches;
  if (switches != 1 || topology.hosts().empty())
    throw InputError("topology",
                     "the ina model needs one ToR switch with the hosts around it "
                     "(kind \"star\")");
  const Link& first = topology.link(topology.out_links(topology.hosts().front()).at(0));
  for (NodeId h : topology.hosts()) {
    const auto& out = topology.out_links(h);
    if (out.size() != 1 || topology.link(out[0]).bandwidth != first.bandwidth ||
        topology.link(out[0]).latency != first.latency)
      throw InputError("topology",
                       "the ina model needs every host on one equal link to the switch");
  }
  return first;
}

// The network path: the switch hosting the program (system.switch_node, or the only switch),
// and the link of the first host, whose speed ranks DSA's jobs by communication intensity.
Link network_host_link(const Topology& topology, JsonReader& system, ClusterParams& p) {
  if (system.has("switch_node")) {
    p.switch_node = system.string("switch_node");
    const auto node = topology.find(p.switch_node);
    if (!node || topology.node(*node).kind != NodeKind::kSwitch)
      throw InputError(system.path_of("switch_node"),
                       "'" + p.switch_node + "' is not a switch of the topology");
  } else {
    std::size_t switches = 0;
    for (const Node& n : topology.nodes())
      if (n.kind == NodeKind::kSwitch) ++switches;
    if (switches != 1)
      throw InputError(system.path_of("switch_node"),
                       "the topology has " + std::to_string(switches) +
                           " switches: name the one that hosts the aggregation program");
  }
  if (topology.hosts().empty() || topology.out_links(topology.hosts().front()).empty())
    throw InputError("topology", "the ina model needs hosts linked to the network");
  return topology.link(topology.out_links(topology.hosts().front()).front());
}

}  // namespace

ClusterParams parse_cluster_params(JsonReader& system, JsonReader& workload,
                                   const HardwareCatalog& hardware, const Topology& topology,
                                   const NodeHardware& node_hardware, const NetworkSpec& network,
                                   const std::filesystem::path& scenario_dir, std::uint64_t seed) {
  ClusterParams p;
  p.policy = ina_policies().policies.choose(system, "policy").value;
  // The training core's communication scheduler (docs/training.md): the framework's FIFO by
  // default, or ByteScheduler with its partition and credit in gradient values.
  p.scheduler = system.string_or("scheduler", "fifo");
  training::training_policies().schedulers.get(p.scheduler, system.path_of("scheduler"));
  if (p.scheduler == "bytescheduler") {
    constexpr std::int64_t kMaxValues = std::int64_t{1} << 40;
    p.scheduler_config.partition = system.integer("partition", 1, kMaxValues);
    p.scheduler_config.credit = system.integer("credit", 1, kMaxValues);
    p.ordering =
        training::training_policies().orderings.choose_or(system, "scheduling", "job").value;
  } else {
    for (const char* key : {"partition", "credit", "scheduling"})
      if (system.has(key))
        throw InputError(system.path_of(key),
                         "a ByteScheduler knob: only with system.scheduler \"bytescheduler\"");
  }
  const SwitchSpec& sw = hardware.switch_spec(system.string("switch"), system.path_of("switch"));
  p.data_path = ina_policies().data_paths.choose_or(system, "data_path", "packet").value;
  // ATP's two-level aggregation (aggregation_levels.hpp, docs/ina.md "Two-level aggregation"):
  // a first level at every other ToR holding a job's workers, under a root: the program's switch
  // ("two_level", every shipped figure) or each job's PS's ToR ("two_level_ps_tor", where ATP's
  // paper puts the second level). One key, so that an override of it leaves no root behind.
  const std::string levels = system.string_or("levels", "one_switch");
  if (levels != "one_switch" && levels != "two_level" && levels != "two_level_ps_tor")
    throw InputError(system.path_of("levels"),
                     "must be \"one_switch\" (the default), \"two_level\" (root: "
                     "system.switch_node) or \"two_level_ps_tor\" (root: each job's PS's ToR), "
                     "not \"" +
                         levels + "\"");
  p.two_level = levels != "one_switch";
  p.root_at_ps_tor = levels == "two_level_ps_tor";
  if (p.two_level && p.data_path != DataPathKind::kNetwork)
    throw InputError(system.path_of("levels"),
                     "two_level runs on the network data path (system.data_path \"network\" on "
                     "a topology with racks); the packet path is one switch");
  if (p.two_level && p.policy == PolicyKind::kSwitchMl)
    throw InputError(system.path_of("levels"),
                     "two_level is for ATP and DSA: SwitchML aggregates at one switch (static "
                     "slots per job, no PS to send a rack's partial on to)");
  Link host_link;
  if (p.data_path == DataPathKind::kPacket) {
    // The packet path's links are the model's own: a backend the scenario names would be
    // ignored, so it is refused instead.
    if (network.backend_explicit)
      throw InputError("network.backend",
                       "the ina model's packet data path (system.data_path \"packet\", the "
                       "default) moves packets over its own links and cannot use the \"" +
                           network.backend +
                           "\" backend; set system.data_path to \"network\" to run over it, or "
                           "remove network.backend");
    host_link = star_host_link(topology);
  } else {
    if (!network.hosts_switch_programs)
      throw InputError("network.backend",
                       "the \"" + network.backend +
                           "\" backend cannot end transfers at a switch node, so it cannot host "
                           "ina's switch program (system.data_path \"network\")");
    host_link = network_host_link(topology, system, p);
  }
  p.link_bandwidth = host_link.bandwidth;
  p.link_latency = host_link.latency;
  if (p.link_bandwidth > sw.port_bandwidth)
    throw InputError("topology", "host links are faster than the switch's ports (" +
                                     to_string(sw.port_bandwidth) + ")");
  p.switch_latency = sw.pipeline_latency;
  if (system.has("aggregator_memory") || !sw.aggregators) {
    p.aggregator_memory = system.bytes("aggregator_memory");
  } else {
    // Default: the switch's own pool, count x bytes per slot.
    p.aggregator_memory = system.bytes_or(
        "aggregator_memory",
        std::to_string(sw.aggregators->count * sw.aggregators->bytes_per_slot.count) + "B");
  }
  if (p.aggregator_memory.count <= 0)
    throw InputError(system.path_of("aggregator_memory"), "must be positive");
  // A bound far above any switch's SRAM [assumed], so that a typo is an input error here instead
  // of an aggregator pool that exhausts the simulating host's memory.
  if (p.aggregator_memory.count > (std::int64_t{1} << 30))
    throw InputError(system.path_of("aggregator_memory"), "at most 1GiB");
  p.ecn_threshold_bytes = static_cast<double>(system.bytes_or("ecn_threshold", "100KB").count);
  p.burst_values = static_cast<int>(system.integer_or("burst_values", 1, 1, 1'000'000));
  p.header_bytes = system.bytes_or("header", "60B");
  p.include_input_layers = system.boolean_or("include_input_layers", false);
  // Per wire packet per hop; loss draws come from the "ina.loss" stream of the scenario seed.
  p.loss_rate = system.number_or("loss_rate", 0.0, 0.0, 0.5);
  if (p.two_level && p.loss_rate > 0)
    throw InputError(system.path_of("loss_rate"),
                     "loss is not modelled with system.levels \"two_level\"");
  p.seed = seed;
  p.occupancy_interval = system.duration_or("occupancy_interval", "0s");

  JsonReader atp = system.object_or_empty("atp");
  p.atp_values_per_packet = static_cast<int>(atp.integer_or("values_per_packet", 62, 1, 4096));
  p.sender_threads = static_cast<int>(atp.integer_or("sender_threads", 12, 1, 1024));
  p.window_cap_packets_per_thread = atp.number_or("window_cap_packets", 100, 1, 1e6);
  p.window_increase_bytes = static_cast<double>(atp.bytes_or("window_increase", "1500B").count);
  p.atp_timeout = atp.duration_or("timeout", "1ms");
  if (p.atp_timeout <= Time::zero()) throw InputError(atp.path_of("timeout"), "must be positive");
  atp.finish();

  JsonReader sml = system.object_or_empty("switchml");
  p.switchml_values_per_packet =
      static_cast<int>(sml.integer_or("values_per_packet", 256, 1, 4096));
  p.switchml_timeout = sml.duration_or("timeout", "10ms");
  if (p.switchml_timeout <= Time::zero())
    throw InputError(sml.path_of("timeout"), "must be positive");
  p.switchml_partitions = static_cast<int>(sml.integer_or("partitions", 0, 0, 65535));
  if (sml.has("memory")) {
    p.switchml_memory = sml.bytes("memory");
    if (p.switchml_memory.count <= 0) throw InputError(sml.path_of("memory"), "must be positive");
  }
  sml.finish();

  // Host costs, read as the collective layer reads them. Only the PS's summing rate applies: an
  // INA sender's per-packet cost is inside its window (ATP) or slot (SwitchML) protocol.
  if (std::optional<JsonReader> host = system.optional_object("host")) {
    const std::string where = host->path();
    const collectives::HostCosts costs = collectives::read_host_costs(*host);
    if (costs.message_overhead != Time::zero())
      throw InputError(where + ".message_overhead",
                       "not modelled by ina (its senders pace packets by window or slot)");
    if (costs.per_byte_ns != 0)
      throw InputError(where + ".per_byte_ns",
                       "not modelled by ina (its senders pace packets by window or slot)");
    if (costs.ps_aggregation.bytes_per_s > 0 && p.policy == PolicyKind::kSwitchMl)
      throw InputError(where + ".ps_aggregation", "SwitchML has no parameter server");
    p.ps_aggregation = costs.ps_aggregation;
  }

  // PyTorch ProcessGroupNCCL's default collective timeout, 10 min (pytorch/pytorch PR 110947).
  p.stall_timeout = system.duration_or("stall_timeout", "600s");
  if (p.stall_timeout <= Time::zero())
    throw InputError(system.path_of("stall_timeout"), "must be positive");

  JsonReader dsa = system.object_or_empty("dsa");
  p.selective_retransmission = dsa.boolean_or("selective_retransmission", true);
  if (dsa.has("priority"))
    p.dsa_priority = dsa_priority_kind(dsa.string("priority"), dsa.path_of("priority"));
  dsa.finish();

  // Workload: job templates expanded by count, in order; arrivals explicit, Poisson or a trace.
  // Which GPU measured a profile (workload.profiled_on, or a job's own) is not recorded in
  // PipeDream's files (workloads/dnn/pipedream/README.md): the scenario names it, no default.
  struct ProfiledOn {
    const GpuSpec* gpu = nullptr;
    std::string where;
  };
  std::optional<ProfiledOn> default_profiled_on;
  if (workload.has("profiled_on"))
    default_profiled_on =
        ProfiledOn{&hardware.gpu(workload.string("profiled_on"), workload.path_of("profiled_on")),
                   workload.path_of("profiled_on")};
  std::vector<ProfiledOn> profiled_on;  // per expanded job
  std::map<std::filesystem::path, std::shared_ptr<const DnnProfile>> profiles;
  std::vector<bool> explicit_arrival;
  for (JsonReader& j : workload.objects("jobs")) {
    JobSpec spec;
    spec.model = j.string("model");
    // A job's own aggregation policy (SwitchML beside ATP or DSA on one switch).
    if (j.has("policy")) spec.policy = ina_policies().policies.choose(j, "policy").value;
    if (p.two_level && spec.policy == PolicyKind::kSwitchMl)
      throw InputError(j.path_of("policy"),
                       "a SwitchML job with system.levels \"two_level\" (SwitchML aggregates "
                       "at one switch)");
    std::filesystem::path file = j.string("profile");
    if (file.is_relative()) file = scenario_dir / file;
    auto& profile = profiles[file];
    if (!profile) {
      try {
        profile = std::make_shared<const DnnProfile>(read_pipedream_graph(file));
      } catch (const InputError& e) {
        throw InputError(j.path_of("profile"), e.what());
      }
    }
    spec.profile = profile;
    spec.workers = static_cast<int>(j.integer("workers", 1, 32));
    spec.iterations = static_cast<int>(j.integer("iterations", 1, 1'000'000));
    // The workers' GPU is their hosts' (topology.hardware), no longer the job's.
    reject_moved_to_topology_hardware(
        j, "gpu", "a job's workers run on the GPU topology.hardware puts on their hosts");
    reject_moved_to_topology_hardware(
        j, "compute_scale",
        "a worker's speed is its host's GPU from topology.hardware, and slower or faster "
        "workers host speed changes at \"0s\" in \"events\"");
    ProfiledOn job_profiled_on;
    if (j.has("profiled_on")) {
      job_profiled_on = {&hardware.gpu(j.string("profiled_on"), j.path_of("profiled_on")),
                         j.path_of("profiled_on")};
    } else if (default_profiled_on) {
      job_profiled_on = *default_profiled_on;
    } else {
      throw InputError(workload.path_of("profiled_on"),
                       "needed (here or in each job): the catalog GPU the profiles were measured "
                       "on, from which the platform moves their times to the workers' GPUs");
    }
    // Stragglers are host speed changes now: worker w of the job runs on the host after the
    // hosts of the jobs before it (docs/ina.md).
    reject_moved_key(j, "worker_slowdown", "worker slowdowns (host speed changes)");
    const bool has_arrival = j.has("arrival");
    if (has_arrival) spec.arrival = j.duration("arrival");
    const auto count = j.integer_or("count", 1, 1, 10'000);
    j.finish();
    for (std::int64_t c = 0; c < count; ++c) {
      p.jobs.push_back(spec);
      explicit_arrival.push_back(has_arrival);
      profiled_on.push_back(job_profiled_on);
    }
  }
  if (p.jobs.empty()) throw InputError(workload.path_of("jobs"), "needs at least one job");
  if (p.jobs.size() > 65535) throw InputError(workload.path_of("jobs"), "at most 65535 jobs");
  JsonReader arrivals = workload.object_or_empty("arrivals");
  const std::string process =
      arrivals.choice_or("process", {"explicit", "poisson", "trace"}, "explicit");
  if (process == "poisson") {
    const Time gap = arrivals.duration("mean_interarrival");
    if (gap <= Time::zero())
      throw InputError(arrivals.path_of("mean_interarrival"), "must be positive");
    RandomStream rng(seed, "ina.arrivals");
    Time t = Time::zero();
    for (std::size_t i = 0; i < p.jobs.size(); ++i) {
      if (explicit_arrival[i])
        throw InputError(workload.path_of("jobs"), "a job sets 'arrival' but arrivals are Poisson");
      p.jobs[i].arrival = t;  // the first job arrives at time 0
      t += Time::from_seconds(rng.exponential(1.0 / gap.seconds()));
    }
  }
  if (process == "trace") {
    ArrivalTraceOptions o;
    o.file = arrivals.string("file");
    if (o.file.is_relative()) o.file = scenario_dir / o.file;
    o.time_column = arrivals.string_or("time_column", "arrival_s");
    o.datetime =
        arrivals.choice_or("time_format", {"seconds", "datetime"}, "seconds") == "datetime";
    if (arrivals.has("workers_column")) o.workers_column = arrivals.string("workers_column");
    o.skip_rows = static_cast<std::size_t>(arrivals.integer_or("skip_rows", 0, 0, 1'000'000'000));
    o.time_scale = arrivals.number_or("time_scale", 1.0, 1e-9, 1e9);
    const std::string where = arrivals.path_of("file");
    const std::vector<TraceArrival> trace = read_arrival_trace(o, p.jobs.size(), where);
    if (trace.size() < p.jobs.size())
      throw InputError(where, o.file.string() + " has " + std::to_string(trace.size()) +
                                  " arrivals after skip_rows, the workload has " +
                                  std::to_string(p.jobs.size()) + " jobs");
    // Job i (in the expanded order) takes the i-th arrival, and the trace's worker count if any.
    for (std::size_t i = 0; i < p.jobs.size(); ++i) {
      if (explicit_arrival[i])
        throw InputError(workload.path_of("jobs"), "a job sets 'arrival' but arrivals are a trace");
      JobSpec& job = p.jobs[i];
      job.arrival = trace[i].at;
      if (trace[i].workers == 0) continue;
      if (trace[i].workers > 32)
        throw InputError(where, o.file.string() + ":" + std::to_string(trace[i].line) + ": " +
                                    std::to_string(trace[i].workers) +
                                    " workers; a job has at most 32 (skip_rows or another window)");
      job.workers = trace[i].workers;
    }
  }
  arrivals.finish();
  std::size_t hosts = 0;
  for (const JobSpec& j : p.jobs) hosts += static_cast<std::size_t>(j.workers) + 1;
  if (hosts > topology.hosts().size())
    throw InputError("topology.hosts",
                     "the jobs need " + std::to_string(hosts) +
                         " hosts (workers plus one PS per job), the topology has " +
                         std::to_string(topology.hosts().size()));
  if (p.data_path == DataPathKind::kPacket && hosts > static_cast<std::size_t>(sw.ports))
    throw InputError(system.path_of("switch"), "the jobs need " + std::to_string(hosts) +
                                                   " switch ports, the switch has " +
                                                   std::to_string(sw.ports));

  // Each worker's layer times on the GPU of its host (worker w of job j runs on the host after
  // the hosts of the jobs before it, one PS each), moved from the profiling GPU by the platform
  // (profile_scaling.hpp); one table per (profile, profiling GPU, GPU) for all jobs.
  std::map<std::tuple<const DnnProfile*, const GpuSpec*, const GpuSpec*>,
           std::shared_ptr<const LayerTimes>>
      tables;
  std::size_t next_host = 0;
  for (std::size_t j = 0; j < p.jobs.size(); ++j) {
    JobSpec& job = p.jobs[j];
    std::set<std::string> gpu_names;
    for (int w = 0; w < job.workers; ++w) {
      const NodeId host = topology.hosts()[next_host + static_cast<std::size_t>(w)];
      auto where = [&](std::size_t) {
        return fmt::format("topology.hardware (ina job {} worker {})", j, w);
      };
      const GpuSpec& gpu = node_hardware.gpu(host, where(0));
      gpu_names.insert(gpu.name);
      auto& table = tables[{job.profile.get(), profiled_on[j].gpu, &gpu}];
      if (!table) {
        const auto seconds = profile_seconds_on_hosts(
            *job.profile, p.include_input_layers, *profiled_on[j].gpu, profiled_on[j].where,
            node_hardware, std::span<const NodeId>(&host, 1), where);
        LayerTimes times;
        for (const LayerSeconds& s : *seconds.front())
          times.push_back({Time::from_seconds(s.forward), Time::from_seconds(s.backward)});
        table = std::make_shared<const LayerTimes>(std::move(times));
      }
      job.worker_times.push_back(table);
    }
    job.gpus = fmt::format("{}", fmt::join(gpu_names, "+"));
    next_host += static_cast<std::size_t>(job.workers) + 1;
  }
  return p;
}

std::unique_ptr<Model> make_ina_model(ModelSetup& setup) {
  JsonReader system = setup.root.object("system");
  system.ignore("model");
  JsonReader workload = setup.root.object("workload");
  ClusterParams params =
      parse_cluster_params(system, workload, setup.hardware, setup.topology, setup.node_hardware,
                           setup.network, setup.scenario_dir, setup.seed);
  system.finish();
  workload.finish();
  return std::make_unique<SimulationModel<InaCluster>>(
      setup.env, [params = std::move(params)](ModelEnv& env) {
        return std::make_unique<InaCluster>(env.engine, params, &env.network, &env.topology,
                                            &env.compute);
      });
}

}  // namespace mlsim::ina
