#include "models/cluster/communication_mode.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "models/cluster/pipeline_job.hpp"
#include "models/llm_training/megatron_core_job.hpp"
#include "models/llm_training/megatron_op_pricer.hpp"
#include "models/pipeline/autopipe_planner.hpp"
#include "models/pipeline/dp_planner.hpp"
#include "models/pipeline/pipedream_partitioner.hpp"
#include "models/pipeline/route_conditions.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/network/host_access_links.hpp"

namespace mlsim::cluster {

const char* stage_planner_name(StagePlanner p) {
  switch (p) {
    case StagePlanner::kEven:
      return "even";
    case StagePlanner::kPipeDream:
      return "pipedream";
    case StagePlanner::kDp:
      return "dp";
    case StagePlanner::kExact:
      return "exact";
  }
  return "?";
}

StagePlanner parse_stage_planner(const std::string& name, const std::string& where) {
  std::string known;
  for (StagePlanner p :
       {StagePlanner::kEven, StagePlanner::kPipeDream, StagePlanner::kDp, StagePlanner::kExact}) {
    if (name == stage_planner_name(p)) return p;
    known += (known.empty() ? "" : ", ") + std::string(stage_planner_name(p));
  }
  throw InputError(where, "unknown planner \"" + name + "\" (known: " + known +
                              "; models/pipeline's rl planner is not offered here)");
}

struct CommunicationMode::Live {
  Live(Engine& engine, Compute& compute, training::JobSpec spec, const TrainingModel& m)
      : core(engine, compute, std::move(spec)), path(engine, core, m.make_scheduler, m.config) {}
  training::DataParallelJob core;
  // A data-parallel job's path and strategy (the path unused by a pipeline job).
  training::GradientPath path;
  std::unique_ptr<training::GradientSync> sync;
  std::unique_ptr<PipelineJob> pipeline;  // a pipeline job's stages and messages
  Time last_event() const { return pipeline ? pipeline->last_event() : path.last_event(); }
  std::int64_t bytes_sent() const {
    return pipeline ? pipeline->gradient_bytes_sent() : sync->bytes_sent();
  }
  std::int64_t bytes_delivered() const {
    return pipeline ? pipeline->gradient_bytes_delivered() : sync->bytes_delivered();
  }
  std::uint64_t messages() const {
    return pipeline ? pipeline->gradient_messages() : sync->messages();
  }
  std::function<void()> done;
  std::function<void(Failure)> failed;
  EventHandle watchdog;
  std::uint64_t serial = 0;
  int model = 0;
  Time start;
  Time start_work;  // the core's start (after the strategy was ready)
  double compute_only_s = 0;
};

// A Megatron or Chakra job: its graph source and the executor running it on the job's hosts,
// one pass at a time (a Megatron job's one pass holds all its iterations; a Chakra trace is one
// iteration, run again for each); or, for a Megatron model on the training core
// (`megatron.core: "training"`), its MegatronCoreJob, every iteration in one run, and no
// executor.
struct CommunicationMode::GraphLive {
  std::function<std::unique_ptr<workload::GraphSource>()> make_source;
  workload::ExecutorOptions options;
  std::unique_ptr<workload::GraphSource> source;
  std::unique_ptr<workload::GraphExecutor> executor;    // reads the source: destroyed first
  std::unique_ptr<llm_training::MegatronCoreJob> core;  // or this, on the training core
  // The core's busiest worker's kernel time per iteration (what a graph rank's compute_s counts).
  double core_compute_per_iteration = 0;
  std::uint64_t passes_left = 0;  // after the one running
  // Of the passes that ended.
  double compute_done = 0;
  workload::ExecutorCounts counts_done;
  std::int64_t bytes_done = 0;
  std::function<void()> done;
  std::function<void(Failure)> failed;
  EventHandle watchdog;
  std::uint64_t serial = 0;
  int model = 0;
  std::uint64_t iterations = 0;
  std::vector<NodeId> hosts;
  std::vector<int> gpus;
  Time start;
  // The busiest rank's compute (its kernels' time on its GPU), summed over the passes (on the
  // core: per iteration, times the iterations).
  double compute_s() const {
    if (core) return core_compute_per_iteration * static_cast<double>(iterations);
    double c = 0;
    for (const workload::RankReport& r : executor->reports()) c = std::max(c, r.compute_s);
    return compute_done + c;
  }
  bool ran_to_end() const { return core ? core->finished() : executor->done(); }
  // When it last moved on: a node finished (graph), or a compute op ended or a DP chunk came
  // back (core).
  Time last_progress() const {
    if (core) return std::max(core->core().last_compute_end(), core->gradients().last_event());
    return executor->last_progress();
  }
  // When its last rank (worker) finished.
  Time end() const {
    if (core) return core->finish_time();
    Time t;
    for (const workload::RankReport& r : executor->reports()) t = std::max(t, r.finished);
    return t;
  }
  workload::ExecutorCounts counts() const {
    if (core) return core->counts();
    workload::ExecutorCounts c = counts_done;
    const workload::ExecutorCounts& now = executor->counts();
    c.nodes += now.nodes;
    c.kernels += now.kernels;
    c.collectives += now.collectives;
    c.messages += now.messages;
    c.network_collectives += now.network_collectives;
    return c;
  }
  std::int64_t bytes_delivered() const {
    if (core) return core->message_bytes_delivered() + core->gradients().bytes_delivered();
    return bytes_done + executor->network_bytes_delivered();
  }
};

std::string MegatronModel::misfit(int gpus) const {
  const llm_training::ParallelLayout& l = params.layout;
  const int replica = l.tp * l.pp;
  if (gpus < replica || gpus % replica != 0)
    return fmt::format(
        "is a Megatron model of tp x pp = {} GPUs a replica: {} GPUs are not a "
        "whole number of replicas",
        replica, gpus);
  const std::int64_t dp = gpus / replica;
  const std::int64_t per_step = static_cast<std::int64_t>(params.micro_batch) * dp;
  if (params.global_batch % per_step != 0)
    return fmt::format(
        "is a Megatron model whose global batch of {} sequences does not split "
        "into micro-batches of {} over the {} data-parallel replicas of {} GPUs "
        "(the global batch is kept, as Megatron-LM's --global-batch-size)",
        params.global_batch, params.micro_batch, dp, gpus);
  return {};
}

llm_training::ParallelLayout MegatronModel::layout_for(int gpus) const {
  MLSIM_CHECK(misfit(gpus).empty(), "a Megatron job of GPUs its model does not fit");
  llm_training::ParallelLayout l = params.layout;
  l.dp = gpus / (l.tp * l.pp);
  l.micro_batches = params.global_batch / (params.micro_batch * l.dp);
  return l;
}

double MegatronModel::nodes_per_iteration(int gpus) const {
  llm_training::ParallelLayout l = layout_for(gpus);
  l.iterations = 1;
  return llm_training::MegatronSource(l, kernels).expected_nodes();
}

std::vector<pipeline::LayerCost> planner_layer_sizes(const TrainingModel& m) {
  std::vector<pipeline::LayerCost> layers;
  MLSIM_CHECK(m.boundary_bytes.empty() || m.boundary_bytes.size() == m.parameters.size(),
              "a boundary size per layer");
  for (std::size_t l = 0; l < m.parameters.size(); ++l) {
    layers.push_back({0, 0, static_cast<double>(m.activation_bytes[l]),
                      static_cast<double>(m.parameters[l] * m.bytes_per_parameter)});
    if (!m.boundary_bytes.empty()) layers.back().boundary_bytes = m.boundary_bytes[l];
  }
  return layers;
}

bool pipeline_memory_fits(const TrainingModel& m, StagePlanner planner,
                          const std::vector<pipeline::LayerCost>& layers,
                          const std::vector<double>& capacity) {
  if (!m.pipeline.memory.constraint) return true;
  pipeline::StageMemory check(layers, {capacity, m.pipeline.memory.optimizer_state_factor},
                              {m.pipeline.schedule, m.pipeline.micro_batches}, capacity.size(),
                              planner == StagePlanner::kPipeDream ? pipeline::MemoryRule::kPipeDream
                                                                  : pipeline::MemoryRule::kMlsim);
  check.set_straight(m.pipeline.straight);
  return check.any_fits();
}

CommunicationMode::CommunicationMode(Engine& engine, Network& network, Compute& compute,
                                     const CommunicationParams& params, RandomStream draws)
    : engine_(engine),
      network_(network),
      compute_(compute),
      params_(params),
      draws_(draws),
      per_model_(params.models.size()) {
  MLSIM_CHECK(!params_.models.empty(), "the detailed mode needs a training model");
  for (const TrainingModel& m : params_.models) {
    weight_sum_ += m.weight;
    has_megatron_ |= m.megatron != nullptr || m.chakra != nullptr;
    has_megatron_model_ |= m.megatron != nullptr;
    has_memory_limit_ |= m.pipeline.memory.constraint;
  }
}

CommunicationMode::~CommunicationMode() = default;

void CommunicationMode::admit(JobSpec& job) {
  if (job.model < 0) {
    // In proportion to the weights of the models the job's GPU count fits (every profiled
    // model; a Megatron model when it asks for whole replicas that split its global batch,
    // MegatronModel::misfit); one draw per job, in submit order. Without Megatron models every
    // model fits and the draw is as before.
    double sum = weight_sum_;
    int last = static_cast<int>(params_.models.size()) - 1;
    if (has_megatron_) {
      sum = 0;
      last = -1;
      for (std::size_t m = 0; m < params_.models.size(); ++m)
        if (params_.models[m].fits(job.gpus)) {
          sum += params_.models[m].weight;
          if (params_.models[m].weight > 0) last = static_cast<int>(m);
        }
    }
    if (last < 0) return;  // no model fits: timed as in the job-level mode (start)
    double u = draws_.uniform() * sum;
    job.model = last;
    for (std::size_t m = 0; m < params_.models.size(); ++m) {
      if (!params_.models[m].fits(job.gpus)) continue;
      if (u < params_.models[m].weight) {
        job.model = static_cast<int>(m);
        break;
      }
      u -= params_.models[m].weight;
    }
  }
  MLSIM_CHECK(static_cast<std::size_t>(job.model) < params_.models.size(), "unknown model");
  const TrainingModel& chosen = params_.models[static_cast<std::size_t>(job.model)];
  if (chosen.megatron) job.gpus_per_node = chosen.megatron->params.layout.tp;  // a TP group a host
  if (chosen.chakra) job.gpus_per_node = 1;  // a trace rank a host
  if (job.iterations == 0) {
    const double it = chosen.reference_iteration_for(job.gpus);
    job.iterations = static_cast<std::uint64_t>(std::max(1.0, std::round(job.work.seconds() / it)));
  }
}

bool CommunicationMode::start(const JobSpec& job, std::span<const NodeId> hosts,
                              std::span<const int> gpus, int, std::function<void()> done,
                              std::function<void(Failure)> failed) {
  if (job.model < 0) {
    ++without_model_;
    return false;
  }
  const TrainingModel& m = params_.models[static_cast<std::size_t>(job.model)];
  // A Megatron job on one host still runs its tensor-parallel all-reduces (over NVLink/PCIe).
  if (m.megatron || m.chakra)
    return start_megatron(job, hosts, gpus, std::move(done), std::move(failed));
  if (hosts.size() < 2) {
    ++one_host_;
    return false;
  }
  if (m.runs_pipeline(job.stages, job.planner))
    return start_pipeline(job, hosts, std::move(done), std::move(failed));
  training::JobSpec spec;
  spec.parameters = m.parameters;
  spec.workers.assign(hosts.begin(), hosts.end());
  spec.iterations = job.iterations;
  double slowest = 0;
  for (NodeId h : hosts) {
    MLSIM_CHECK(h < m.times.size() && m.times[h], "no layer times for a worker host");
    std::vector<training::LayerTimes> t;
    double per_iteration = 0;
    for (const LayerSeconds& s : *m.times[h]) {
      t.push_back({Time::from_seconds(s.forward), Time::from_seconds(s.backward)});
      per_iteration += t.back().forward.seconds() + t.back().backward.seconds();
    }
    slowest = std::max(slowest, per_iteration);
    spec.times.push_back(std::move(t));
  }
  auto live = std::make_unique<Live>(engine_, compute_, std::move(spec), m);
  training::SyncOptions options;
  options.workers = live->core.spec().workers;
  options.servers = options.workers;  // colocated parameter servers (ps only)
  options.layer_parameters = m.parameters;
  options.bytes_per_parameter = m.bytes_per_parameter;
  options.links = links_;
  live->path.set_ordering(m.ordering);  // before set_sync
  if (m.make_sync) {
    live->sync =
        m.make_sync(training::SyncSetup{engine_, network_, live->path, std::move(options)});
  } else {
    MLSIM_CHECK(sync_builder_ != nullptr, "a model without a sync factory and no builder");
    live->sync =
        sync_builder_(static_cast<std::size_t>(job.model), live->path, live->core.spec().workers);
  }
  live->path.set_sync(live->sync.get());
  live->core.set_gradient_sink(&live->path);
  live->serial = ++serial_;
  live->sync->set_on_failed(failure_callback(job.id, live->serial));
  launch(job, std::move(live), slowest * static_cast<double>(job.iterations), std::move(done),
         std::move(failed));
  return true;
}

// The strategy (or a pipeline's messages) calls it from inside its own delivery: the job is
// freed from a later event.
std::function<void()> CommunicationMode::failure_callback(std::uint64_t id, std::uint64_t serial) {
  return [this, id, serial] {
    engine_.schedule_in(Time::zero(), [this, id, serial] { fail(id, serial, Failure::kNoRoute); });
  };
}

void CommunicationMode::launch(const JobSpec& job, std::unique_ptr<Live> live,
                               double compute_only_s, std::function<void()> done,
                               std::function<void(Failure)> failed) {
  live->done = std::move(done);
  live->failed = std::move(failed);
  live->model = job.model;
  live->start = engine_.now();
  live->compute_only_s = compute_only_s;
  const std::uint64_t id = job.id;
  const std::uint64_t serial = live->serial;
  // The core calls this from inside its own call chain: free the job from a later event.
  live->core.set_on_finished([this, id, serial] {
    engine_.schedule_in(Time::zero(), [this, id, serial] { finish(id, serial); });
  });
  Live& started = *live;
  live_.emplace(id, std::move(live));
  // A strategy may hold the start until it has its resources (a SwitchML partition); the time
  // waiting counts as the job's (it holds its GPUs).
  // The watchdog runs from the core's start (a SwitchML job waiting for a partition holds its
  // GPUs but is not stalled).
  auto go = [this, id, &started] {
    started.start_work = engine_.now();
    arm_watchdog(id, started);
    started.core.start();
  };
  if (started.sync)
    started.sync->when_ready(go);
  else
    go();
}

StageLayout CommunicationMode::plan_stages(const JobSpec& job, const TrainingModel& m,
                                           std::span<const NodeId> hosts) const {
  const StagePlanner planner = m.planner_for(job.planner);
  if (planner == StagePlanner::kEven)
    return split_stages(m.reference_layer_s, m.stages_for(job.stages), hosts.size());
  hosts = planned_hosts(m, hosts);
  // models/pipeline's planners over the job's hosts as placed, each host with its own GPU's
  // layer times (speed 1: the cluster model has no speed changes) and its access links' current
  // bandwidth and latencies. They plan one profiled batch per minibatch, as the pipeline model
  // does; the run's micro-batch is a fraction of it (start_pipeline), which scales compute and
  // activations alike but not the all-reduce of a replicated stage [assumed: the plan for a
  // profiled batch is kept].
  MLSIM_CHECK(links_ != nullptr, "a planned pipeline job needs the run's link conditions");
  const std::vector<pipeline::LayerCost> layers = planner_layer_sizes(m);
  // Under a memory limit (`pipeline.memory`), each host's GPU memory; nothing that fits: an
  // empty layout (start_pipeline reports the job failed, Failure::kNoMemory).
  const std::vector<double> capacity = host_memory(m, hosts);
  if (m.pipeline.memory.constraint && !pipeline_memory_fits(m, planner, layers, capacity))
    return {};
  pipeline::Conditions c;
  for (NodeId h : hosts) {
    MLSIM_CHECK(h < m.times.size() && m.times[h], "no layer times for a worker host");
    pipeline::StageHost sh;
    for (const LayerSeconds& s : *m.times[h]) {
      sh.forward_s.push_back(s.forward);
      sh.backward_s.push_back(s.backward);
    }
    c.hosts.push_back(std::move(sh));
    const AccessLinks a = host_access_links(links_->topology(), h, "a cluster node");
    c.bandwidth.push_back(
        std::min(links_->bandwidth(a.up).bytes_per_s, links_->bandwidth(a.down).bytes_per_s));
    c.latency_out.push_back(links_->latency(a.up).seconds());
    c.latency_in.push_back(links_->latency(a.down).seconds());
  }
  // Links beyond the hosts' own (a rack's uplink): the routes, as the pipeline model sees them.
  c.routes = pipeline::host_routes(*links_, hosts).routes;
  // GPipe is timed with a flush every M micro-batches of a replica, where the run flushes once
  // per iteration (N / r of them): N depends on the replicas the planner is choosing [assumed:
  // the planner's group is M, not measured against the run's].
  // The memory limit as the pipeline model passes it: PipeDream's --use_memory_constraint
  // check for its optimizer, mlsim's accounting for the DP and the branch and bound.
  const pipeline::PlannerOptions o{m.pipeline.straight,
                                   {m.pipeline.schedule, m.pipeline.micro_batches},
                                   {capacity, m.pipeline.memory.optimizer_state_factor}};
  pipeline::Partition p;
  switch (planner) {
    case StagePlanner::kPipeDream:
      p = pipeline::pipedream_partition(layers, c, {m.pipeline.straight, std::nullopt, capacity});
      break;
    case StagePlanner::kDp:
      p = pipeline::dp_plan(layers, c, o).partition;
      break;
    default:
      p = pipeline::autopipe_plan(layers, c, o).partition;
  }
  StageLayout layout;
  layout.first_layer = p.first;
  for (std::size_t s = 0; s < p.stages(); ++s) layout.replicas.push_back(p.replication(s));
  return layout;
}

std::span<const NodeId> CommunicationMode::planned_hosts(const TrainingModel& m,
                                                         std::span<const NodeId> hosts) {
  // A straight pipeline has one host per stage and at least one layer per stage, so a job placed
  // on more hosts than its model has layers plans over the first as many hosts as layers; the
  // rest stay idle for the job's run (start_pipeline uses only the hosts the layout counts).
  if (m.pipeline.straight && hosts.size() > m.parameters.size())
    return hosts.first(m.parameters.size());
  return hosts;
}

std::vector<double> CommunicationMode::host_memory(const TrainingModel& m,
                                                   std::span<const NodeId> hosts) {
  std::vector<double> capacity;
  if (!m.pipeline.memory.constraint) return capacity;
  for (NodeId h : hosts) {
    MLSIM_CHECK(h < m.pipeline.memory_capacity.size() && m.pipeline.memory_capacity[h] > 0,
                "no GPU memory for a pipeline host");
    capacity.push_back(m.pipeline.memory_capacity[h]);
  }
  return capacity;
}

bool CommunicationMode::placement_limited(const JobSpec& job) const {
  if (job.model < 0) return false;
  const TrainingModel& m = params_.models[static_cast<std::size_t>(job.model)];
  return !m.megatron && !m.chakra && m.pipeline.memory.constraint &&
         m.runs_pipeline(job.stages, job.planner) &&
         m.planner_for(job.planner) != StagePlanner::kEven;
}

bool CommunicationMode::runs_on(const JobSpec& job, std::span<const NodeId> hosts) const {
  // One host: the job-level timing (start() simulates no one-host profiled job).
  if (!placement_limited(job) || hosts.size() < 2) return true;
  const TrainingModel& m = params_.models[static_cast<std::size_t>(job.model)];
  const StagePlanner planner = m.planner_for(job.planner);
  std::vector<double> capacity = host_memory(m, planned_hosts(m, hosts));
  auto key = std::tuple{job.model, static_cast<int>(planner), std::move(capacity)};
  if (const auto it = fits_cache_.find(key); it != fits_cache_.end()) return it->second;
  const bool fits = pipeline_memory_fits(m, planner, planner_layer_sizes(m), std::get<2>(key));
  fits_cache_.emplace(std::move(key), fits);
  return fits;
}

// A pipeline job (pipeline_job.hpp): the first hosts of the placement, in placement order, stage
// by stage, as many as its planner's stages have replicas. An iteration processes one profiled
// batch per host used in N = M x L micro-batches (L the least common multiple of the stages'
// replicas, so that every replica of a stage gets N / r of them), so each op and activation
// takes hosts used / N of the profile's (stages / M when every stage has as many replicas).
bool CommunicationMode::start_pipeline(const JobSpec& job, std::span<const NodeId> hosts,
                                       std::function<void()> done,
                                       std::function<void(Failure)> failed) {
  const TrainingModel& m = params_.models[static_cast<std::size_t>(job.model)];
  StageLayout layout = plan_stages(job, m, hosts);
  if (layout.replicas.empty()) {
    // No configuration fits these hosts' memory: reported from an event, as every failure.
    const std::uint64_t id = job.id;
    no_memory_[id] = engine_.schedule_in(Time::zero(), [this, id, failed = std::move(failed)] {
      no_memory_.erase(id);
      ++no_memory_jobs_;
      failed(Failure::kNoMemory);
    });
    return true;
  }
  const std::size_t micro_batches = m.pipeline.micro_batches;
  const double scale = static_cast<double>(layout.workers()) /
                       static_cast<double>(micro_batches * layout.rounds_multiple());
  training::JobSpec spec;
  spec.parameters = m.parameters;
  spec.workers.assign(hosts.begin(), hosts.begin() + static_cast<std::ptrdiff_t>(layout.workers()));
  spec.iterations = job.iterations;
  double slowest = 0;  // the busiest worker's compute per iteration
  for (std::size_t w = 0; w < spec.workers.size(); ++w) {
    const NodeId h = spec.workers[w];
    MLSIM_CHECK(h < m.times.size() && m.times[h], "no layer times for a worker host");
    std::vector<training::LayerSeconds> t;
    for (const LayerSeconds& s : *m.times[h]) t.push_back({s.forward * scale, s.backward * scale});
    std::size_t stage = 0;
    while (layout.first_worker(stage + 1) <= w) ++stage;
    const std::size_t r = layout.replicas[stage];
    double per_iteration = 0;
    for (std::size_t l = layout.first_layer[stage]; l < layout.first_layer[stage + 1]; ++l)
      per_iteration += t[l].forward + t[l].backward;
    // Its micro-batches: N / r (round-robin over the stage's replicas).
    const std::size_t mine = micro_batches * layout.rounds_multiple() / r;
    slowest = std::max(slowest, per_iteration * static_cast<double>(mine));
    spec.layer_seconds.push_back(std::move(t));
  }
  auto live = std::make_unique<Live>(engine_, compute_, std::move(spec), m);
  live->serial = ++serial_;
  PipelineJob::Options o;
  o.schedule = m.pipeline.schedule;
  o.micro_batches = micro_batches;
  // What crosses each cut: the same bytes the planners priced (planner_layer_sizes: every
  // activation made before the cut and consumed after it), scaled to the micro-batch.
  const std::vector<pipeline::LayerCost> sizes = planner_layer_sizes(m);
  for (std::size_t s = 0; s + 1 < layout.stages(); ++s)
    o.boundary_bytes.push_back(
        std::llround(sizes[layout.first_layer[s + 1] - 1].cut_bytes() * scale));
  o.gradients.make_scheduler = m.make_scheduler;
  o.gradients.config = m.config;
  o.gradients.make_sync = m.make_sync;
  o.gradients.sync.bytes_per_parameter = m.bytes_per_parameter;
  o.gradients.sync.links = links_;
  MLSIM_CHECK(o.gradients.make_sync != nullptr, "a pipeline job needs a registered strategy");
  live->pipeline =
      std::make_unique<PipelineJob>(engine_, network_, live->core, std::move(layout), std::move(o),
                                    failure_callback(job.id, live->serial));
  live->core.set_schedule(&live->pipeline->schedule());
  live->core.set_gradient_sink(&live->pipeline->gradients());
  live->core.set_op_observer(live->pipeline.get());
  launch(job, std::move(live), slowest * static_cast<double>(job.iterations), std::move(done),
         std::move(failed));
  return true;
}

void CommunicationMode::arm_watchdog(std::uint64_t id, Live& live) {
  if (params_.stall_timeout <= Time::zero()) return;
  const Time last = std::max({live.start_work, live.core.last_compute_end(), live.last_event()});
  const std::uint64_t serial = live.serial;
  live.watchdog = engine_.schedule_at(last + params_.stall_timeout,
                                      [this, id, serial] { on_watchdog(id, serial); });
}

// Fires at the earliest time the job can have stalled for the whole timeout; if something
// happened since, it looks again from the last progress.
void CommunicationMode::on_watchdog(std::uint64_t id, std::uint64_t serial) {
  auto it = live_.find(id);
  if (it == live_.end() || it->second->serial != serial) return;
  Live& live = *it->second;
  if (live.core.finished()) return;  // its end is an event away
  const Time last = std::max({live.start_work, live.core.last_compute_end(), live.last_event()});
  if (engine_.now() - last < params_.stall_timeout) {
    arm_watchdog(id, live);
    return;
  }
  record_stall(id, live.model, live.core.spec().workers.size(), last,
               {{"retransmission_timeouts", live.sync ? live.sync->timeouts() : 0}});
  fail(id, serial, Failure::kStalled);
}

void CommunicationMode::finish(std::uint64_t id, std::uint64_t serial) {
  auto it = live_.find(id);
  // Killed after its last iteration but before this event (a failure at the same instant).
  if (it == live_.end() || it->second->serial != serial) return;
  std::unique_ptr<Live> live = std::move(it->second);
  live_.erase(it);
  engine_.cancel(live->watchdog);
  count_finished(live->model, live->core.spec().iterations,
                 (live->core.finish_time() - live->start).seconds(), live->compute_only_s);
  bytes_sent_ += live->bytes_sent();
  bytes_delivered_ += live->bytes_delivered();
  messages_ += live->messages();
  if (live->pipeline) {
    ++pipeline_jobs_;
    activation_bytes_sent_ += live->pipeline->activation_bytes_sent();
    activation_bytes_delivered_ += live->pipeline->activation_bytes_delivered();
  }
  observe(id, *live, TrainingRecord::Outcome::kFinished, live->core.finish_time());
  std::function<void()> done = std::move(live->done);
  live.reset();
  done();
}

void CommunicationMode::count_finished(int model, std::uint64_t iterations, double useful_s,
                                       double compute_only_s) {
  ++simulated_;
  PerModel& pm = per_model_[static_cast<std::size_t>(model)];
  ++pm.jobs;
  pm.useful_s += useful_s;
  pm.compute_only_s += compute_only_s;
  iterations_ += iterations;
  useful_s_ += useful_s;
  compute_only_s_ += compute_only_s;
  if (compute_only_s > 0) slowdown_.add(useful_s / compute_only_s);
}

void CommunicationMode::record_stall(std::uint64_t id, int model, std::size_t hosts,
                                     Time last_progress, nlohmann::json::object_t extra) {
  ++stalled_;
  nlohmann::json entry = {{"job", id},
                          {"model", params_.models[static_cast<std::size_t>(model)].name},
                          {"hosts", hosts},
                          {"stalled_at_s", engine_.now().seconds()},
                          {"last_progress_s", last_progress.seconds()}};
  for (auto& [key, value] : extra) entry[key] = std::move(value);
  stalled_jobs_.push_back(std::move(entry));
}

void CommunicationMode::fail(std::uint64_t id, std::uint64_t serial, Failure why) {
  auto it = live_.find(id);
  if (it == live_.end() || it->second->serial != serial) return;  // killed meanwhile
  std::function<void(Failure)> failed = std::move(it->second->failed);
  end_unfinished(id, TrainingRecord::Outcome::kFailed);
  failed(why);
}

void CommunicationMode::kill(std::uint64_t id) {
  if (auto it = no_memory_.find(id); it != no_memory_.end()) {
    engine_.cancel(it->second);
    no_memory_.erase(it);
    return;
  }
  if (graphs_.count(id) != 0) {
    end_graph_unfinished(id, TrainingRecord::Outcome::kKilled);
    return;
  }
  MLSIM_CHECK(live_.count(id) != 0, "killing a job that is not simulated");
  end_unfinished(id, TrainingRecord::Outcome::kKilled);
}

void CommunicationMode::end_unfinished(std::uint64_t id, TrainingRecord::Outcome outcome) {
  auto it = live_.find(id);
  std::unique_ptr<Live> live = std::move(it->second);
  live_.erase(it);
  engine_.cancel(live->watchdog);
  ++(outcome == TrainingRecord::Outcome::kKilled ? killed_ : failed_);
  // What its strategy sent so far crossed the network: it stays in the traffic totals. Its
  // time counts in none of the statistics (the cluster counts it as lost GPU time).
  bytes_sent_ += live->bytes_sent();
  bytes_delivered_ += live->bytes_delivered();
  messages_ += live->messages();
  if (live->pipeline) {
    activation_bytes_sent_ += live->pipeline->activation_bytes_sent();
    activation_bytes_delivered_ += live->pipeline->activation_bytes_delivered();
  }
  observe(id, *live, outcome, engine_.now());
  // Destroying the strategy cancels its collectives' transfers and events; destroying the core
  // cancels its ops in progress (docs/training.md).
  live.reset();
}

void CommunicationMode::observe(std::uint64_t id, const Live& live, TrainingRecord::Outcome outcome,
                                Time end) const {
  if (!observer_) return;
  TrainingRecord r;
  r.outcome = outcome;
  r.id = id;
  r.model = live.model;
  r.hosts = live.core.spec().workers;
  r.iterations = live.core.spec().iterations;
  r.start = live.start;
  r.end = end;
  r.compute_only_s = live.compute_only_s;
  const std::size_t layers = live.core.spec().parameters.size();
  for (std::size_t w = 0; w < r.hosts.size(); ++w) {
    r.updates.emplace_back();
    for (std::size_t l = 0; l < layers; ++l) r.updates.back().push_back(live.core.updates(w, l));
  }
  for (std::int64_t p : live.core.spec().parameters)
    r.gradient_bytes +=
        p * params_.models[static_cast<std::size_t>(live.model)].bytes_per_parameter;
  r.bytes_sent = live.bytes_sent();
  r.bytes_delivered = live.bytes_delivered();
  if (live.pipeline) {
    r.stage_first_layer = live.pipeline->layout().first_layer;
    r.replicas = live.pipeline->layout().replicas;
    r.micro_batches =
        live.pipeline->schedule().micro_batches() / live.pipeline->layout().rounds_multiple();
    r.gpipe = live.pipeline->schedule().kind() == training::PipelineSchedule::Kind::kGPipe;
    r.activation_bytes_sent = live.pipeline->activation_bytes_sent();
    r.activation_bytes_delivered = live.pipeline->activation_bytes_delivered();
  }
  observer_(r);
}

// A Megatron job (docs/cluster.md, "Megatron jobs"): its iteration graph on the placed hosts,
// rank (d, s) (collapsed: one rank of tp GPUs) on the (d + dp s)-th host of the placement, as
// llm_training places GPU g = t + tp (d + dp s) on the g / tp-th host of a topology of tp GPUs
// per host.
bool CommunicationMode::start_megatron(const JobSpec& job, std::span<const NodeId> hosts,
                                       std::span<const int> gpus, std::function<void()> done,
                                       std::function<void(Failure)> failed) {
  const TrainingModel& m = params_.models[static_cast<std::size_t>(job.model)];
  MLSIM_CHECK(links_ != nullptr, "a graph job needs the run's link conditions");
  MLSIM_CHECK(gpus.size() == hosts.size(), "a graph job needs the GPUs of each host");
  auto live = std::make_unique<GraphLive>();
  const int per_host = m.megatron ? m.megatron->params.layout.tp : 1;
  if (m.megatron) {
    std::shared_ptr<const MegatronModel> mg = m.megatron;
    llm_training::ParallelLayout layout = mg->layout_for(job.gpus);  // dp from the job's GPUs
    layout.iterations = static_cast<int>(job.iterations);
    MLSIM_CHECK(hosts.size() == static_cast<std::size_t>(layout.pp * layout.dp),
                "a Megatron job placed on pp x dp hosts");
    live->make_source = [mg, layout] {
      return std::make_unique<llm_training::MegatronSource>(layout, mg->kernels);
    };
    live->options = mg->params.executor;
  } else {
    MLSIM_CHECK(m.chakra != nullptr, "a graph job of a model without a graph");
    live->make_source = m.chakra->make_source;
    live->options = m.chakra->executor;
    live->passes_left = job.iterations - 1;
  }
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    MLSIM_CHECK(gpus[i] == per_host, "a graph job takes the same GPUs of every host");
    live->options.hosts.push_back({hosts[i], gpus[i]});
  }
  live->done = std::move(done);
  live->failed = std::move(failed);
  live->serial = ++serial_;
  live->model = job.model;
  live->iterations = job.iterations;
  live->hosts.assign(hosts.begin(), hosts.end());
  live->gpus.assign(gpus.begin(), gpus.end());
  live->start = engine_.now();
  GraphLive& started = *live;
  graphs_.emplace(job.id, std::move(live));
  if (m.megatron && m.megatron->core == llm_training::Core::kTraining)
    start_core(job, started);
  else
    run_pass(job.id, started);
  arm_graph_watchdog(job.id, started);
  return true;
}

