#pragma once
// The cluster model's detailed mode (docs/cluster.md, "Detailed mode: communication simulated"):
// each job the schedulers place on more than one host runs as a data-parallel training job of
// the training core (models/training: DataParallelJob, a GradientPath with the model's
// CommScheduler, a GradientSync strategy, all chosen by name from training_policies()) on the
// hosts its placement gave it, over the run's one network. Jobs therefore contend on the host
// links, leaf uplinks and switches their placements share, and a job ends when its last
// iteration's gradients are back, not after its trace runtime.
//
//   - Workers: one per host of the placement, standing for that host's GPUs of the job; each
//     GPU computes its own minibatch at once, so the worker takes one GPU's layer times. The
//     reduction among a host's GPUs (NVLink / PCIe) is not simulated [assumed free]: only the
//     network step is (hierarchical data parallelism, one worker per host).
//   - Parameter servers (`ps`): one per worker host, colocated, as MXNet/BytePS deployments do
//     [assumed]; a push to the host's own server crosses no link.
//   - Iterations: a job that names none gets as many as fill its trace runtime on the reference
//     GPU with its model's compute alone (forward + backward of every layer): the trace's
//     duration is read as compute, and the mode adds what communication and contention cost.
//   - A job on one host has nothing to send over the network: the runner leaves it to the
//     job-level timing (its runtime scaled to the GPU type).
//
//   - Megatron jobs (a model's `megatron`: a GPT/Llama shape with TP x PP x DP, the keys of
//     the llm_training model): the job's Megatron-LM iteration as an execution graph
//     (models/llm_training/megatron_source.hpp) run by a workload::GraphExecutor on the hosts
//     its placement gave it, tp GPUs on each (one tensor-parallel group per host, collapsed into
//     one rank as llm_training does), its data-parallel collectives and pipeline messages
//     through the run's network (ExecutorOptions mode kNetwork), its tensor-parallel all-reduces
//     over the host's intra_node link. A trace job draws such a model only when it asks for
//     exactly tp x pp x dp GPUs. With `megatron.core: "training"` the same iteration runs as a
//     MegatronCoreJob on the training core instead (models/llm_training/megatron_core_job.hpp:
//     a worker per TP group, on the same hosts in the same order). A Chakra trace model (a model's
//     `chakra`) takes the same route: one pass of the trace per iteration, one rank per host, on a
//     job of exactly its ranks.
//
//   - Pipeline jobs (a model's `pipeline`, or a listed job's `stages`): the hosts split into
//     stages of replicas, ops ordered by 1F1B or GPipe, activations and their gradients sent
//     between stages over the shared network, each stage's gradients synchronised among its
//     replicas by the model's strategy (pipeline_job.hpp). An iteration processes the samples a
//     data-parallel iteration on the same hosts would (one profiled batch per host): M
//     micro-batches per replica, each of stages / M profiled batches, its ops and activation
//     taking stages / M of the profile's [assumed: linear in the batch].
//
// Memory: the running jobs' cores, paths and strategies, freed when each job ends; a finished
// job leaves only its contribution to the statistics.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "models/cluster/job_runner.hpp"
#include "models/cluster/pipeline_job.hpp"
#include "models/ina/cluster_params.hpp"
#include "models/ina/ina_fabric.hpp"
#include "models/llm_training/graph_report.hpp"
#include "models/llm_training/llm_training_model.hpp"
#include "models/llm_training/policies.hpp"
#include "models/pipeline/pipeline_costs.hpp"
#include "models/pipeline/stage_memory.hpp"
#include "models/training/gradient_path.hpp"
#include "models/training/pipeline_schedule.hpp"
#include "models/training/policies.hpp"
#include "sim_core/base/stats.hpp"
#include "sim_core/engine/random.hpp"
#include "sim_core/hardware/compute.hpp"
#include "sim_core/hardware/profile_scaling.hpp"
#include "sim_core/network/network.hpp"

