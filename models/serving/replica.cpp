#include "models/serving/replica.hpp"

#include <algorithm>

#include "sim_core/base/error.hpp"

namespace mlsim::serving {

Replica::Replica(Engine& engine, Compute& compute, ReplicaConfig config,
                 std::unique_ptr<IterationCostModel> cost, KvBlockPool kv,
                 std::vector<std::int32_t> exit_layers, std::int32_t feature_layers,
                 BatchLimits limits, std::unique_ptr<BatchScheduler> scheduler,
                 ReplicaObserver& observer)
    : engine_(engine),
      compute_(compute),
      config_(std::move(config)),
      compute_hosts_([&] {
        std::vector<NodeId> h;
        for (NodeId g : config_.gpus)
          if (std::find(h.begin(), h.end(), g) == h.end()) h.push_back(g);
        return h;
      }()),
      nominal_(compute_hosts_.size()),
      cost_(std::move(cost)),
      kv_(kv),
      state_(kv_, std::move(exit_layers), feature_layers, limits),
      scheduler_(std::move(scheduler)),
      observer_(observer) {
  MLSIM_CHECK(config_.tp == cost_->tp(), "replica and cost model disagree on tp");
  MLSIM_CHECK(static_cast<int>(config_.gpus.size()) == config_.tp,
              "a replica names the host of each of its GPUs");
  kv_usage_.set(engine_.now(), 0);
  if (config_.prefix_block_tokens > 0) {
    const std::int32_t bt = config_.prefix_block_tokens;
    MLSIM_CHECK(bt % kv_.block_tokens() == 0, "prefix blocks must be whole KV blocks");
    state_.enable_prefix_cache(bt, kv_.blocks_for(bt, state_.depth()));
  }
}

void Replica::submit(Request& r) {
  if (!state_.fits_at_all(r)) {
    observer_.on_dropped(*this, r);
    return;
  }
  r.prefill_target = r.spec.prompt_tokens;
  r.cached = 0;
  r.generated = 0;
  r.answer_start = engine_.now();
  state_.waiting().push_back(&r);
  state_.add_outstanding_tokens(r.outstanding_tokens());
  // Start on an event of its own at the current time, so that requests arriving at the same
  // instant join the same batch.
  if (!busy_ && !start_pending_) {
    start_pending_ = true;
    engine_.schedule_in(Time::zero(), [this] {
      start_pending_ = false;
      try_start();
    });
  }
}

void Replica::try_start() {
  if (busy_) return;
  scheduler_->next_batch(state_, batch_);
  kv_usage_.set(engine_.now(), static_cast<double>(kv_.used()));
  observer_.on_kv_changed(*this);
  if (batch_.empty()) return;
  busy_ = true;
  iteration_start_ = engine_.now();
  batch_cost_ = cost_->cost(batch_.items);
  double host_seconds = config_.iteration_overhead.seconds();
  if (!config_.multi_level_sampling && batch_cost_.exits_sampled > 1)
    host_seconds += (batch_cost_.exits_sampled - 1) * config_.sampling_pass_overhead.seconds();
  std::fill(nominal_.begin(), nominal_.end(), batch_cost_.compute_s);
  compute_.run_for(
      compute_hosts_, nominal_, [this] { on_compute_done(); }, host_seconds);
}

void Replica::on_compute_done() {
  // The iteration's tensor-parallel all-reduces, one after another after the compute (Megatron
  // TP puts them on the critical path), each costed by the collective layer for its size.
  if (batch_cost_.allreduce == Time::zero()) {
    complete_iteration();
    return;
  }
  engine_.schedule_in(batch_cost_.allreduce, [this] { complete_iteration(); });
}

void Replica::complete_iteration() {
  const Time now = engine_.now();
  busy_s_ += (now - iteration_start_).seconds();
  iterations_ += 1;
  tokens_processed_ += static_cast<std::uint64_t>(batch_.tokens);
  auto& running = state_.running();
  bool any_done = false;
  for (auto& e : batch_.entries) {
    Request& r = *e.request;
    const std::int64_t before = r.outstanding_tokens();
    if (r.admitted == Time::max()) r.admitted = iteration_start_;
    r.cached += e.work.tokens;
    if (e.work.samples) r.generated += 1;
    state_.add_outstanding_tokens(r.outstanding_tokens() - before);
    // A completed prefill hands its full prompt blocks to the prefix cache (when on).
    if (e.work.samples && !e.work.decode) state_.publish_prefix(r);
    if (!e.work.samples) continue;
    if (r.first_token == Time::max()) {
      r.first_token = now;
      observer_.on_first_token(*this, r);
    }
    if (r.done()) any_done = true;
  }
  if (any_done) {
    // Collect first, then finish: finishing may re-queue (escalation) and touch `running`.
    std::vector<Request*> done;
    for (auto& e : batch_.entries)
      if (e.work.samples && e.request->done()) done.push_back(e.request);
    running.erase(
        std::remove_if(running.begin(), running.end(), [](const Request* r) { return r->done(); }),
        running.end());
    for (Request* r : done) finish_answer(*r);
  }
  busy_ = false;
  observer_.on_iteration(*this);
  batch_.clear();
  try_start();
}

void Replica::finish_answer(Request& r) {
  bool escalate_here = r.spec.escalate_to >= 0 && !r.escalated && config_.reuse_across_tiers &&
                       state_.serves(r.spec.escalate_to) && r.spec.escalate_to > r.tier;
  if (escalate_here) {
    // An answer at the larger tier that could never fit the pool goes back to the system, which
    // re-submits it and has it reported dropped.
    Request probe = r;
    probe.tier = r.spec.escalate_to;
    escalate_here = state_.fits_at_all(probe);
  }
  state_.add_outstanding_tokens(-r.outstanding_tokens());  // zero: the answer is complete
  if (!escalate_here) {
    state_.release(r);
    observer_.on_answer_done(*this, r);
    return;
  }
  // Keep the prompt's KV in the lower tier's layers (and drop the KV of the answer's tokens);
  // the escalated answer prefills the prompt only above those layers, from the stored features.
  const std::int32_t lower = state_.exit_layer(r.tier);
  (void)kv_.resize(r.kv_blocks, kv_.blocks_for(r.spec.prompt_tokens, lower));
  (void)kv_.resize(r.feature_blocks, 0);
  r.tier = r.spec.escalate_to;
  r.escalated = true;
  r.reused_layers = lower;
  r.prefill_target = r.spec.prompt_tokens;
  r.cached = 0;
  r.generated = 0;
  r.answer_start = engine_.now();
  state_.waiting().push_front(&r);
  state_.add_outstanding_tokens(r.outstanding_tokens());
}

}  // namespace mlsim::serving
