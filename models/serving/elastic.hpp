#pragma once
// Elastic, fault-tolerant serving with replicated pipeline stages (issue 16): MultiWorld
// (Lee, Jajoo, Kompella, arXiv 2407.08980; cisco-open/pymultiworld v0.2.3) against one static
// process group.
//
// A deployment of S stages; stage s has its own replica count (and up to `max_replicas` workers,
// the spares scale-out draws on), each worker a tensor-parallel group on one host
// (stage_worker.hpp). The front (stage 0) workers are replicas (replica.hpp) with their virtual
// engines and KV pool; each virtual engine's micro-batches go stage to stage along its path, one
// worker per stage, bound by the router of each stage boundary (boundary_router.hpp: the next
// live worker in turn, the fewest engines bound, or the least work). Activations cross each
// boundary as a send/recv of the collective layer over the network model (point_to_point.hpp).
//
// Process-group semantics, a registered policy (policies.hpp, `system.elastic.process_groups`):
//  - single_world: one static group over every worker. A failure, once detected, stops the whole
//    deployment: every request loses its KV (NCCL's default error handling tears the processes
//    down; MultiWorld sets TORCH_NCCL_ASYNC_ERROR_HANDLING=2 precisely to avoid it, manager.py),
//    and the group is rebuilt over the survivors: one world creation plus every worker reloading
//    its weights. Growth (a scale-out, a repaired worker) needs the group re-created: the new
//    worker loads its weights first, then the deployment pauses for one world creation.
//  - multiworld: one world per pair of neighbouring workers. A failure, once detected by the
//    watchdog (world_watchdog.hpp), breaks only the failed worker's worlds: the engines routed
//    through it are re-bound to survivors and their requests recompute (KV lost), a failed front
//    worker's requests are re-routed to the other front workers; a new worker joins online after
//    loading its weights and creating one world per live neighbour. Every activation send/recv
//    pays the asynchronous completion polling (communicator.py, WorldCommunicator._wait_work:
//    `while not work.is_completed(): await asyncio.sleep(0)`, after a ThreadPoolExecutor per op).
// Scale-in takes a live worker out at once (no detection wait); its engines re-bind as after a
// failure (MultiWorld) or the group is re-created (single world). Or it drains the worker first
// (`drain_scale_in`), and engines moved between live workers can take their KV along
// (`kv_migration`): neither is in MultiWorld's paper or code, both [assumed] extensions.
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/serving/boundary_router.hpp"
#include "models/serving/replica.hpp"
#include "models/serving/stage_worker.hpp"
#include "models/serving/tp_allreduce.hpp"
#include "sim_core/base/stats.hpp"
#include "sim_core/base/units.hpp"
#include "sim_core/collectives/world_watchdog.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/hardware/hardware.hpp"
#include "sim_core/hardware/node_health.hpp"
#include "sim_core/run/results.hpp"