namespace mlsim::cluster {

// How a pipeline job's layers and hosts are cut into stages (`pipeline.planner`, or a listed
// job's `planner`): "even" (split_stages, pipeline_job.hpp: equal compute, equal replicas, the
// default), or one of models/pipeline's planners over the job's hosts as placed: "pipedream"
// (PipeDream's optimizer, pipedream_partitioner.hpp), "dp" (the dynamic program over the
// bottleneck time, dp_planner.hpp) or "exact" (AutoPipe's reference: the branch and bound over
// the schedule's timing model, autopipe_planner.hpp). The numbering is JobSpec::planner's.
enum class StagePlanner { kEven = 0, kPipeDream = 1, kDp = 2, kExact = 3 };
const char* stage_planner_name(StagePlanner p);
// The planner named `name`; an InputError at `where` naming the known ones otherwise.
StagePlanner parse_stage_planner(const std::string& name, const std::string& where);

// A Megatron-LM model (workload.training.models[i].megatron): its shape, layout and kernels;
// layout.iterations is set per job. params.layout is the configuration as read (its dp
// checked against its global batch by llm_training's reader); a job of g GPUs runs it with
// dp = g / (tp pp) and the global batch kept, as Megatron-LM derives both from the world size
// and --global-batch-size (docs/cluster.md, "Megatron jobs").
struct MegatronModel {
  llm_training::TrainingParams params;
  llm_training::StageKernels kernels;
  // What runs its jobs (`megatron.core`): the execution graph (megatron_source.hpp on a
  // GraphExecutor) or the training core (megatron_core_job.hpp); by default ("auto") the core
  // whenever it can run the model's layout (llm_training::core_refusal), else the graph, with
  // the reason in `core_fallback` (details.training_models[i]).
  llm_training::Core core = llm_training::Core::kGraph;
  llm_training::Core core_requested = llm_training::Core::kAuto;
  std::optional<std::string> core_fallback;
  // The busiest stage's compute for one micro-batch on the reference GPU (an iteration is M of
  // them: the pipeline's micro-batches go through every stage).
  double stage_s_per_micro_batch = 0;
  // Why a job of `gpus` GPUs cannot run this model (empty when it can): a whole number of
  // model replicas (tp x pp GPUs each) whose micro-batches split the global batch evenly.
  std::string misfit(int gpus) const;
  // The layout a job of `gpus` GPUs runs (misfit(gpus) must be empty): dp = gpus / (tp pp),
  // M = global_batch / (micro_batch dp) micro-batches per replica and iteration.
  llm_training::ParallelLayout layout_for(int gpus) const;
  // Graph nodes of one iteration of a job of `gpus` GPUs (the work estimate).
  double nodes_per_iteration(int gpus) const;
};

// A Chakra trace model (workload.training.models[i].chakra): a fresh source of one pass of the
// trace (read and checked once, at prepare time), its ranks and the executor's options.
struct ChakraModel {
  std::function<std::unique_ptr<workload::GraphSource>()> make_source;
  workload::ExecutorOptions executor;
  int ranks = 0;
  double nodes_per_iteration = 0;
};

// A training model the jobs may run (workload.training.models[i]).
struct TrainingModel {
  std::string name;
  double weight = 1;  // share of the jobs that name no model
  std::string scheduler, sync;
  training::SchedulerFactory make_scheduler;
  // Empty for in-network aggregation (switchml, atp, dsa): the run's INA fabric builds it
  // (CommunicationMode::set_sync_builder).
  training::SyncFactory make_sync;
  training::SchedulerConfig config;  // the scheduler's initial knobs
  // Who orders the chunks of a per-worker strategy (training::Ordering): every worker (the
  // default), or, for ByteScheduler over in-network aggregation, one order for the job
  // (`scheduling`, default "job"; ina::ClusterParams::ordering gives the source, and the
  // deadlock every worker scheduling runs into there).
  training::Ordering ordering = training::Ordering::kEveryWorker;
  std::vector<std::int64_t> parameters;  // per layer, forward order: gradient values
  std::int64_t bytes_per_parameter = 4;  // fp32
  // Indexed by topology NodeId: one GPU's layer times on that host at speed 1 (one table per
  // GPU type, shared); null for a node that is not a host.
  std::vector<std::shared_ptr<const ProfileSeconds>> times;
  double reference_iteration_s = 0;  // forward + backward of every layer on the reference GPU
  // Per layer, forward order: forward + backward on the reference GPU (where a pipeline's
  // stages are cut), and the bytes of its output activation for one profiled batch.
  std::vector<double> reference_layer_s;
  std::vector<std::int64_t> activation_bytes;
  // Per layer, forward order: the bytes a pipeline stage boundary after it carries for one
  // profiled batch, models/pipeline's LayerCost::cut_bytes from the profile's edges (every
  // activation made up to the layer and consumed after it, PipeDream's augmented antichain;
  // pipeline::layer_costs). Empty: the layers form a chain and a cut carries activation_bytes.
  std::vector<double> boundary_bytes;
  // A Megatron model (null for a profiled one, which fills the fields above): its jobs run as
  // execution graphs; reference_iteration_s is then its busiest stage's compute per iteration on
  // the reference GPU, and parameters, times and the rest stay empty.
  std::shared_ptr<const MegatronModel> megatron;
  // A Chakra trace model (null otherwise): its jobs run the trace's graph once per iteration,
  // one rank per host; reference_iteration_s is its busiest rank's compute per pass.
  std::shared_ptr<const ChakraModel> chakra;
  // Whether a job asking for `gpus` GPUs may run this model (a Megatron model: a whole number
  // of tp x pp replicas that splits its global batch, MegatronModel::misfit; a Chakra model:
  // exactly its ranks).
  bool fits(int gpus) const {
    if (megatron) return megatron->misfit(gpus).empty();
    if (chakra) return chakra->ranks == gpus;
    return true;
  }
  // Its compute per iteration on the reference GPU for a job of `gpus` GPUs (a Megatron
  // model's depends on the job's dp through its micro-batches per replica).
  double reference_iteration_for(int gpus) const {
    return megatron ? megatron->stage_s_per_micro_batch * megatron->layout_for(gpus).micro_batches
                    : reference_iteration_s;
  }
  // The GPUs it takes on each host of a placement (0: any split).
  int gpus_per_node() const { return megatron ? megatron->params.layout.tp : chakra ? 1 : 0; }
  // Pipeline parallelism (`pipeline`; stages 1: data parallel, the default). With the "even"
  // planner a job of this model on H hosts runs min(stages, H) stages of floor(H / stages)
  // replicas each (pipeline_job.hpp: split_stages), a list job's `stages` overriding the count;
  // with another planner the planner of models/pipeline chooses the stages and each one's
  // replicas over all H hosts (stages 0 here: the planner's).
  struct Pipeline {
    std::size_t stages = 1;
    training::PipelineSchedule::Kind schedule = training::PipelineSchedule::Kind::kOneFOneB;
    // M: per replica and iteration when every stage has as many replicas (in general the
    // iteration's micro-batches are M x the least common multiple of the stages' replicas).
    std::size_t micro_batches = 1;
    StagePlanner planner = StagePlanner::kEven;
    bool straight = false;  // the planners: one host per stage (PipeDream's --straight_pipeline)
    // GPU memory as the planners' constraint (`pipeline.memory`, models/pipeline's reader and
    // accounting, stage_memory.hpp): with it on, a planner never returns stages that do not fit.
    pipeline::MemorySettings memory;
    // Indexed by topology NodeId: each host's GPU memory in bytes (memory.capacity, else its
    // GPU's hbm_capacity from the catalog); empty without the constraint.
    std::vector<double> memory_capacity;
  } pipeline;
  // Whether the model has a pipeline (its op schedule and micro-batches) at all.
  bool has_pipeline() const {
    return pipeline.stages > 1 || pipeline.planner != StagePlanner::kEven;
  }
  // The stages a job of this model runs with the "even" planner: a listed job's `stages`
  // (JobSpec::stages, 0 when it gives none), else the model's.
  std::size_t stages_for(int job_stages) const {
    return job_stages > 0 ? static_cast<std::size_t>(job_stages) : pipeline.stages;
  }
  // The planner a job of this model uses: a listed job's `planner` (JobSpec::planner, -1 when
  // it gives none), else the model's.
  StagePlanner planner_for(int job_planner) const {
    return job_planner >= 0 ? static_cast<StagePlanner>(job_planner) : pipeline.planner;
  }
  // Whether a job runs as a pipeline: a listed job's `stages: 1` makes it data parallel; else
  // a planner, or more than one stage with the even split.
  bool runs_pipeline(int job_stages, int job_planner) const {
    if (job_stages == 1) return false;
    return planner_for(job_planner) != StagePlanner::kEven || stages_for(job_stages) > 1;
  }
};

// A profiled model's layers as models/pipeline's planners see them (sizes only: the planners
// read each host's own layer times from their conditions), each cut with its boundary_bytes.
// The one source of a cut's bytes for the planners, the memory check and the run's transfers.
std::vector<pipeline::LayerCost> planner_layer_sizes(const TrainingModel& m);
// Whether some configuration of a planned pipeline model's stages fits hosts of `capacity`
// bytes each (in the job's host order) under the memory rule of `planner` (the job's: PipeDream's
// check for "pipedream", mlsim's accounting for "dp" and "exact"; stage_memory.hpp); true
// without the constraint.
bool pipeline_memory_fits(const TrainingModel& m, StagePlanner planner,
                          const std::vector<pipeline::LayerCost>& layers,
                          const std::vector<double>& capacity);

struct CommunicationParams {
  std::vector<TrainingModel> models;
  // With models that aggregate in the network: the switches' settings (system.ina) and, by
  // model, its policy and packet plan (a null plan for the other models).
  std::optional<ina::ClusterParams> ina;
  std::vector<ina::FabricModel> ina_models;
  // A simulated job in which nothing happens for this long (no compute op ends, no chunk comes
  // back or returns its credit) is ended and reported failed as stalled (JobRunner::Failure):
  // a livelock ends as a reported failure, not an unbounded run. `system.stall_timeout`,
  // default 600 s: PyTorch ProcessGroupNCCL's collective timeout, as the ina model's watchdog
  // (ina::ClusterParams::stall_timeout). Zero: never.
  Time stall_timeout = Time::s(600);
};

// One simulated job, handed to the observer (tests) when it ends, is killed or fails.
struct TrainingRecord {
  enum class Outcome { kFinished, kKilled, kFailed };
  Outcome outcome = Outcome::kFinished;
  std::uint64_t id = 0;
  int model = 0;
  std::vector<NodeId> hosts;
  std::uint64_t iterations = 0;
  Time start, end;            // end: of the last iteration, or when it was killed or failed
  double compute_only_s = 0;  // iterations x the slowest worker's compute per iteration
  // Per worker and layer: updates applied to its parameters (each must equal `iterations`).
  std::vector<std::vector<std::size_t>> updates;
  std::int64_t gradient_bytes = 0;  // one worker's gradient of one iteration
  std::int64_t bytes_sent = 0, bytes_delivered = 0;
  // A pipeline job (stage_first_layer empty for a data-parallel one): its layout, micro-batches
  // per replica and iteration, and its activation and activation-gradient messages.
  std::vector<std::size_t> stage_first_layer;
  std::vector<std::size_t> replicas;  // per stage
  std::size_t micro_batches = 1;      // M: N / L per iteration (pipeline_job.hpp)
  bool gpipe = false;
  std::int64_t activation_bytes_sent = 0, activation_bytes_delivered = 0;
  // A Megatron job: whether its graph completed (every rank), its GPUs on each host, and its
  // collectives and messages (of them, through the network).
  bool megatron = false, graph_done = false;
  std::vector<int> gpus;
  std::uint64_t graph_collectives = 0, graph_messages = 0, graph_network_collectives = 0;
  std::int64_t graph_bytes_delivered = 0;  // by the network, its collectives and messages
  // A finished Megatron attempt (empty otherwise, and for a Chakra job): each rank's report
  // (graph rank or core worker, rank order; its time counted from the attempt's start) and its
  // per-phase exposure per iteration (llm_training::exposure_of over them, the figures of
  // details.megatron_jobs).
  std::vector<workload::RankReport> ranks;
  llm_training::Exposure exposure;
};

class CommunicationMode final : public JobRunner {
 public:
  // `params` must outlive the mode; draws the model of a job that names none from `draws`.
  CommunicationMode(Engine& engine, Network& network, Compute& compute,
                    const CommunicationParams& params, RandomStream draws);
  ~CommunicationMode() override;
  CommunicationMode(const CommunicationMode&) = delete;
  CommunicationMode& operator=(const CommunicationMode&) = delete;

