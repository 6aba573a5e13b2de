#pragma once
// One model replica: pp pipeline stages of tp GPUs each (pp = 1: one tensor-parallel group)
// running iterations back to back. Each iteration asks the scheduler for a batch, costs it
// through the platform's cost providers and runs it on the replica's GPUs through Compute
// (lock-step, so a slowed GPU slows the iteration), then waits for the tensor-parallel
// all-reduces (their time from the cost model: the collective layer's cost of a ring all-reduce
// over the replica's GPUs, per all-reduce; tp_allreduce.hpp), then applies the batch's progress.
//
// Pipeline parallelism (pp > 1), as vLLM v0 runs it (vllm/engine/llm_engine.py: one Scheduler
// per "virtual engine", pipeline_parallel_size of them; a new request goes to the one with the
// fewest unfinished requests; each has at most one batch in the pipeline): the replica has pp
// virtual engines, each with its own queues (ReplicaState) and at most one batch in flight, so
// up to pp batches (the micro-batches) are in the pipeline at once. A batch runs stage by stage:
// stage s runs its layers' compute and all-reduces, then sends the batch's activations (tokens x
// hidden x dtype bytes) to stage s+1 as a send/recv of the collective layer (point_to_point.hpp:
// NVLink within a host, the network across hosts) and is free for the next micro-batch. A stage
// takes micro-batches in arrival order. The batch's progress applies when its last stage ends,
// and its virtual engine then schedules its next batch: the iteration time is the pipeline's
// schedule (a stage waits for its input, micro-batches overlap), not a sum.
// Simplifications: the virtual engines share one KV pool (vLLM v0 splits the blocks evenly
// between them), and the per-iteration framework overhead is paid once, on the first stage.
//
// Replicated stages (issue 16, elastic.hpp): a stage is a StageWorker (stage_worker.hpp), a TP
// group on one host running a layer range with a FIFO of micro-batches. Each virtual engine has
// its own path, one worker per stage; forward() sends its micro-batch's activations to the next
// worker of that path. A plain replica owns its workers and every path is the same; in an
// elastic deployment the replica is the front (stage 0) worker with its virtual engines, the
// workers of later stages are shared with the other front replicas, and a router per stage
// boundary binds each virtual engine to one of them (bind()); the engine's requests keep their
// KV on the workers of its path. A failure resets the engines routed through the failed worker
// (reset_engine(): their micro-batch is dropped, their requests recompute) or, when the front
// worker fails, empties the replica (evacuate()).
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/serving/compute_model.hpp"
#include "models/serving/kv_cache.hpp"
#include "models/serving/point_to_point.hpp"
#include "models/serving/scheduler.hpp"
#include "models/serving/stage_worker.hpp"
#include "sim_core/base/stats.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/hardware/compute.hpp"
#include "sim_core/run/span_trace.hpp"

