#pragma once
// What a batch scheduler sees and changes on one replica (its queues and KV pool), and the
// strategy interface the replica calls once per iteration. The policies live in their own
// headers: static_batching.hpp, continuous_batching.hpp (vLLM), chunked_prefill.hpp (Sarathi).
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "models/serving/compute_model.hpp"
#include "models/serving/kv_cache.hpp"
#include "models/serving/prefix_cache.hpp"
#include "models/serving/request.hpp"

namespace mlsim::serving {

struct BatchEntry {
  Request* request = nullptr;
  WorkItem work;
};

struct Batch {
  std::vector<BatchEntry> entries;
  std::vector<WorkItem> items;  // the same work, contiguous, for the cost model
  std::int64_t tokens = 0;
  void clear() {
    entries.clear();
    items.clear();
    tokens = 0;
  }
  bool empty() const { return entries.empty(); }
};

struct BatchLimits {
  std::int32_t max_requests = 256;  // vLLM max_num_seqs default
  std::int32_t max_tokens = 4096;   // per iteration (vLLM max_num_batched_tokens / Sarathi budget)
};

// Told when a replica's outstanding tokens change: a router's load index (load_index.hpp) marks
// the replica for re-keying. Called on every change, so it must be O(1).
class LoadListener {
 public:
  virtual void load_changed(std::uint32_t slot) = 0;

 protected:
  ~LoadListener() = default;
};

// Told the change of a virtual engine's outstanding tokens (an elastic deployment's boundary
// routers keep each stage worker's sum over the engines bound to it). O(1) per call.
class WorkListener {
 public:
  virtual void work_changed(std::uint32_t slot, std::int64_t delta) = 0;

 protected:
  ~WorkListener() = default;
};

class ReplicaState {
 public:
  // `exit_layers[tier]` is the depth a request of that tier runs through (its exit), or 0 when
  // this replica does not serve the tier. `feature_layers` > 0 keeps each non-final tier's prompt
  // features at its exit (MFS intermediate-feature sharing), costed as that many layer-blocks.
  ReplicaState(KvBlockPool& kv, std::vector<std::int32_t> exit_layers, std::int32_t feature_layers,
               BatchLimits limits);

  std::deque<Request*>& waiting() { return waiting_; }
  std::vector<Request*>& running() { return running_; }
  const std::deque<Request*>& waiting() const { return waiting_; }
  const std::vector<Request*>& running() const { return running_; }
  KvBlockPool& kv() { return kv_; }
  const KvBlockPool& kv() const { return kv_; }
  const BatchLimits& limits() const { return limits_; }
  std::int32_t exit_layer(std::int32_t tier) const;
  bool serves(std::int32_t tier) const;
  // Layers of the deepest tier served here.
  std::int32_t depth() const { return exit_layers_[static_cast<std::size_t>(top_tier_)]; }

  // Grows (or keeps) the request's KV to hold `tokens` tokens of its tier (evicting unreferenced
  // prefix-cache blocks when the pool is short); false if no room.
  [[nodiscard]] bool reserve(Request& r, std::int64_t tokens);

