#include "models/commsched/commsched_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "models/commsched/policies.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/base/stats.hpp"
#include "sim_core/hardware/dnn_profile.hpp"
#include "sim_core/hardware/profile_scaling.hpp"
#include "sim_core/network/host_access_links.hpp"
#include "sim_core/network/topology_hardware.hpp"
#include "sim_core/run/events.hpp"
#include "sim_core/run/simulation_model.hpp"

namespace mlsim::commsched {
namespace {

constexpr std::int64_t kMillion = 1'000'000;
constexpr std::int64_t kMaxParameters = 1'000'000'000'000;

// The profile's layers; each worker's layer times are the profile's moved from the GPU it was
// measured on (`profiled_on`) to the GPU of the worker's host (topology.hardware) by the
// platform's scaling (profile_scaling.hpp).
void read_layers(JsonReader& workload, const HardwareCatalog& hardware,
                 const NodeHardware& node_hardware, const std::filesystem::path& scenario_dir,
                 JobSpec& job, std::string& name) {
  reject_moved_to_topology_hardware(
      workload, "gpu", "the workers' GPU is the one topology.hardware puts on their hosts");
  reject_moved_to_topology_hardware(
      workload, "compute_scale",
      "a worker's speed is its host's GPU from topology.hardware, and a slower or faster worker "
      "a host speed change at \"0s\" in \"events\"");
  const DnnProfile profile = read_pipedream_graph_field(workload, "profile", scenario_dir);
  name = profile.name;
  // Which GPU measured PipeDream's profiles is not recorded (workloads/dnn/pipedream/README.md):
  // the scenario names it, no default.
  const GpuSpec& profiled =
      hardware.gpu(workload.string("profiled_on"), workload.path_of("profiled_on"));
  const auto times = profile_seconds_on_hosts(
      profile, false, profiled, workload.path_of("profiled_on"), node_hardware, job.workers,
      [](std::size_t w) {
        return "topology.hardware (commsched worker " + std::to_string(w) + ")";
      });
  for (const LayerProfile& l : profile.layers) {
    if (l.is_input) continue;  // data loading runs on the host, not the GPU
    job.layers.push_back({{}, {}, (l.parameters.count + 3) / 4});  // fp32; times per worker
  }
  if (job.layers.empty())
    throw InputError(workload.path_of("profile"), "the profile has no layers");
  for (const auto& table : times) {
    std::vector<LayerTimes> worker;
    for (const LayerSeconds& s : *table)
      worker.push_back({Time::from_seconds(s.forward), Time::from_seconds(s.backward)});
    job.worker_times.push_back(std::move(worker));
  }
}

}  // namespace

CommschedParams read_commsched_params(JsonReader& system, JsonReader& workload,
                                      const Topology& topology, const HardwareCatalog& hardware,
                                      const NodeHardware& node_hardware,
                                      const std::filesystem::path& scenario_dir) {
  CommschedParams p;
  JobSpec& job = p.job;
  const CommschedPolicies& policies = commsched_policies();
  job.mode = policies.modes.choose_or(system, "mode", "ps").value;
  const bool ps = job.mode == Mode::kParameterServer;
  job.scheduler = policies.schedulers.choose(system, "scheduler").value;
  p.tuner = policies.tuners.choose_or(system, "tuner", "static").value;
  if (job.scheduler == SchedulerKind::kFifo && p.tuner != Tuner::kStatic)
    throw InputError(system.path_of("tuner"),
                     "the fifo scheduler has nothing to tune: use \"static\"");

  // Defaults [code: bytescheduler/common/bytecore.py and docs/scheduling.md]: partition 1M and
  // credit 4M parameters for PS, 8M and 16M suggested for all-reduce.
  p.config.partition =
      system.integer_or("partition", ps ? kMillion : 8 * kMillion, 1, kMaxParameters);
  p.config.credit =
      system.integer_or("credit", ps ? 4 * kMillion : 16 * kMillion, 1, kMaxParameters);

  const auto hosts = static_cast<std::int64_t>(topology.hosts().size());
  if (hosts < (ps ? 2 : 1))
    throw InputError("topology", ps ? "PS mode needs at least two hosts (a worker and a server)"
                                    : "needs at least one host");
  std::int64_t servers = 0;
  if (ps)
    servers = system.integer_or("servers", hosts / 2, 1, hosts - 1);
  else if (system.integer_or("servers", 0, 0, hosts) != 0)
    throw InputError(system.path_of("servers"), "all-reduce mode has no parameter server");
  const std::int64_t workers = system.integer_or("workers", hosts - servers, 1, hosts - servers);
  for (std::int64_t w = 0; w < workers; ++w) job.workers.push_back(topology.hosts()[w]);
  for (std::int64_t s = 0; s < servers; ++s) job.servers.push_back(topology.hosts()[workers + s]);
  for (NodeId h : job.workers) host_access_links(topology, h, "a commsched worker");
  for (NodeId h : job.servers) host_access_links(topology, h, "a commsched parameter server");
  if (ps) {
    job.credit_scope = policies.credit_scopes.choose_or(system, "credit_scope", "push").value;
    job.scheduling = policies.schedulings.choose_or(system, "scheduling", "every_worker").value;
    // ps-lite's connections, as its code sends (docs/commsched.md, "ps-lite's connections").
    job.ps_connections =
        policies.ps_connections.choose_or(system, "ps_connections", "in_order").value;
  } else {
    for (const char* key : {"credit_scope", "scheduling", "ps_connections"})
      if (system.has(key)) throw InputError(system.path_of(key), "only for PS mode");
  }
  // Per-message costs: `transport` names a profile that gives their defaults, the keys override
  // it (docs/commsched.md, "Costs per partition and per credit"). Neither profile is measured:
  // ByteScheduler's paper runs TCP and RDMA but its per-message figures were not readable here
  // [assumed, swept in the docs].
  const Transport transport = policies.transports.choose_or(system, "transport", "none").value;
  const TransportCosts defaults = transport_costs(transport);
  job.message_overhead =
      system.duration_or("message_overhead", fmt::format("{}us", defaults.latency_us));
  job.message_cpu = system.duration_or("message_cpu", fmt::format("{}us", defaults.cpu_us));
  // The framework FIFO's engines (one tensor at a time each; 0 = all ready tensors at once) and
  // ByteScheduler's per-credit delay. Both keys describe the system, so both variants of a
  // FIFO-vs-ByteScheduler sweep accept them; each scheduler reads its own.
  // Default in PS mode: no limit with in-order connections. MXNet's push is an asynchronous
  // engine op that only hands the message to ps-lite and completes on the servers' answer, so
  // the engine's one CPU worker thread bounds nothing [code: apache/mxnet 1.5.0,
  // src/kvstore/kvstore_dist.h KVStoreDist::PushDefault (Engine::PushAsync),
  // src/engine/threaded_engine_perdevice.cc ThreadedEnginePerDevice::PushToExecute
  // (MXNET_CPU_WORKER_NTHREADS, default 1, FIFO queue)]; what serialises a worker's messages is
  // ps-lite's one connection per server, in order (ps_connections above). With shared
  // connections: one engine per server, the closest engine count (the default from 2026-12-07
  // until the connections were modelled; an engine is not tied to a server).
  // All-reduce: one (Horovod's collectives in order on one stream).
  const bool in_order = ps && job.ps_connections == PsConnections::kInOrder;
  job.fifo_engines = static_cast<int>(
      system.integer_or("fifo_engines", ps ? (in_order ? 0 : servers) : 1, 0, 1'000'000));
  job.credit_delay = system.duration_or("credit_delay", "0s");
  // The servers' summing rate, the platform's PS processing cost (collectives::HostCosts);
  // absent: summing is free, as before the training core.
  if (system.has("ps_aggregation")) {
    if (!ps) throw InputError(system.path_of("ps_aggregation"), "only for PS mode");
    job.ps_aggregation = system.bandwidth("ps_aggregation");
  }
  job.bigarray_bound = system.integer_or("bigarray_bound", kMillion, 1, kMaxParameters);

  // The grid of grid_best and autobyte [code: bytescheduler/common/tuner.py, BO search space in
  // millions of parameters: credit 1-16 (PS) or 4-64 (all-reduce), partition 2-32]; 1M
  // partitions added for PS, ByteScheduler's own default.
  if (p.tuner == Tuner::kGridBest || p.tuner == Tuner::kAutoByte) {
    JsonReader grid = system.object_or_empty("grid");
    auto millions = [](std::vector<std::int64_t> v) {
      for (auto& x : v) x *= kMillion;
      return v;
    };
    auto sizes = [&](std::string_view key, std::vector<std::int64_t> def) {
      if (!grid.has(key)) return def;  // JsonReader has no list default to write back
      auto v = grid.integers(key, 1, kMaxParameters);
      if (v.empty()) throw InputError(grid.path_of(key), "needs at least one size");
      return v;
    };
    p.grid.partitions =
        sizes("partitions", millions(ps ? std::vector<std::int64_t>{1, 2, 4, 8, 16, 32}
                                        : std::vector<std::int64_t>{2, 4, 8, 16, 32}));
    p.grid.credits = sizes("credits", millions(ps ? std::vector<std::int64_t>{1, 2, 4, 8, 16}
                                                  : std::vector<std::int64_t>{4, 8, 16, 32, 64}));
    grid.finish();
  } else {
    system.ignore("grid");
  }
  if (system.has("bo_like"))
    throw InputError(system.path_of("bo_like"),
                     "replaced by \"bo\" (tuner \"bo\": Bayesian optimisation as ByteScheduler's "
                     "search.py runs it)");
  if (p.tuner == Tuner::kBayesian) {
    JsonReader b = system.object_or_empty("bo");
    p.bo.trial_iterations =
        static_cast<std::size_t>(b.integer_or("trial_iterations", 10, 2, 1'000'000));
    p.bo.random_points = static_cast<std::size_t>(b.integer_or("random_points", 10, 0, 1000));
    p.bo.suggested_points = static_cast<std::size_t>(b.integer_or("suggested_points", 4, 0, 1000));
    if (p.bo.random_points + p.bo.suggested_points == 0)
      throw InputError(b.path(), "needs at least one random or suggested point");
    p.bo.xi = b.number_or("xi", 0.1, 0, 1e6);
    // A range in parameters: [low, high] with 1 <= low < high.
    auto range = [&](std::string_view key, std::pair<double, double> def) {
      if (!b.has(key)) return def;
      const std::vector<std::int64_t> v = b.integers(key, 1, kMaxParameters);
      if (v.size() != 2 || v[0] >= v[1])
        throw InputError(b.path_of(key), "expected [low, high] in parameters with low < high");
      return std::pair<double, double>{static_cast<double>(v[0]) / kMillion,
                                       static_cast<double>(v[1]) / kMillion};
    };
    // tuner.py's space, in millions of parameters [code].
    p.bo.credit_range = range("credit_range", ps ? std::pair{1.0, 16.0} : std::pair{4.0, 64.0});
    if (ps) {
      if (b.has("partition_range"))
        throw InputError(b.path_of("partition_range"),
                         "PS mode tunes only the credit (ByteScheduler's partition tuning is "
                         "for all-reduce)");
    } else {
      p.bo.partition_range = range("partition_range", {2.0, 32.0});
    }
    b.finish();
  } else {
    system.ignore("bo");
  }
  if (p.tuner == Tuner::kAutoByte) {
    JsonReader a = system.object_or_empty("autobyte");
    p.autobyte.interval =
        static_cast<std::size_t>(a.integer_or("interval_iterations", 20, 1, 1'000'000));
    p.autobyte.predict_iterations =
        static_cast<std::size_t>(a.integer_or("predict_iterations", 4, 3, 1000));
    if (a.has("noise"))
      throw InputError(a.path_of("noise"),
                       "the noisy-oracle predictor was replaced by a learned meta-network "
                       "(docs/commsched.md, AutoByte); remove the key");
    p.autobyte.min_gain = a.number_or("min_gain", 0.02, 0, 1);
    p.autobyte.restart_cost = a.duration_or("restart_cost", "5s");
    p.autobyte.ridge = a.number_or("ridge", 1e-3, 1e-12, 1e12);
    a.finish();
    p.autobyte.grid = p.grid;
  } else {
    system.ignore("autobyte");
  }
  const auto [up, down] = host_access_links(topology, job.workers[0], "a commsched worker");
  p.probe = Probe{up, down, topology.link(up).latency};

  read_layers(workload, hardware, node_hardware, scenario_dir, job, p.model_name);
  job.samples_per_iteration = workload.number("samples_per_iteration", 1e-9, 1e12);
  job.iterations = static_cast<std::size_t>(workload.integer("iterations", 1, 10'000'000));
  // Bandwidth steps and stragglers are platform events now (every link: "all_links"; a worker:
  // its host's speed).
  reject_moved_key(workload, "bandwidth_changes", "bandwidth changes (\"all_links\": true)");
  reject_moved_key(workload, "stragglers", "stragglers (host speed changes)");
  return p;
}

namespace {

Sharing sharing_of(const Network& network) {
  // The tuners' private runs use a fluid backend; simgrid and ns-3 runs are searched with flow.
  return network.backend_name() == "analytic" ? Sharing::kNone : Sharing::kMaxMin;
}

class CommschedRun {
 public:
  CommschedRun(ModelEnv& env, CommschedParams params)
      : env_(env), params_(std::move(params)), sharing_(sharing_of(env.network)) {}