// A Megatron job on the training core (megatron.core "training"): a MegatronCoreJob whose worker
// r = d + dp s is the placement's r-th host, as the graph's rank (d, s), with the model's
// collective costs and the run's links; every iteration in one run.
void CommunicationMode::start_core(const JobSpec& job, GraphLive& live) {
  const MegatronModel& mg = *params_.models[static_cast<std::size_t>(job.model)].megatron;
  llm_training::ParallelLayout layout = mg.layout_for(job.gpus);
  layout.iterations = static_cast<int>(job.iterations);
  const std::uint64_t id = job.id, serial = live.serial;
  llm_training::MegatronCoreOptions options;
  options.costs = mg.params.executor.costs;
  options.links = links_;
  // A worker per TP group on its host or, with TP not collapsed, per GPU: GPU t of the r-th
  // host's group is worker t + tp r, as the graph's uncollapsed rank.
  std::vector<NodeId> workers;
  const std::size_t lanes =
      layout.collapse_tensor_parallel ? 1 : static_cast<std::size_t>(layout.tp);
  for (NodeId h : live.hosts) workers.insert(workers.end(), lanes, h);
  // A transfer that found no route, from inside the network's delivery (maybe once per stage
  // and once for the messages): the job fails from a later event, once.
  live.core = std::make_unique<llm_training::MegatronCoreJob>(
      engine_, network_, compute_, layout, mg.kernels, workers, options, [this, id, serial] {
        engine_.schedule_in(Time::zero(),
                            [this, id, serial] { fail_graph(id, serial, Failure::kNoRoute); });
      });
  live.core->set_on_finished([this, id, serial] {
    engine_.schedule_in(Time::zero(), [this, id, serial] { finish_graph(id, serial); });
  });
  // The busiest worker's kernels per iteration, priced as the core prices them and each rounded
  // up to the nanosecond as Compute runs it (speed 1: the cluster has no speed changes), as a
  // graph rank's compute_s counts them.
  const llm_training::MegatronOpPricer pricer(layout, mg.kernels, compute_, workers, options.costs);
  std::vector<training::OpStep> steps;
  const training::PipelineSchedule& schedule = live.core->schedule();
  for (std::size_t w = 0; w < workers.size(); ++w) {
    double seconds = 0;
    std::size_t f = 0, b = 0;
    while (const auto op = schedule.next(w, f, b)) {
      pricer.steps(w, *op, steps);
      for (const training::OpStep& step : steps)
        if (step.kind == training::OpStep::Kind::kCompute)
          seconds += Time::from_seconds_ceil(step.seconds).seconds();
      ++(op->forward ? f : b);
    }
    live.core_compute_per_iteration = std::max(live.core_compute_per_iteration, seconds);
  }
  live.core->start();
}