namespace mlsim::serving {

class Replica;

// Chooses the path of a virtual engine that holds no request (elastic.hpp): called by submit()
// before a request joins an empty engine, so that an engine is re-routed only when no KV is lost.
class PathBinder {
 public:
  virtual ~PathBinder() = default;
  virtual void bind_idle_engine(Replica& replica, std::uint32_t engine) = 0;
  // The engine's micro-batch finished its last stage (it has none in flight now).
  virtual void engine_settled(Replica& replica, std::uint32_t engine) = 0;
  // The worker of stage `from->stage` the engine is bound to once any KV migration ends
  // (planned_path()) changed from `from` to `to` (bind, a migration started, cancelled or voided).
  virtual void path_changed(Replica& replica, std::uint32_t engine, StageWorker& from,
                            StageWorker& to) = 0;
};

// Hooks the serving system implements; called from within the replica's events.
class ReplicaObserver {
 public:
  virtual ~ReplicaObserver() = default;
  // The request's first output token was sampled (TTFT).
  virtual void on_first_token(Replica& replica, Request& r) = 0;
  // The current answer is complete and its KV released; the request left the replica.
  virtual void on_answer_done(Replica& replica, Request& r) = 0;
  // The request can never fit this replica's KV pool; it was not queued.
  virtual void on_dropped(Replica& replica, Request& r) = 0;
  // A prefill replica of a disaggregated deployment finished the request's prefill (its first
  // token is sampled); the request left its queues and its KV stays here until
  // release_handed_off(). Only prefill replicas call it.
  virtual void on_prefill_done(Replica& replica, Request& r);
  // An iteration finished (for time series); default: nothing.
  virtual void on_iteration(Replica&) {}
  // The replica's KV pool usage may have changed (after scheduling); default: nothing.
  virtual void on_kv_changed(Replica&) {}
};

struct ReplicaConfig {
  std::string name;
  std::int32_t index = 0;  // in the serving system, for the per-request log
  int tp = 1;
  // The host of each of its tp x pp GPUs, stage by stage (the same host for a stage's TP group).
  std::vector<NodeId> gpus;
  // Layers of each pipeline stage, in order, summing to the model's depth; empty: one stage.
  std::vector<std::int32_t> stage_layers;
  // The intra_node link of the stages' hosts (activations sent between stages on one host).
  HostLink host_link;
  // Serving-engine framework overhead per iteration (CPU-side scheduling, input preparation,
  // sampling), not scaled by the GPUs' speed.
  Time iteration_overhead;
  // MFS: tokens of several tiers sampled in one pass. When off, each extra exit head sampled in
  // an iteration adds a separate sampling pass costing `sampling_pass_overhead`.
  bool multi_level_sampling = true;
  Time sampling_pass_overhead;
  // MFS: an escalated request continues here, reusing its prompt's KV of the lower tier's layers.
  bool reuse_across_tiers = false;
  // Prefill/decode disaggregation: a prefill replica hands a request off (on_prefill_done) once its
  // prefill sampled the first token, instead of decoding it.
  bool hand_off_after_prefill = false;
  // Prefix caching: tokens per content-identified block (the request source's, Mooncake: 512); 0
  // is off. A multiple of the KV pool's block size; the replica must serve one depth.
  std::int32_t prefix_block_tokens = 0;
  // Elastic deployments: the workers of every stage at the start (the path of every virtual
  // engine; owned by the deployment, outliving the replica). Empty: the replica builds its own
  // stages from `gpus` and `stage_layers`.
  std::vector<StageWorker*> stage_workers;
  // Virtual engines (micro-batches in the pipeline at once); 0: one per stage (vLLM v0).
  int virtual_engines = 0;
  // Added to every activation send between stages: MultiWorld's asynchronous completion polling
  // (elastic.hpp); zero otherwise.
  Time send_overhead;
  // MultiWorld's host-side polling (elastic.hpp): `polls` counts the time the front worker's event
  // loop busy-polls (an engine in flight); `poll_step` is one poll of one pending operation, so
  // that a completion is noticed one round (poll_step x the operations pending) later.
  bool polls = false;
  Time poll_step;
};

class Replica {
 public:
  Replica(Engine& engine, Compute& compute, ReplicaConfig config,
          std::unique_ptr<IterationCostModel> cost, KvBlockPool kv,
          std::vector<std::int32_t> exit_layers, std::int32_t feature_layers, BatchLimits limits,
          std::unique_ptr<BatchScheduler> scheduler, ReplicaObserver& observer,
          PointToPoint* transfers = nullptr);
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  // Queues a new answer of `r` (its tier must be served here) and starts an iteration if idle.
  void submit(Request& r);
  // Whether the request's whole length could ever fit this replica's KV pool.
  bool fits_at_all(const Request& r) const { return engines_.front().state.fits_at_all(r); }