  void start() {
    SchedulerConfig initial = params_.config;
    if (params_.tuner == Tuner::kGridBest) {
      grid_ = run_grid(params_.job, env_.topology, sharing_, env_.events, params_.grid);
      initial = best_of(grid_);
    }
    job_.emplace(env_.engine, env_.network, env_.compute, params_.job, initial);
    if (params_.tuner == Tuner::kBayesian) {
      bo_.emplace(params_.bo, initial, env_.stream("bo"));
      job_->set_controller(&*bo_);
    }
    if (params_.tuner == Tuner::kAutoByte) {
      autobyte_.emplace(params_.autobyte, env_.network, params_.probe, sharing_);
      job_->set_controller(&*autobyte_);
    }
    job_->start();
  }
  double progress() const { return job_ ? job_->progress() : 0; }
  void report(Results& out) const;

 private:
  ModelEnv& env_;
  CommschedParams params_;
  Sharing sharing_;
  std::vector<GridPoint> grid_;
  std::optional<TrainingJob> job_;
  std::optional<AutoByte> autobyte_;
  std::optional<BayesianTuner> bo_;
};

nlohmann::json to_json(const SchedulerConfig& c) {
  return {{"partition", c.partition}, {"credit", c.credit}};
}

void CommschedRun::report(Results& out) const {
  const TrainingJob& job = *job_;
  const JobSpec& spec = job.spec();
  out.set_metric("finished", job.finished() ? 1 : 0);
  const std::vector<double> times = job.iteration_seconds();
  const double total = job.finished() ? job.finish_time().seconds() : env_.engine.now().seconds();
  out.set_metric("time_s", total);
  out.set_metric("iterations", static_cast<double>(times.size()));
  const double samples = spec.samples_per_iteration * static_cast<double>(spec.workers.size()) *
                         static_cast<double>(job.finished() ? spec.iterations : 0);
  out.set_metric("throughput_samples_per_s", total > 0 ? samples / total : 0);
  ExactQuantiles q;
  for (double t : times) q.add(t);
  if (!times.empty()) out.set_summary("iteration_time", q.summary(), "_s");
  std::size_t restarts = 0;
  for (const ConfigChange& c : job.changes()) restarts += c.restart ? 1 : 0;
  out.set_metric("config_switches", static_cast<double>(job.changes().size()));
  out.set_metric("restarts", static_cast<double>(restarts));
  out.set_metric("paused_s", job.paused().seconds());
  out.set_metric("partition_final", static_cast<double>(job.config().partition));
  out.set_metric("credit_final", static_cast<double>(job.config().credit));
  out.set_metric("messages", static_cast<double>(job.messages()));
  out.set_metric("bytes_sent", static_cast<double>(job.bytes_sent()));
  out.set_metric("bytes_delivered", static_cast<double>(job.bytes_delivered()));
  const NetworkTotals net = env_.network.totals();
  out.set_metric("bytes_undelivered",
                 static_cast<double>(job.bytes_sent() - job.bytes_delivered()));

  TimeSeries series{"iterations", {"iteration", "iteration_time_s", "partition", "credit"}, {}};
  // The configuration in force at each iteration's start.
  std::size_t next_change = 0;
  SchedulerConfig config = job.changes().empty() ? job.config() : job.changes().front().from;
  for (std::size_t i = 0; i < times.size(); ++i) {
    const Time at = job.iteration_starts()[i];
    while (next_change < job.changes().size() && job.changes()[next_change].applied <= at)
      config = job.changes()[next_change++].to;
    series.add(at, {static_cast<double>(i), times[i], static_cast<double>(config.partition),
                    static_cast<double>(config.credit)});
  }
  out.add_series(std::move(series));

  nlohmann::json& d = out.details();
  d["model"] = params_.model_name;
  d["network_bytes_delivered"] = net.bytes_delivered.count;
  d["network_transfers_delivered"] = net.transfers_delivered;
  d["initial_config"] = to_json(job.changes().empty() ? job.config() : job.changes().front().from);
  for (const GridPoint& g : grid_) {
    nlohmann::json row = to_json(g.config);
    row["time_s"] = g.time_s;
    d["grid"].push_back(row);
  }
  for (const ConfigChange& c : job.changes())
    d["switches"].push_back({{"iteration", c.iteration},
                             {"decided_s", c.decided.seconds()},
                             {"applied_s", c.applied.seconds()},
                             {"from", to_json(c.from)},
                             {"to", to_json(c.to)},
                             {"restart", c.restart}});
  if (bo_)
    for (const BayesianTrial& t : bo_->trials()) {
      nlohmann::json row = to_json(t.config);
      row["mean_iteration_s"] = t.mean_iteration_s;
      row["registered"] = t.registered;
      row["suggested"] = t.suggested;
      d["bo_trials"].push_back(row);
    }
  if (autobyte_)
    for (const AutoByteDecision& a : autobyte_->decisions())
      d["autobyte_decisions"].push_back(
          {{"iteration", a.iteration},
           {"at_s", a.at.seconds()},
           {"measured_bandwidth_gbps", a.measured_bandwidth * 8e-9},
           {"slowdown_max", *std::max_element(a.slowdown.begin(), a.slowdown.end())},
           {"current", to_json(a.current)},
           {"chosen", to_json(a.chosen)},
           {"predicted_current_s", a.predicted_current_s},
           {"predicted_chosen_s", a.predicted_chosen_s},
           {"compute_s", a.stats.compute_s},
           {"comm_s", a.stats.comm_s},
           {"measured_iteration_s", a.measured_iteration_s},
           {"switched", a.switched}});
}

void estimate_work(const CommschedParams& p, WorkEstimate& estimate) {
  // Lower bounds (budget.hpp): with partition P, a layer of N parameters is ceil(N / P) chunks;
  // each chunk crosses the network at least twice per worker and iteration (PS: push and pull;
  // all-reduce: 2(W-1) ring steps per worker), and the job keeps an 8-byte size per chunk plus an
  // in-flight counter per chunk and worker. The tuners' private runs come on top.
  double chunks = 0;
  for (const Layer& layer : p.job.layers)
    chunks += std::ceil(static_cast<double>(layer.parameters) /
                        static_cast<double>(std::max<std::int64_t>(p.config.partition, 1)));
  const auto workers = static_cast<double>(p.job.workers.size());
  const double per_chunk =
      p.job.mode == Mode::kParameterServer ? 2 * workers : 2 * (workers - 1) * workers;
  const double iterations = static_cast<double>(p.job.iterations);
  estimate.transfers.push_back(
      {chunks * per_chunk * iterations,
       fmt::format("{:.3g} gradient chunks x {:.3g} transfers each x {} iterations", chunks,
                   per_chunk, p.job.iterations),
       "system.partition"});
  estimate.memory.push_back({chunks * (8 + 8 * workers),
                             fmt::format("{:.3g} gradient chunks", chunks), "system.partition"});
}

}  // namespace

std::unique_ptr<Model> make_commsched_model(ModelSetup& setup) {
  JsonReader system = setup.root.object("system");
  system.ignore("model");
  JsonReader workload = setup.root.object("workload");
  CommschedParams params = read_commsched_params(system, workload, setup.topology, setup.hardware,
                                                 setup.node_hardware, setup.scenario_dir);
  system.finish();
  workload.finish();
  estimate_work(params, setup.estimate);
  return std::make_unique<SimulationModel<CommschedRun>>(
      setup.env, [params = std::move(params)](ModelEnv& env) {
        return std::make_unique<CommschedRun>(env, params);
      });
}

}  // namespace mlsim::commsched