  void admit(JobSpec& job) override;
  bool start(const JobSpec& job, std::span<const NodeId> hosts, std::span<const int> gpus, int type,
             std::function<void()> done, std::function<void(Failure)> failed) override;
  // The same without the GPUs per host (tests of profiled models, which use one worker per
  // host whatever its GPUs).
  bool start(const JobSpec& job, std::span<const NodeId> hosts, int type,
             std::function<void()> done, std::function<void(Failure)> failed) {
    return start(job, hosts, {}, type, std::move(done), std::move(failed));
  }
  void kill(std::uint64_t id) override;
  void report(Results& out) const override;
  // A job of a planned pipeline model under `pipeline.memory` that runs as a pipeline (not a
  // listed job's `stages: 1`).
  bool placement_limited(const JobSpec& job) const override;
  // For such a job on two hosts or more: whether some configuration of its stages fits the
  // hosts' GPU memory under its planner's rule (the check start_pipeline makes, over the same
  // hosts: a straight pipeline's first as many as its layers); true otherwise.
  bool runs_on(const JobSpec& job, std::span<const NodeId> hosts) const override;
  bool limits_placement() const override { return has_memory_limit_; }

  void set_observer(std::function<void(const TrainingRecord&)> f) { observer_ = std::move(f); }
  // Builds the strategy of a model without a registry factory (make_sync empty): in-network
  // aggregation, whose switch programs belong to the run, not to a job (ina_fabric.hpp).
  using SyncBuilder = std::function<std::unique_ptr<training::GradientSync>(
      std::size_t model, training::SyncEvents& events, std::vector<NodeId> workers)>;
  void set_sync_builder(SyncBuilder f) { sync_builder_ = std::move(f); }
  // The run's link conditions, for strategies that plan over the links as they are (rat); must
  // outlive the mode.
  void set_links(const LinkConditions* links) { links_ = links; }
  std::size_t running() const { return live_.size() + graphs_.size() + no_memory_.size(); }

