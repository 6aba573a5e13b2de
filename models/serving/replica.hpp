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
// Stage abstraction and issue 16 (replicated stages): a Stage is a TP group on one host running
// a layer range with a FIFO of micro-batches; the only thing that ties stage s to stage s+1 is
// forward(), which sends a micro-batch's activations to the next Stage. Stages with their own
// replica counts would make forward() pick one of stage s+1's replicas (a router per stage
// boundary, over the send/recv links between neighbouring replicas: MultiWorld's worlds) and pin
// a request to the stage replicas that hold its KV; the virtual engines would move to the
// first stage's replicas. Not built here.
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "models/serving/compute_model.hpp"
#include "models/serving/kv_cache.hpp"
#include "models/serving/point_to_point.hpp"
#include "models/serving/scheduler.hpp"
#include "sim_core/base/stats.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/hardware/compute.hpp"
#include "sim_core/run/span_trace.hpp"

namespace mlsim::serving {

class Replica;

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

  // Statistics. busy_seconds: the stages' busy time (compute and all-reduces) over pp.
  double busy_seconds() const;
  double stage_busy_seconds(int stage) const {
    return stages_[static_cast<std::size_t>(stage)].busy_s;
  }
  std::uint64_t iterations() const { return iterations_; }
  std::uint64_t tokens_processed() const { return tokens_processed_; }
  const TimeAverage& kv_usage() const { return kv_usage_; }  // in layer-blocks
  std::uint64_t preemptions() const;
  // Activation bytes sent between stages.
  std::int64_t activation_bytes() const { return activation_bytes_; }

 private:
  // A virtual engine: its own queues, at most one batch in the pipeline.
  struct VirtualEngine {
    explicit VirtualEngine(ReplicaState s) : state(std::move(s)) {}
    ReplicaState state;
    Batch batch;
    bool in_flight = false;
    Time started;  // when its batch was scheduled
  };
  // A pipeline stage: a TP group on one host running layers [first_layer, last_layer).
  struct Stage {
    std::int32_t first_layer = 0, last_layer = 0;
    std::vector<NodeId> hosts;        // the distinct hosts of its GPUs (lock-step on each)
    std::vector<double> nominal;      // this micro-batch's GPU seconds per host (scratch)
    std::deque<std::uint32_t> queue;  // virtual engines whose batch waits for this stage
    bool busy = false;
    std::uint32_t current = 0;  // the virtual engine whose batch runs here
    Time allreduce;             // the current micro-batch's all-reduces
    Time started;
    double busy_s = 0;
  };

  bool all_in_flight() const;
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
  void run_stage(std::size_t s);
  void on_stage_compute_done(std::size_t s);
  void on_stage_done(std::size_t s);
  // Sends the micro-batch's activations from stage s to stage s+1.
  void forward(std::size_t s, std::uint32_t engine);
  void arrive_at_stage(std::size_t s, std::uint32_t engine);
  void complete_iteration(std::uint32_t engine);
  void finish_answer(ReplicaState& state, Request& r);

  Engine& engine_;
  Compute& compute_;
  ReplicaConfig config_;
  std::unique_ptr<IterationCostModel> cost_;
  KvBlockPool kv_;
  std::vector<VirtualEngine> engines_;
  std::vector<Stage> stages_;
  std::unique_ptr<BatchScheduler> scheduler_;  // keeps no state: shared by the virtual engines
  ReplicaObserver& observer_;
  PointToPoint* transfers_;
  SpanTrace* trace_ = nullptr;

  const Batch* last_batch_ = nullptr;
  bool start_pending_ = false;

  std::uint64_t iterations_ = 0;
  std::uint64_t tokens_processed_ = 0;
  std::int64_t activation_bytes_ = 0;
  TimeAverage kv_usage_;
};

}  // namespace mlsim::serving
