#include "models/serving/scheduler.hpp"

#include <algorithm>
#include <span>

#include "sim_core/base/error.hpp"

namespace mlsim::serving {

ReplicaState::ReplicaState(KvBlockPool& kv, std::vector<std::int32_t> exit_layers,
                           std::int32_t feature_layers, BatchLimits limits)
    : kv_(kv),
      exit_layers_(std::move(exit_layers)),
      feature_layers_(feature_layers),
      top_tier_(-1),
      limits_(limits) {
  for (std::size_t t = 0; t < exit_layers_.size(); ++t)
    if (exit_layers_[t] > 0) top_tier_ = static_cast<std::int32_t>(t);
  MLSIM_CHECK(top_tier_ >= 0, "a replica must serve at least one tier");
}

std::int32_t ReplicaState::exit_layer(std::int32_t tier) const {
  MLSIM_CHECK(serves(tier), "tier not served by this replica");
  return exit_layers_[static_cast<std::size_t>(tier)];
}

bool ReplicaState::serves(std::int32_t tier) const {
  return tier >= 0 && static_cast<std::size_t>(tier) < exit_layers_.size() &&
         exit_layers_[static_cast<std::size_t>(tier)] > 0;
}

bool ReplicaState::reserve(Request& r, std::int64_t tokens) {
  r.kv_layers = exit_layer(r.tier);
  const std::int64_t shared = prefix_ ? r.shared_blocks * prefix_->layer_blocks_per_block() : 0;
  const std::int64_t want = std::max<std::int64_t>(0, kv_.blocks_for(tokens, r.kv_layers) - shared);
  if (!kv_.resize(r.kv_blocks, want)) {
    // Unreferenced cached blocks give way before anything else does.
    if (!prefix_ || !prefix_->make_room(want - r.kv_blocks)) return false;
    const bool ok = kv_.resize(r.kv_blocks, want);
    MLSIM_CHECK(ok, "the prefix cache made room");
  }
  // A request below the top tier keeps its prompt's hidden states at its exit, so that an
  // escalation can continue the prompt's prefill above that layer without recomputing below it.
  if (feature_layers_ > 0 && r.tier < top_tier_ && r.feature_blocks == 0) {
    if (!kv_.resize(r.feature_blocks, kv_.blocks_for(r.spec.prompt_tokens, feature_layers_))) {
      (void)kv_.resize(r.kv_blocks, 0);
      return false;
    }
  }
  return true;
}

void ReplicaState::release(Request& r) {
  (void)kv_.resize(r.kv_blocks, 0);
  (void)kv_.resize(r.feature_blocks, 0);
  if (r.shared_blocks > 0) {
    prefix_->release(
        std::span(r.spec.block_hashes).first(static_cast<std::size_t>(r.shared_blocks)));
    r.shared_blocks = 0;
  }
}

void ReplicaState::enable_prefix_cache(std::int32_t block_tokens, std::int64_t layer_blocks) {
  MLSIM_CHECK(feature_layers_ == 0 && std::count_if(exit_layers_.begin(), exit_layers_.end(),
                                                    [](std::int32_t e) { return e > 0; }) == 1,
              "prefix caching with MFS tiers is not modelled");
  prefix_ = std::make_unique<PrefixCache>(kv_, block_tokens, layer_blocks);
}

std::int32_t ReplicaState::prefix_hit_tokens(const Request& r) const {
  if (!prefix_ || r.cached > 0 || r.shared_blocks > 0 || r.spec.block_hashes.empty()) return 0;
  const std::int32_t bt = prefix_->block_tokens();
  const std::int32_t full = std::min(r.spec.prompt_tokens, r.prefill_target - 1) / bt;
  return prefix_->match(r.spec.block_hashes, full) * bt;
}

std::int32_t ReplicaState::cached_prefix_tokens(const RequestSpec& spec) const {
  if (!prefix_ || spec.block_hashes.empty()) return 0;
  const std::int32_t bt = prefix_->block_tokens();
  return prefix_->match(spec.block_hashes, spec.prompt_tokens / bt) * bt;
}

bool ReplicaState::admit(Request& r, std::int64_t tokens, std::int32_t hit_tokens) {
  if (!prefix_) return reserve(r, tokens);
  const std::int32_t n = hit_tokens / prefix_->block_tokens();
  const auto hit = std::span(r.spec.block_hashes).first(static_cast<std::size_t>(n));
  prefix_->acquire(hit);  // first, so that making room for the rest cannot evict them
  r.shared_blocks = n;
  if (!reserve(r, tokens)) {
    prefix_->release(hit);
    r.shared_blocks = 0;
    return false;
  }
  r.cached += hit_tokens;
  r.prefix_hit += hit_tokens;
  add_outstanding_tokens(-std::int64_t{hit_tokens});
  prefix_lookup_tokens_ += r.prefill_target;
  prefix_hit_tokens_ += hit_tokens;
  if (hit_tokens > 0) ++prefix_hit_requests_;
  return true;
}

void ReplicaState::publish_prefix(Request& r) {
  if (!prefix_) return;
  const auto full = std::min<std::int64_t>(r.spec.prompt_tokens / prefix_->block_tokens(),
                                           static_cast<std::int64_t>(r.spec.block_hashes.size()));
  for (std::int64_t i = r.shared_blocks; i < full; ++i)
    prefix_->publish(r.spec.block_hashes[static_cast<std::size_t>(i)], r.kv_blocks);
  r.shared_blocks = static_cast<std::int32_t>(std::max<std::int64_t>(r.shared_blocks, full));
}

void ReplicaState::preempt(Request& r) {
  const std::int64_t before = r.outstanding_tokens();
  release(r);
  r.prefill_target = r.spec.prompt_tokens + r.generated;
  r.cached = 0;
  r.reused_layers = 0;  // the kept lower-tier KV is gone too
  r.preemptions += 1;
  ++preemptions_;
  add_outstanding_tokens(r.outstanding_tokens() - before);
  auto it = std::find(running_.begin(), running_.end(), &r);
  MLSIM_CHECK(it != running_.end(), "preempting a request that is not running");
  running_.erase(it);
  waiting_.push_front(&r);
}

bool ReplicaState::fits_at_all(const Request& r) const {
  const auto layers = exit_layers_[static_cast<std::size_t>(r.tier)];
  std::int64_t need = kv_.blocks_for(r.spec.prompt_tokens + r.spec.output_tokens, layers);
  if (feature_layers_ > 0 && r.tier < top_tier_)
    need += kv_.blocks_for(r.spec.prompt_tokens, feature_layers_);
  return need <= kv_.total();
}

void ReplicaState::add_prefill(Batch& batch, Request& r, std::int32_t tokens) const {
  WorkItem w;
  w.tokens = tokens;
  w.cached = r.cached;
  w.decode = false;
  w.samples = r.cached + tokens == r.prefill_target;
  w.first_layer = r.reused_layers;
  w.last_layer = exit_layer(r.tier);
  batch.entries.push_back({&r, w});
  batch.items.push_back(w);
  batch.tokens += tokens;
}

void ReplicaState::add_decode(Batch& batch, Request& r) const {
  WorkItem w;
  w.tokens = 1;
  w.cached = r.cached;
  w.decode = true;
  w.samples = true;
  w.first_layer = 0;
  w.last_layer = exit_layer(r.tier);
  batch.entries.push_back({&r, w});
  batch.items.push_back(w);
  batch.tokens += 1;
}

void schedule_decodes(ReplicaState& s, Batch& batch) {
  auto& running = s.running();
  for (std::size_t i = 0; i < running.size();) {
    Request* r = running[i];
    if (r->in_prefill()) {
      ++i;
      continue;
    }
    bool preempted_self = false;
    while (!s.reserve(*r, std::int64_t{r->cached} + 1)) {
      Request* victim = running.back();
      s.preempt(*victim);
      if (victim == r) {
        preempted_self = true;
        break;
      }
    }
    if (preempted_self) break;  // r was the last running request
    s.add_decode(batch, *r);
    ++i;
  }
}

}  // namespace mlsim::serving
