#pragma once
// One model replica: tp GPUs running iterations back to back. Each iteration asks the scheduler
// for a batch, costs it through the platform's cost providers and runs it on the replica's GPUs
// through Compute (lock-step, so a slowed GPU slows the iteration), then waits for the
// tensor-parallel all-reduces (their time from the cost model: the collective layer's cost of a
// ring all-reduce over the replica's GPUs, per all-reduce; tp_allreduce.hpp), then applies the
// batch's progress.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/serving/compute_model.hpp"
#include "models/serving/kv_cache.hpp"
#include "models/serving/scheduler.hpp"
#include "sim_core/base/stats.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/hardware/compute.hpp"

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
  // An iteration finished (for time series); default: nothing.
  virtual void on_iteration(Replica&) {}
  // The replica's KV pool usage may have changed (after scheduling); default: nothing.
  virtual void on_kv_changed(Replica&) {}
};

struct ReplicaConfig {
  std::string name;
  std::int32_t index = 0;  // in the serving system, for the per-request log
  int tp = 1;
  std::vector<NodeId> gpus;  // the host of each of its tp GPUs (the same host for a TP group)
  // Serving-engine framework overhead per iteration (CPU-side scheduling, input preparation,
  // sampling), not scaled by the GPUs' speed.
  Time iteration_overhead;
  // MFS: tokens of several tiers sampled in one pass. When off, each extra exit head sampled in
  // an iteration adds a separate sampling pass costing `sampling_pass_overhead`.
  bool multi_level_sampling = true;
  Time sampling_pass_overhead;
  // MFS: an escalated request continues here, reusing its prompt's KV of the lower tier's layers.
  bool reuse_across_tiers = false;
  // Prefix caching: tokens per content-identified block (the request source's, Mooncake: 512); 0
  // is off. A multiple of the KV pool's block size; the replica must serve one depth.
  std::int32_t prefix_block_tokens = 0;
};

class Replica {
 public:
  Replica(Engine& engine, Compute& compute, ReplicaConfig config,
          std::unique_ptr<IterationCostModel> cost, KvBlockPool kv,
          std::vector<std::int32_t> exit_layers, std::int32_t feature_layers, BatchLimits limits,
          std::unique_ptr<BatchScheduler> scheduler, ReplicaObserver& observer);
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  // Queues a new answer of `r` (its tier must be served here) and starts an iteration if idle.
  void submit(Request& r);
  bool serves(std::int32_t tier) const { return state_.serves(tier); }
  std::int32_t exit_layer(std::int32_t tier) const { return state_.exit_layer(tier); }

  const std::string& name() const { return config_.name; }
  const ReplicaConfig& config() const { return config_; }
  const IterationCostModel& cost_model() const { return *cost_; }
  const ReplicaState& state() const { return state_; }
  const KvBlockPool& kv() const { return kv_; }
  // Prefill and output tokens still to process for the requests queued or running here (what the
  // least-outstanding-tokens router balances): a running total, O(1).
  std::int64_t outstanding_tokens() const { return state_.outstanding_tokens(); }
  // Prompt tokens of `spec` this replica's prefix cache holds (0 when prefix caching is off).
  std::int32_t cached_prefix_tokens(const RequestSpec& spec) const {
    return state_.cached_prefix_tokens(spec);
  }
  bool busy() const { return busy_; }
  // The batch of the iteration that just completed (valid inside on_iteration).
  const Batch& last_batch() const { return batch_; }

  // Statistics.
  double busy_seconds() const { return busy_s_; }
  std::uint64_t iterations() const { return iterations_; }
  std::uint64_t tokens_processed() const { return tokens_processed_; }
  const TimeAverage& kv_usage() const { return kv_usage_; }  // in layer-blocks
  std::uint64_t preemptions() const { return state_.preemptions(); }

 private:
  void try_start();
  void on_compute_done();
  void complete_iteration();
  void finish_answer(Request& r);

  Engine& engine_;
  Compute& compute_;
  ReplicaConfig config_;
  std::vector<NodeId> compute_hosts_;  // the distinct hosts of its GPUs (lock-step on each)
  std::vector<double> nominal_;        // this iteration's GPU seconds per host (scratch)
  std::unique_ptr<IterationCostModel> cost_;
  KvBlockPool kv_;
  ReplicaState state_;
  std::unique_ptr<BatchScheduler> scheduler_;
  ReplicaObserver& observer_;

  Batch batch_;
  IterationCost batch_cost_;
  bool busy_ = false;
  bool start_pending_ = false;
  Time iteration_start_;

  double busy_s_ = 0;
  std::uint64_t iterations_ = 0;
  std::uint64_t tokens_processed_ = 0;
  TimeAverage kv_usage_;
};

}  // namespace mlsim::serving