  // Prefix caching (off unless enabled): blocks of `block_tokens` tokens, each `layer_blocks` of
  // the pool. The replica must serve one depth (no MFS tiers).
  void enable_prefix_cache(std::int32_t block_tokens, std::int64_t layer_blocks);
  const PrefixCache* prefix_cache() const { return prefix_.get(); }
  // Prompt tokens of a waiting request (nothing computed yet) that the cache already holds: its
  // longest run of cached leading full blocks, leaving at least one token to compute (the prefill
  // must produce the logits of the last one).
  std::int32_t prefix_hit_tokens(const Request& r) const;
  // Prompt tokens of `spec` whose full blocks lead the cache (0 when off): what a cache-aware
  // router compares.
  std::int32_t cached_prefix_tokens(const RequestSpec& spec) const;
  // Admits a waiting request: references the `hit_tokens` of cached prefix (from
  // prefix_hit_tokens, just before), reserves KV for `tokens` tokens and marks the hit computed.
  // False (and nothing changed) if the KV does not fit.
  [[nodiscard]] bool admit(Request& r, std::int64_t tokens, std::int32_t hit_tokens);
  // After a request's prefill completes: its full prompt blocks not yet shared go to the cache.
  void publish_prefix(Request& r);
  // Prompt tokens of admitted prefills, and those found in the cache (prefill saved).
  std::int64_t prefix_lookup_tokens() const { return prefix_lookup_tokens_; }
  std::int64_t prefix_hit_tokens_total() const { return prefix_hit_tokens_; }
  std::uint64_t prefix_hit_requests() const { return prefix_hit_requests_; }
  // Releases all of the request's KV (and stored features).
  void release(Request& r);
  // Preemption by recompute: releases the KV, rewinds progress so that the prompt and the tokens
  // generated so far are prefilled again, and puts the request first in the waiting queue.
  void preempt(Request& r);
  // Whether a request could ever complete here (its full length fits the empty pool).
  bool fits_at_all(const Request& r) const;

  // Adds a work item for `r` to `batch`: a prefill chunk of `tokens` or a decode step.
  void add_prefill(Batch& batch, Request& r, std::int32_t tokens) const;
  void add_decode(Batch& batch, Request& r) const;

  std::uint64_t preemptions() const { return preemptions_; }
  // Static batches closed by max_batch_tokens with requests still waiting.
  std::uint64_t batches_cut_by_token_limit() const { return token_limit_cuts_; }
  void note_batch_cut_by_token_limit() { ++token_limit_cuts_; }

  // Sum of outstanding_tokens() over the waiting and running requests, kept up to date by whoever
  // changes a queued request's progress (the replica, and preempt() here), so that a router reads
  // it in O(1) instead of walking the queues on every arrival.
  // Every change goes through add_outstanding_tokens(), which tells the listener (if any).
  std::int64_t outstanding_tokens() const { return outstanding_tokens_; }
  void add_outstanding_tokens(std::int64_t delta) {
    outstanding_tokens_ += delta;
    if (delta == 0) return;
    if (load_listener_ != nullptr) load_listener_->load_changed(load_slot_);
    if (work_listener_ != nullptr) work_listener_->work_changed(work_slot_, delta);
  }
  void set_work_listener(WorkListener* listener, std::uint32_t slot) {
    work_listener_ = listener;
    work_slot_ = slot;
  }
  void set_load_listener(LoadListener* listener, std::uint32_t slot) {
    load_listener_ = listener;
    load_slot_ = slot;
  }

 private:
  KvBlockPool& kv_;
  std::vector<std::int32_t> exit_layers_;
  std::int32_t feature_layers_;
  std::int32_t top_tier_;
  BatchLimits limits_;
  std::deque<Request*> waiting_;
  std::vector<Request*> running_;
  std::uint64_t preemptions_ = 0;
  std::uint64_t token_limit_cuts_ = 0;
  std::int64_t outstanding_tokens_ = 0;
  LoadListener* load_listener_ = nullptr;
  std::uint32_t load_slot_ = 0;
  WorkListener* work_listener_ = nullptr;
  std::uint32_t work_slot_ = 0;
  std::unique_ptr<PrefixCache> prefix_;
  std::int64_t prefix_lookup_tokens_ = 0, prefix_hit_tokens_ = 0;
  std::uint64_t prefix_hit_requests_ = 0;
};

class BatchScheduler {
 public:
  virtual ~BatchScheduler() = default;
  virtual std::string_view name() const = 0;
  // Picks the next iteration's work, admitting, reserving KV and preempting as the policy does.
  // Leaves `batch` empty when there is nothing to run.
  virtual void next_batch(ReplicaState& state, Batch& batch) = 0;
};

// Decodes every running request that is past its prefill, growing each one's KV by a token and,
// when the pool is full, preempting the most recently admitted request (vLLM's policy) until the
// token fits. Shared by the continuous and chunked-prefill schedulers.
void schedule_decodes(ReplicaState& state, Batch& batch);

}  // namespace mlsim::serving