 private:
  struct Live;
  struct GraphLive;
  // A Megatron or Chakra job: its graph on `hosts`, gpus[i] GPUs on hosts[i] (tp each; 1).
  bool start_megatron(const JobSpec& job, std::span<const NodeId> hosts, std::span<const int> gpus,
                      std::function<void()> done, std::function<void(Failure)> failed);
  void run_pass(std::uint64_t id, GraphLive& live);
  // A Megatron job of a model on the training core: its MegatronCoreJob, started now.
  void start_core(const JobSpec& job, GraphLive& live);
  void finish_graph(std::uint64_t id, std::uint64_t serial);
  void fail_graph(std::uint64_t id, std::uint64_t serial, Failure why);
  void arm_graph_watchdog(std::uint64_t id, GraphLive& live);
  void on_graph_watchdog(std::uint64_t id, std::uint64_t serial);
  void end_graph_unfinished(std::uint64_t id, TrainingRecord::Outcome outcome);
  void observe_graph(std::uint64_t id, const GraphLive& live, TrainingRecord::Outcome outcome,
                     Time end, const llm_training::Exposure* exposure = nullptr) const;
  // A finished Megatron job's ranks' reports (graph or core), their exposure per iteration, its
  // record in details.megatron_jobs and its share of the means.
  std::vector<workload::RankReport> rank_reports(const GraphLive& live) const;
  llm_training::Exposure record_megatron(std::uint64_t id, const GraphLive& live, Time end);
  bool start_pipeline(const JobSpec& job, std::span<const NodeId> hosts, std::function<void()> done,
                      std::function<void(Failure)> failed);
  // The stages of a pipeline job of model `m` on `hosts` (its planner's, pipeline_job.hpp).
  StageLayout plan_stages(const JobSpec& job, const TrainingModel& m,
                          std::span<const NodeId> hosts) const;
  // The hosts a planned pipeline job of model `m` plans over (a straight pipeline: at most one
  // per layer) and, under a memory limit, their GPU memory in bytes (empty without one).
  static std::span<const NodeId> planned_hosts(const TrainingModel& m,
                                               std::span<const NodeId> hosts);
  static std::vector<double> host_memory(const TrainingModel& m, std::span<const NodeId> hosts);
  // Registers a started job (its core set up) and starts it once its strategy is ready.
  void launch(const JobSpec& job, std::unique_ptr<Live> live, double compute_only_s,
              std::function<void()> done, std::function<void(Failure)> failed);
  std::function<void()> failure_callback(std::uint64_t id, std::uint64_t serial);
  // From engine events scheduled by the job's own callbacks; `serial` tells a requeued job's
  // new attempt (same id) from the attempt that scheduled them.
  void finish(std::uint64_t id, std::uint64_t serial);
  void fail(std::uint64_t id, std::uint64_t serial, Failure why);
  // The job's stall watchdog (CommunicationParams::stall_timeout): one event per timeout.
  void arm_watchdog(std::uint64_t id, Live& live);
  void on_watchdog(std::uint64_t id, std::uint64_t serial);
  // Frees a job that did not finish, keeping its traffic in the totals.
  void end_unfinished(std::uint64_t id, TrainingRecord::Outcome outcome);
  void observe(std::uint64_t id, const Live& live, TrainingRecord::Outcome outcome, Time end) const;
  // What every kind of job adds to the statistics when it finishes (finish, finish_graph).
  void count_finished(int model, std::uint64_t iterations, double useful_s, double compute_only_s);
  // The stall_details entry of a job that stalled: the fields every kind has, then `extra`.
  void record_stall(std::uint64_t id, int model, std::size_t hosts, Time last_progress,
                    nlohmann::json::object_t extra);