// A new source and executor for the job's next pass, started now.
void CommunicationMode::run_pass(std::uint64_t id, GraphLive& live) {
  if (live.executor) {
    live.compute_done = live.compute_s();
    live.counts_done = live.counts();
    live.bytes_done = live.bytes_delivered();
    live.executor.reset();
  }
  live.source = live.make_source();
  live.executor = std::make_unique<workload::GraphExecutor>(
      engine_, network_, compute_, *links_, *live.source, live.options,
      "workload.training.models[" + std::to_string(live.model) + "]");
  const std::uint64_t serial = live.serial;
  // Both from inside the executor's call chain: the job moves on from a later event.
  live.executor->set_on_done([this, id, serial] {
    engine_.schedule_in(Time::zero(), [this, id, serial] { finish_graph(id, serial); });
  });
  live.executor->set_on_failed([this, id, serial] {
    engine_.schedule_in(Time::zero(),
                        [this, id, serial] { fail_graph(id, serial, Failure::kNoRoute); });
  });
  live.executor->start();
}

void CommunicationMode::arm_graph_watchdog(std::uint64_t id, GraphLive& live) {
  if (params_.stall_timeout <= Time::zero()) return;
  const std::uint64_t serial = live.serial;
  live.watchdog =
      engine_.schedule_at(std::max(live.start, live.last_progress()) + params_.stall_timeout,
                          [this, id, serial] { on_graph_watchdog(id, serial); });
}