namespace mlsim::serving {

// What a process-group policy does (registered in policies.cpp).
struct ProcessGroupSemantics {
  bool isolates_failures = false;  // a failure breaks only the failed worker's worlds
  bool joins_online = false;       // a new worker joins without stopping the others
  bool polls = false;              // activation sends pay the asynchronous polling overhead
};

struct ElasticCosts {
  // Per activation send/recv, MultiWorld only.
  Time polling_overhead;
  // One poll of one pending operation on a worker's event loop (MultiWorld only;
  // communicator.py, WorldCommunicator._wait_work: `work.is_completed()`, then
  // `asyncio.sleep(0)`). A completion is noticed one round of the loop later, a round being one
  // poll per operation pending on that worker; zero: not modelled. Whatever its value, a worker's
  // loop busy-polls (a core at 100%) while it has an operation pending: reported as
  // serving_elastic_poll_cpu_hours.
  Time poll_step;
  // One world: TCPStore, init_process_group and the NCCL communicator's first collective
  // (manager.py: WorldManager._init_process_group, _trigger_nccl_communicator).
  Time world_creation;
  // A (re)starting worker's weights: its stage's bytes at this rate (storage or a host's NIC).
  Bandwidth weight_load;
  collectives::WatchdogConstants watchdog;
};

struct ElasticStage {
  std::int32_t layers = 0;
  int replicas = 1;      // workers at the start
  int max_replicas = 1;  // workers placed (the rest are spares for scale-out)
  // The GPU of its workers' hosts and the all-reduce over their intra_node link, when they differ
  // from the deployment's (the first stage's); absent: the deployment's.
  std::optional<GpuSpec> gpu;
  std::optional<TpAllReduce> tp_allreduce;
};

struct ScaleCommand {
  Time at;
  int stage = 0;
  int delta = 0;  // + workers out, - workers in
};

// Scales stage `stage` by the waiting requests per live front replica, checked every `interval`
// (on the timeline's sampling events, so at a multiple of system.series_interval):
// above `scale_out_above` a spare joins, below `scale_in_below` (and more than `min_replicas`) the
// last live worker leaves; no decision within `cooldown` of the previous one.
// Or, with `slo_signal`, by the SLO attainment of the requests completed since the previous check:
// below `scale_out_below` a spare joins, above `scale_in_above` a worker leaves (no decision when
// none completed).
struct AutoscalerConfig {
  bool enabled = false;
  int stage = 0;
  Time interval = Time::s(10);
  double scale_out_above = 0;
  double scale_in_below = 0;
  bool slo_signal = false;
  double scale_out_below = 0;
  double scale_in_above = 1;
  int min_replicas = 1;
  Time cooldown = Time::s(60);
};

// The rebalancing policy of a join when the scenario names none. least_work recomputes a third as
// many requests in the study's events and autoscaled variants but meets the SLO for fewer requests
// in three of its four (docs/elastic_serving.md), so the default stays fewest_engines.
inline constexpr const char* kDefaultRebalance = "fewest_engines";

struct ElasticConfig {
  std::string process_groups = "multiworld";
  ProcessGroupSemantics semantics;
  // The routers of the stage boundaries (boundary_router.hpp), a registered policy
  // (`elastic.stage_router`).
  std::string stage_router = "round_robin";
  StageRouting routing = StageRouting::kRoundRobin;
  // Where a join's rebalancing moves engines holding KV (boundary_router.hpp), a registered
  // policy (`elastic.rebalance`; the default is kDefaultRebalance, docs/elastic_serving.md).
  std::string rebalance = kDefaultRebalance;
  Rebalancing rebalancing = Rebalancing::kFewestEngines;
  ElasticCosts costs;
  std::vector<ElasticStage> stages;
  int virtual_engines = 0;  // per front replica; 0: stages x ceil(max workers of a stage / front)
  // An engine moved between live workers of a stage (rebalancing after a join, a draining
  // scale-in) takes its KV along over the network instead of recomputing (MultiWorld itself
  // re-routes and recomputes: an extension, [assumed] no cost beyond the bytes' transfer).
  bool kv_migration = false;
  // A scale-in drains the worker instead of taking it out at once: a front worker takes no new
  // request and leaves when its requests are done; a later-stage worker takes no new engine and
  // leaves when no engine is bound to it (its engines move when idle, or by KV migration). What
  // is left after `drain_timeout` [assumed 60 s] is taken out as an immediate scale-in would.
  bool drain_scale_in = false;
  Time drain_timeout = Time::s(60);
  std::vector<ScaleCommand> scale;
  AutoscalerConfig autoscaler;
};

// What the elastic deployment needs from the serving system that owns it.
class ElasticHost {
 public:
  virtual ~ElasticHost() = default;
  // A request that left a failed front replica: route it again (it recomputes).
  virtual void reroute(Request& r) = 0;
  // Requests completed and output tokens generated so far, and requests in the system.
  virtual std::uint64_t completed() const = 0;
  virtual std::uint64_t tokens_generated() const = 0;
  virtual std::int64_t in_system() const = 0;
  // No more arrivals will come.
  virtual bool arrivals_done() const = 0;
  // Over the requests completed so far: the sums of their TTFT and end-to-end latency (seconds)
  // and how many met both SLOs (the timeline's latency over time is their change per sample).
  struct LatencySums {
    double ttft_s = 0, e2e_s = 0;
    std::uint64_t slo_met = 0;
  };
  virtual LatencySums latency_sums() const = 0;
};

class ElasticDeployment final : public PathBinder, public WorkListener {
 public:
  // `workers[s]` are stage s's max_replicas workers (hosts and layers set; the first `replicas`
  // start live), `front[i]` the replica built on workers[0][i]. `weight_bytes[s]`: one worker's
  // weights at stage s. `gpus_per_worker`: for GPU-hours.
  ElasticDeployment(Engine& engine, ElasticConfig config,
                    std::vector<std::vector<std::unique_ptr<StageWorker>>> workers,
                    std::vector<Replica*> front, std::vector<double> weight_bytes,
                    int gpus_per_worker, ElasticHost& host, Time series_interval);