  // Prefill/decode disaggregation, on a decode replica: reserves room for the KV of the request's
  // computed tokens and its next one (false, nothing reserved, when the pool is short); then,
  // once that KV arrived, accept_decode() queues the request to decode here. On its prefill
  // replica, release_handed_off() frees the KV that was sent.
  bool has_room_for_incoming(const Request& r) const {
    return kv_.free() >= kv_.blocks_for(incoming_tokens(r), exit_layer(r.tier));
  }
  [[nodiscard]] bool reserve_incoming(Request& r);
  void accept_decode(Request& r);
  void release_handed_off(Request& r);

  bool serves(std::int32_t tier) const { return engines_.front().state.serves(tier); }
  std::int32_t exit_layer(std::int32_t tier) const {
    return engines_.front().state.exit_layer(tier);
  }

  const std::string& name() const { return config_.name; }
  const ReplicaConfig& config() const { return config_; }
  const IterationCostModel& cost_model() const { return *cost_; }
  // The queues of the first virtual engine (the only one when pp = 1).
  const ReplicaState& state() const { return engines_.front().state; }
  // Every virtual engine's queues (pp of them).
  std::size_t virtual_engines() const { return engines_.size(); }
  const ReplicaState& state(std::size_t engine) const { return engines_[engine].state; }
  std::size_t waiting_count() const;
  const KvBlockPool& kv() const { return kv_; }
  // Prefill and output tokens still to process for the requests queued or running here (what the
  // least-outstanding-tokens router balances): a running total, O(1) per virtual engine.
  std::int64_t outstanding_tokens() const;
  // Tells `listener` (null: nobody) of every change of outstanding_tokens(), as `slot`.
  void set_load_listener(LoadListener* listener, std::uint32_t slot) {
    for (auto& v : engines_) v.state.set_load_listener(listener, slot);
  }
  // Prompt tokens of `spec` this replica's prefix cache holds (0 when prefix caching is off).
  std::int32_t cached_prefix_tokens(const RequestSpec& spec) const {
    return engines_.front().state.cached_prefix_tokens(spec);
  }
  bool busy() const;
  // The batch of the iteration that just completed (valid inside on_iteration).
  const Batch& last_batch() const { return *last_batch_; }
  int pp() const { return static_cast<int>(stages_.size()); }
  // Records every stage's iterations as spans on `trace` (process = the replica's index, one
  // thread per pipeline stage); null: none (the default).
  void set_trace(SpanTrace* trace);