// As on_watchdog: no node of the graph finished for the stall timeout (a graph that cannot
// finish, GraphExecutor::stalled, or a collective that never ends) ends the job as stalled.
void CommunicationMode::on_graph_watchdog(std::uint64_t id, std::uint64_t serial) {
  auto it = graphs_.find(id);
  if (it == graphs_.end() || it->second->serial != serial) return;
  GraphLive& live = *it->second;
  if (live.ran_to_end()) return;  // its end is an event away
  const Time last = std::max(live.start, live.last_progress());
  if (engine_.now() - last < params_.stall_timeout) {
    arm_graph_watchdog(id, live);
    return;
  }
  if (live.core)
    record_stall(id, live.model, live.hosts.size(), last, {{"core", "training"}});
  else
    record_stall(id, live.model, live.hosts.size(), last, {{"ranks", live.executor->stalled()}});
  fail_graph(id, serial, Failure::kStalled);
}

void CommunicationMode::finish_graph(std::uint64_t id, std::uint64_t serial) {
  auto it = graphs_.find(id);
  if (it == graphs_.end() || it->second->serial != serial) return;
  if (it->second->passes_left > 0) {  // a Chakra job's next iteration
    --it->second->passes_left;
    run_pass(id, *it->second);
    return;
  }
  std::unique_ptr<GraphLive> live = std::move(it->second);
  graphs_.erase(it);
  engine_.cancel(live->watchdog);
  const Time end = live->end();
  count_finished(live->model, live->iterations, (end - live->start).seconds(), live->compute_s());
  ++(params_.models[static_cast<std::size_t>(live->model)].megatron ? megatron_jobs_
                                                                    : chakra_jobs_);
  graph_network_collectives_ += live->counts().network_collectives;
  graph_bytes_delivered_ += live->bytes_delivered();
  if (params_.models[static_cast<std::size_t>(live->model)].megatron) {
    const llm_training::Exposure exposure = record_megatron(id, *live, end);
    observe_graph(id, *live, TrainingRecord::Outcome::kFinished, end, &exposure);
  } else {
    observe_graph(id, *live, TrainingRecord::Outcome::kFinished, end);
  }
  std::function<void()> done = std::move(live->done);
  live.reset();
  done();
}