  // Subscribes to node failures and repairs (of the workers' hosts).
  void watch(NodeHealth& nodes);
  void start();

  // The front replicas that take new requests; empty while the deployment cannot serve.
  const std::vector<Replica*>& routable() const { return routable_; }
  // Changes (from 1) whenever the routable set does.
  std::uint64_t routable_version() const { return routable_version_; }
  // A request arriving while nothing is routable waits here.
  void hold(Request& r) { held_.push_back(&r); }

  // Direct control (tests, scale commands, the autoscaler).
  void fail_worker(int stage, int index);
  void repair_worker(int stage, int index);
  // Returns how many workers joined or left: fewer than |delta| when no spare (or no live
  // worker) is left.
  int scale(int stage, int delta);

  // PathBinder
  void bind_idle_engine(Replica& replica, std::uint32_t engine) override;
  void engine_settled(Replica& replica, std::uint32_t engine) override;
  void path_changed(Replica& replica, std::uint32_t engine, StageWorker& from,
                    StageWorker& to) override;
  // WorkListener: an engine's outstanding tokens changed (slot: its place in engine_slots_).
  void work_changed(std::uint32_t slot, std::int64_t delta) override;

  // Worker `index` of `stage` (> 0): the engines bound to it and their outstanding tokens, as the
  // boundary router keeps them (tests check them against a walk over every engine).
  std::int64_t bound_engines(int stage, int index) const { return routers_.engines(stage, index); }
  std::int64_t bound_work(int stage, int index) const { return routers_.work(stage, index); }
  // Whether the boundary routers' counters equal a walk over every engine's planned path.
  bool routers_consistent() const;
  // Virtual engines per front replica (resolved from the config).
  static int virtual_engines(const ElasticConfig& config);

  void report(Results& out, Time makespan) const;

  std::uint64_t recomputed() const { return recomputed_; }
  std::uint64_t rerouted() const { return rerouted_; }
  // Seconds during which the deployment could serve (a live worker at every stage, no restart).
  double available_seconds(Time now) const;
  int live_workers(int stage) const;