  // Elastic deployments (elastic.hpp).
  // The worker of stage `stage` on virtual engine `engine`'s path.
  StageWorker* path(std::uint32_t engine, std::size_t stage) const {
    return engines_[engine].path[stage];
  }
  // Routes the engine's micro-batches through `worker` at its stage from now on.
  void bind(std::uint32_t engine, StageWorker& worker);
  // Tells `listener` (null: nobody) of every change of an engine's outstanding tokens, engine v
  // as slot `first_slot + v` (an elastic deployment's boundary routers, boundary_router.hpp).
  void set_work_listener(WorkListener* listener, std::uint32_t first_slot) {
    for (std::uint32_t v = 0; v < engines_.size(); ++v)
      engines_[v].state.set_work_listener(listener, first_slot + v);
  }
  std::int64_t engine_outstanding_tokens(std::uint32_t engine) const {
    return engines_[engine].state.outstanding_tokens();
  }
  // The worker of stage `stage` the engine is bound to once a KV migration in progress ends
  // (path() until then).
  StageWorker* planned_path(std::uint32_t engine, std::size_t stage) const {
    const auto& v = engines_[engine];
    return v.migrating_to != nullptr && static_cast<std::size_t>(v.migrating_to->stage) == stage
               ? v.migrating_to
               : v.path[stage];
  }
  bool engine_migrating(std::uint32_t engine) const {
    return engines_[engine].migrating_to != nullptr;
  }
  bool engine_in_flight(std::uint32_t engine) const { return engines_[engine].in_flight; }
  // Moves the engine's requests' KV of `worker`'s stage from the engine's current worker there
  // to `worker` (KV migration on rebalancing, a draining scale-in): the engine starts no batch
  // from now; once its micro-batch in flight (if any) is done, the KV of its running requests
  // (their computed tokens x the stage's layers) is sent over the collective layer between the
  // two workers' hosts, then the engine is bound to `worker` and resumes, nothing recomputed.
  // `done(bytes)` runs then. A reset_engine() meanwhile (a failure) cancels it: the requests
  // recompute and `done` never runs.
  void migrate_engine(std::uint32_t engine, StageWorker& worker,
                      std::function<void(std::int64_t bytes)> done);
  // The migration's destination is gone: the engine stays where it is with its KV and resumes
  // (`done` never runs).
  void cancel_migration(std::uint32_t engine);
  // Whether the engine holds no request (waiting or running) and has no batch in flight.
  bool engine_idle(std::uint32_t engine) const {
    const auto& v = engines_[engine];
    return !v.in_flight && v.state.waiting().empty() && v.state.running().empty();
  }
  // Whether moving the engine would lose KV: a request running (its KV on the path's workers) or
  // a micro-batch in flight.
  bool engine_holds_kv(std::uint32_t engine) const {
    const auto& v = engines_[engine];
    return v.in_flight || !v.state.running().empty();
  }
  // Tokens a reset_engine() would add to the engine's outstanding tokens: each running request's
  // prompt and generated tokens, to prefill again, less what its prefill still had to do.
  std::int64_t engine_recompute_tokens(std::uint32_t engine) const;
  std::size_t engine_requests(std::uint32_t engine) const {
    return engines_[engine].state.waiting().size() + engines_[engine].state.running().size();
  }
  // The KV of the engine's requests is lost (a worker of its path failed): its micro-batch in
  // flight is dropped and every running request is rewound to recompute its prompt and the
  // tokens it generated (as a preemption by recompute), first in the waiting queue. Returns the
  // requests rewound.
  std::size_t reset_engine(std::uint32_t engine);
  // The front worker failed: every request queued or running here leaves (KV released, progress
  // kept for recompute elsewhere) and is appended to `out`; nothing runs until set_active(true).
  void evacuate(std::vector<Request*>& out);
  // An inactive replica starts no batch (its front worker is down or not yet joined).
  void set_active(bool active);
  bool active() const { return active_; }
  // Queues a request that left another replica (evacuate()): it prefills its prompt and the tokens
  // it generated there, then continues.
  void submit_recompute(Request& r);
  void set_binder(PathBinder* binder) { binder_ = binder; }
  // Micro-batches dropped: sent to a worker that failed, or stale after a reset.
  std::uint64_t lost_micro_batches() const { return lost_micro_batches_; }

  // MultiWorld: seconds until `now` during which the front worker's event loop busy-polled (an
  // engine in flight awaiting its send or its result; config().polls).
  double polling_seconds(Time now) const {
    return polling_s_ + (in_flight_count_ > 0 ? (now - polling_since_).seconds() : 0);
  }

  // Statistics. busy_seconds: the stages' busy time (compute and all-reduces) over pp.
  double busy_seconds() const;
  double stage_busy_seconds(int stage) const {
    return stages_[static_cast<std::size_t>(stage)]->busy_s;
  }
  std::uint64_t iterations() const { return iterations_; }
  std::uint64_t tokens_processed() const { return tokens_processed_; }
  const TimeAverage& kv_usage() const { return kv_usage_; }  // in layer-blocks
  std::uint64_t preemptions() const;
  // Activation bytes sent between stages.
  std::int64_t activation_bytes() const { return activation_bytes_; }
  // MoE at ep > 1: the dispatch and combine all-to-alls' bytes (each GPU's send buffer, summed).
  std::int64_t alltoall_bytes() const { return alltoall_bytes_; }
  // MoE with a capacity factor: (token, expert) assignments routed and dropped over capacity.
  std::int64_t moe_routed_pairs() const { return moe_routed_pairs_; }
  std::int64_t moe_dropped_pairs() const { return moe_dropped_pairs_; }