void CommunicationMode::fail_graph(std::uint64_t id, std::uint64_t serial, Failure why) {
  auto it = graphs_.find(id);
  if (it == graphs_.end() || it->second->serial != serial) return;  // killed or failed meanwhile
  std::function<void(Failure)> failed = std::move(it->second->failed);
  end_graph_unfinished(id, TrainingRecord::Outcome::kFailed);
  failed(why);
}

void CommunicationMode::end_graph_unfinished(std::uint64_t id, TrainingRecord::Outcome outcome) {
  auto it = graphs_.find(id);
  std::unique_ptr<GraphLive> live = std::move(it->second);
  graphs_.erase(it);
  engine_.cancel(live->watchdog);
  ++(outcome == TrainingRecord::Outcome::kKilled ? killed_ : failed_);
  graph_network_collectives_ += live->counts().network_collectives;
  graph_bytes_delivered_ += live->bytes_delivered();
  observe_graph(id, *live, outcome, engine_.now());
  // Destroying the executor cancels its kernels, collectives and events in flight.
  live.reset();
}

std::vector<workload::RankReport> CommunicationMode::rank_reports(const GraphLive& live) const {
  return live.core ? live.core->rank_reports() : live.executor->reports();
}

// The llm_training model's per-phase exposure (graph_report.hpp: the one definition, on both
// cores), per iteration of the job: its ranks' times count from its start (GraphExecutor::start,
// MegatronCoreJob::start), so compute + every exposed phase = a rank's finish - the start, and
// on the critical rank (the last to finish) that over the iterations is iteration_s.
llm_training::Exposure CommunicationMode::record_megatron(std::uint64_t id, const GraphLive& live,
                                                          Time end) {
  const TrainingModel& m = params_.models[static_cast<std::size_t>(live.model)];
  int gpus = 0;
  for (int g : live.gpus) gpus += g;
  const llm_training::ParallelLayout layout = m.megatron->layout_for(gpus);
  const auto iterations = static_cast<double>(live.iterations);
  llm_training::Exposure e = llm_training::exposure_of(
      rank_reports(live), llm_training::MegatronSource::phase_names(), iterations);
  const double iteration_s = (end - live.start).seconds() / iterations;
  nlohmann::json r = {{"job", id},
                      {"model", m.name},
                      {"core", live.core ? "training" : "graph"},
                      {"tp", layout.tp},
                      {"pp", layout.pp},
                      {"dp", layout.dp},
                      {"micro_batches", layout.micro_batches},
                      {"iterations", live.iterations},
                      {"start_s", live.start.seconds()},
                      {"end_s", end.seconds()},
                      {"iteration_s", iteration_s},
                      {"critical_rank", e.critical_rank}};
  for (const auto& [name, seconds] : e.figures) {
    r[name] = seconds;
    megatron_figure_sums_[name] += seconds;
  }
  megatron_iteration_sum_ += iteration_s;
  megatron_records_.push_back(std::move(r));
  return e;
}