 private:
  // kDraining: a scale-in in progress (drain_scale_in): it runs what it holds but takes nothing
  // new.
  enum class State : std::uint8_t { kSpare, kLoading, kLive, kDraining, kFailed, kDown };
  struct Worker {
    StageWorker* w = nullptr;
    int stage = 0, index = 0;
    State state = State::kSpare;
    Time joined;     // its watchdog's tick 0 (monitor loop start)
    Time allocated;  // GPU-hours count from here while allocated
    bool allocated_now = false;
    bool awaiting_restart = false;
    bool repaired_before_detection =
        false;  // its host came back before the failure was noticed  // single world: loaded, joins
                // when the group is re-created
    std::uint64_t generation = 0;  // bumped on every state change, voids pending timers
    Time drain_started;
    bool polling = false;  // a later stage's loop busy-polls (a receive posted per upstream world)
    Time polling_since;
    bool leaving = false;  // failed while draining: it does not rejoin when repaired
  };
  Worker& at(int stage, int index) {
    return workers_[static_cast<std::size_t>(stage)][static_cast<std::size_t>(index)];
  }
  void allocate(Worker& k, bool on);
  // Every state change goes here: the boundary router takes engines to live workers only.
  void set_state(Worker& k, State state);
  // The receives each later-stage worker posts (one per live upstream neighbour's world) and
  // whether its event loop busy-polls; called on every state change (MultiWorld).
  void refresh_polling();
  // The worker of `stage` the boundary router sends an engine to (null: none live); `current`:
  // the engine's worker now (its own binding not counted, and it stays unless another is better).
  StageWorker* route(int stage, const StageWorker* current = nullptr);
  // The worker's weights and worlds, then it is live (multiworld) or it waits for a restart.
  void begin_join(int stage, int index);
  void finish_join(int stage, int index, std::uint64_t generation);
  void on_detected(int stage, int index, std::uint64_t generation);
  void take_out(int stage, int index);      // a detected failure or a scale-in
  void restart(Time outage, bool lose_kv);  // single world
  void end_restart();
  Time detection_delay(int stage, int index, Time failure) const;
  Time load_time(int stage) const;
  State state_of(int stage, const StageWorker* w) const;
  // `join`: a worker joined (or the deployment starts or restarts); else a drain began, where
  // under least_work no engine holding KV moves between live workers.
  void rebalance(int stage, bool join = true);
  // rebalance()'s first step: engines off workers that are not live, then even counts per live
  // worker; `by_work` selects Rebalancing::kLeastWork's destinations and skips.
  void even_out_engines(int stage, bool by_work);
  // rebalance()'s second step under kLeastWork after a join: engines holding KV move from the
  // most to the least loaded worker while that narrows the gap.
  void even_out_work(int stage);
  // Moves an engine that holds KV from its worker at `to`'s stage to `to`: by KV migration
  // (config_.kv_migration), else by recompute.
  void move_engine(Replica& r, std::uint32_t engine, StageWorker& to);
  // A scale-in: drains the worker (drain_scale_in) or takes it out at once (remove_worker).
  void begin_drain(int stage, int index);
  void check_drained();
  void finish_drain(int stage, int index, std::uint64_t generation, bool timed_out);
  void remove_worker(int stage, int index);
  void refresh_routable();
  bool can_serve() const;
  void set_serving(bool serving);
  void sample();
  void autoscale();

  Engine& engine_;
  ElasticConfig config_;
  std::vector<std::vector<std::unique_ptr<StageWorker>>> owned_;
  std::vector<std::vector<Worker>> workers_;
  std::vector<Replica*> front_;
  BoundaryRouters routers_;
  // Engine slot (WorkListener) -> its replica and virtual engine.
  std::vector<std::pair<Replica*, std::uint32_t>> engine_slots_;
  std::vector<double> weight_bytes_;
  int gpus_per_worker_;
  ElasticHost& host_;
  Time series_interval_;
  std::vector<Replica*> routable_;
  std::uint64_t routable_version_ = 0;
  std::deque<Request*> held_;
  bool restarting_ = false;
  Time restart_until_;
  std::uint64_t restart_generation_ = 0;
  bool serving_ = false;
  Time serving_since_;
  double serving_s_ = 0;
  double gpu_seconds_ = 0;
  Time last_autoscale_;
  Time next_autoscale_;
  bool autoscaled_once_ = false;
  std::uint64_t recomputed_ = 0, rerouted_ = 0, failures_ = 0, detections_ = 0, restarts_ = 0;
  std::uint64_t joins_ = 0, scale_outs_ = 0, scale_ins_ = 0;
  std::uint64_t kv_migrations_ = 0, requests_migrated_ = 0, drains_ = 0, drain_timeouts_ = 0;
  double kv_migrated_bytes_ = 0;
  double poll_s_ = 0;  // later-stage workers' busy-polling seconds, closed intervals
  int draining_ = 0;
  ExactQuantiles drain_s_;
  ElasticHost::LatencySums last_sums_, autoscale_sums_;
  std::uint64_t last_completed_ = 0, autoscale_completed_ = 0;
  double outage_s_ = 0;
  ExactQuantiles detection_s_;
  TimeSeries series_{"serving_elastic_timeline",
                     {"completed", "tokens_generated", "requests_in_system", "serving",
                      "live_workers", "recomputed", "ttft_mean_s", "e2e_mean_s", "slo_attainment"},
                     {}};
};

}  // namespace mlsim::serving