  Engine& engine_;
  Network& network_;
  Compute& compute_;
  const LinkConditions* links_ = nullptr;
  const CommunicationParams& params_;
  RandomStream draws_;
  double weight_sum_ = 0;
  bool has_megatron_ = false;
  std::function<void(const TrainingRecord&)> observer_;
  SyncBuilder sync_builder_;
  std::map<std::uint64_t, std::unique_ptr<Live>> live_;
  std::map<std::uint64_t, std::unique_ptr<GraphLive>> graphs_;  // Megatron jobs
  // Pipeline jobs whose stages fit their hosts' memory in no configuration: the event that
  // reports them failed (Failure::kNoMemory), cancelled if the job is killed first.
  std::map<std::uint64_t, EventHandle> no_memory_;
  bool has_memory_limit_ = false;  // some model plans under a memory limit
  // runs_on's answers by model, planner and the hosts' memory (the placement search asks the
  // same few host counts again at every scheduler pass).
  mutable std::map<std::tuple<int, int, std::vector<double>>, bool> fits_cache_;
  std::uint64_t no_memory_jobs_ = 0;  // attempts that found no configuration that fits
  // Statistics.
  std::uint64_t serial_ = 0;  // attempts started
  std::uint64_t simulated_ = 0, one_host_ = 0, iterations_ = 0, killed_ = 0, failed_ = 0;
  std::uint64_t stalled_ = 0;
  nlohmann::json stalled_jobs_ = nlohmann::json::array();  // details: which, when, since when
  struct PerModel {
    std::uint64_t jobs = 0;
    double useful_s = 0, compute_only_s = 0;
  };
  std::vector<PerModel> per_model_;
  LogHistogram slowdown_;  // useful time over compute-only time, per simulated job
  double useful_s_ = 0, compute_only_s_ = 0;
  std::int64_t bytes_sent_ = 0, bytes_delivered_ = 0;
  std::uint64_t messages_ = 0;
  std::uint64_t pipeline_jobs_ = 0;              // simulated jobs that ran as pipelines, finished
  std::uint64_t megatron_jobs_ = 0;              // Megatron jobs finished
  std::uint64_t chakra_jobs_ = 0;                // Chakra trace jobs finished
  std::uint64_t without_model_ = 0;              // jobs no model fits (job-level timing)
  std::uint64_t graph_network_collectives_ = 0;  // Megatron jobs' collectives through the network
  std::int64_t graph_bytes_delivered_ = 0;
  // Finished Megatron jobs (not Chakra ones): one record each with its per-phase exposure
  // (details.megatron_jobs), and the sums of their figures and iteration times for the means.
  bool has_megatron_model_ = false;
  nlohmann::json megatron_records_ = nlohmann::json::array();
  std::map<std::string, double> megatron_figure_sums_;
  double megatron_iteration_sum_ = 0;
  std::int64_t activation_bytes_sent_ = 0, activation_bytes_delivered_ = 0;
};

}  // namespace mlsim::cluster