void CommunicationMode::observe_graph(std::uint64_t id, const GraphLive& live,
                                      TrainingRecord::Outcome outcome, Time end,
                                      const llm_training::Exposure* exposure) const {
  if (!observer_) return;
  TrainingRecord r;
  r.outcome = outcome;
  r.id = id;
  r.model = live.model;
  r.hosts = live.hosts;
  r.iterations = live.iterations;
  r.start = live.start;
  r.end = end;
  r.compute_only_s = live.compute_s();
  r.megatron = true;
  r.graph_done = live.ran_to_end() && live.passes_left == 0;
  r.gpus = live.gpus;
  const workload::ExecutorCounts counts = live.counts();
  r.graph_collectives = counts.collectives;
  r.graph_messages = counts.messages;
  r.graph_network_collectives = counts.network_collectives;
  r.graph_bytes_delivered = live.bytes_delivered();
  if (exposure) {
    r.ranks = rank_reports(live);
    r.exposure = *exposure;
  }
  observer_(r);
}

void CommunicationMode::report(Results& out) const {
  out.set_metric("detailed_jobs_simulated", static_cast<double>(simulated_));
  out.set_metric("detailed_jobs_one_host", static_cast<double>(one_host_));
  out.set_metric("detailed_jobs_running", static_cast<double>(live_.size()));
  out.set_metric("detailed_iterations", static_cast<double>(iterations_));
  // Attempts ended unfinished: a node of the placement failed (killed), or a transfer of the
  // job's gradient synchronisation found no route (failed); the cluster requeued or dropped
  // them (job_restarts, jobs_dropped).
  out.set_metric("detailed_jobs_killed", static_cast<double>(killed_));
  out.set_metric("detailed_jobs_failed", static_cast<double>(failed_));
  // Of the failed: nothing happened in them for system.stall_timeout (a livelock or deadlock of
  // their communication); the cluster drops them.
  out.set_metric("detailed_jobs_stalled", static_cast<double>(stalled_));
  // How much longer the simulated jobs ran than their compute alone: communication not hidden
  // behind backward, and contention with the other jobs on shared links.
  out.set_summary("communication_slowdown", slowdown_.summary(), "");
  out.set_metric("communication_overhead_fraction",
                 useful_s_ > 0 ? (useful_s_ - compute_only_s_) / useful_s_ : 0);
  out.set_metric("gradient_bytes_sent", static_cast<double>(bytes_sent_));
  out.set_metric("gradient_bytes_delivered", static_cast<double>(bytes_delivered_));
  out.set_metric("gradient_messages", static_cast<double>(messages_));
  // Pipeline jobs (docs/cluster.md, "Pipeline-parallel jobs"): finished, and the activations
  // and activation gradients their stages sent each other (every attempt's).
  out.set_metric("detailed_pipeline_jobs", static_cast<double>(pipeline_jobs_));
  out.set_metric("activation_bytes_sent", static_cast<double>(activation_bytes_sent_));
  out.set_metric("activation_bytes_delivered", static_cast<double>(activation_bytes_delivered_));
  // Only with a model planned under a memory limit, so that other runs' results keep their keys.
  if (has_memory_limit_)
    out.set_metric("detailed_jobs_no_memory_fit", static_cast<double>(no_memory_jobs_));
  // Megatron jobs (only with a Megatron model, so that other runs' results keep their keys).
  if (has_megatron_) {
    out.set_metric("detailed_megatron_jobs", static_cast<double>(megatron_jobs_));
    out.set_metric("detailed_chakra_jobs", static_cast<double>(chakra_jobs_));
    out.set_metric("megatron_network_collectives", static_cast<double>(graph_network_collectives_));
    // Their bytes the network delivered (every attempt's): activations, their gradients and the
    // data-parallel collectives.
    out.set_metric("megatron_bytes_delivered", static_cast<double>(graph_bytes_delivered_));
    out.set_metric("detailed_jobs_without_model", static_cast<double>(without_model_));
  }
  // Only with a Megatron model: the mean over its finished jobs of each job's per-phase
  // exposure per iteration (details.megatron_jobs; 0 with none), named after the job's figure:
  // compute_s -> megatron_compute_mean_s, critical_rank_exposed_dp_s ->
  // megatron_critical_rank_exposed_dp_mean_s; and of its iteration time.
  if (has_megatron_model_) {
    const auto jobs = static_cast<double>(megatron_records_.size());
    auto mean = [jobs](double sum) { return jobs > 0 ? sum / jobs : 0.0; };
    // Every figure, the critical rank's included, even when no Megatron job finished.
    for (const std::string& name :
         llm_training::exposure_names(llm_training::MegatronSource::phase_names())) {
      const auto it = megatron_figure_sums_.find(name);
      out.set_metric("megatron_" + name.substr(0, name.size() - 2) + "_mean_s",
                     mean(it == megatron_figure_sums_.end() ? 0.0 : it->second));
    }
    out.set_metric("megatron_iteration_mean_s", mean(megatron_iteration_sum_));
    out.details()["megatron_jobs"] = megatron_records_;
  }
  nlohmann::json models = nlohmann::json::array();
  for (std::size_t m = 0; m < params_.models.size(); ++m)
    models.push_back(
        {{"model", params_.models[m].name},
         {"scheduler", params_.models[m].scheduler},
         {"sync", params_.models[m].sync},
         {"jobs_simulated", per_model_[m].jobs},
         // Useful time over compute alone, summed over the model's jobs.
         {"communication_slowdown", per_model_[m].compute_only_s > 0
                                        ? per_model_[m].useful_s / per_model_[m].compute_only_s
                                        : 0.0}});
  // A Megatron model's core: what runs its jobs, what the scenario asked, and why "auto" fell
  // back to the graph (llm_training::report_core_choice's names).
  for (std::size_t m = 0; m < params_.models.size(); ++m)
    if (const MegatronModel* mg = params_.models[m].megatron.get()) {
      Results choice;
      llm_training::report_core_choice({mg->core, mg->core_requested, mg->core_fallback}, choice);
      for (const auto& [key, value] : choice.details().items()) models[m][key] = value;
    }
  out.details()["training_models"] = std::move(models);
  if (!stalled_jobs_.empty()) out.details()["stalled_jobs"] = stalled_jobs_;
}

}  // namespace mlsim::cluster