 private:
  // A virtual engine: its own queues, at most one batch in the pipeline.
  struct VirtualEngine {
    explicit VirtualEngine(ReplicaState s) : state(std::move(s)) {}
    ReplicaState state;
    Batch batch;
    bool in_flight = false;
    Time started;                    // when its batch was scheduled
    std::vector<StageWorker*> path;  // one worker per stage
    std::uint32_t epoch = 0;         // bumped by a reset: its micro-batches in flight are stale
    // A KV migration to this worker: the engine starts no batch until it ends.
    StageWorker* migrating_to = nullptr;
    bool migration_sending = false;
    std::uint32_t migration = 0;  // bumped by every migration, cancel and reset: voids stale ends
    std::function<void(std::int64_t)> migrated;
  };
  void start_migration(std::uint32_t engine);
  // Runs `change` on the engine, then tells the binder of each stage whose planned worker changed.
  template <typename Change>
  void change_path(std::uint32_t engine, Change&& change);

  bool all_in_flight() const;
  // Every change of an engine's in_flight goes here (the front's polling time).
  void set_in_flight(VirtualEngine& ve, bool in_flight);
  // Tokens of KV a handed-off request reserves here: its computed tokens and the next one, or
  // under static batching (which reserves whole lengths and never grows them) its whole length.
  std::int64_t incoming_tokens(const Request& r) const {
    return scheduler_->name() == "static"
               ? std::int64_t{r.spec.prompt_tokens} + r.spec.output_tokens
               : std::int64_t{r.cached} + 1;
  }
  VirtualEngine& least_loaded_engine();
  void schedule_start();
  void try_start();
  // Starts the worker's next micro-batch that is not stale (on the replica it belongs to).
  static void run_next(StageWorker& w);
  void run_job(StageWorker& w);
  void on_stage_compute_done(StageWorker& w);
  void on_stage_done(StageWorker& w);
  // Sends the micro-batch's activations from worker w to the next worker of the engine's path.
  void forward(StageWorker& w, std::uint32_t engine);
  void arrive_at_stage(StageWorker& w, std::uint32_t engine, std::uint32_t worker_epoch,
                       std::uint32_t engine_epoch);
  void enqueue(StageWorker& w, std::uint32_t engine);
  void complete_iteration(std::uint32_t engine);
  void finish_answer(ReplicaState& state, Request& r);

  Engine& engine_;
  Compute& compute_;
  ReplicaConfig config_;
  std::unique_ptr<IterationCostModel> cost_;
  KvBlockPool kv_;
  std::vector<VirtualEngine> engines_;
  std::vector<std::unique_ptr<StageWorker>> own_stages_;
  std::vector<StageWorker*> stages_;           // the path every engine starts with
  std::unique_ptr<BatchScheduler> scheduler_;  // keeps no state: shared by the virtual engines
  ReplicaObserver& observer_;
  PointToPoint* transfers_;
  SpanTrace* trace_ = nullptr;

  const Batch* last_batch_ = nullptr;
  bool start_pending_ = false;
  bool active_ = true;
  PathBinder* binder_ = nullptr;
  std::uint64_t lost_micro_batches_ = 0;
  std::uint32_t in_flight_count_ = 0;
  Time polling_since_;
  double polling_s_ = 0;

  std::uint64_t iterations_ = 0;
  std::uint64_t tokens_processed_ = 0;
  std::int64_t activation_bytes_ = 0;
  std::int64_t alltoall_bytes_ = 0;
  std::int64_t moe_routed_pairs_ = 0, moe_dropped_pairs_ = 0;
  TimeAverage kv_usage_;
};

}  // namespace mlsim::serving
