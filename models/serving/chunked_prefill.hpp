#pragma once
// Chunked prefill with a per-iteration token budget (Sarathi-Serve, Agrawal et al., OSDI'24):
// every iteration decodes all running requests first (one token each, preempting by recompute
// when KV runs out, as vLLM), then spends what is left of the budget on prefill chunks: first of
// requests whose prefill is under way, then of newly admitted ones. Decodes are never stalled by
// a long prompt.
#include <algorithm>

#include "models/serving/scheduler.hpp"

namespace mlsim::serving {

class ChunkedPrefill final : public BatchScheduler {
 public:
  std::string_view name() const override { return "chunked_prefill"; }
  void next_batch(ReplicaState& s, Batch& batch) override {
    batch.clear();
    schedule_decodes(s, batch);
    std::int64_t budget = s.limits().max_tokens - batch.tokens;
    for (Request* r : s.running()) {
      if (budget <= 0) return;
      if (!r->in_prefill()) continue;
      const auto chunk =
          static_cast<std::int32_t>(std::min<std::int64_t>(budget, r->prefill_target - r->cached));
      s.add_prefill(batch, *r, chunk);
      budget -= chunk;
    }
    auto& waiting = s.waiting();
    auto& running = s.running();
    while (budget > 0 && !waiting.empty() &&
           static_cast<std::int32_t>(running.size()) < s.limits().max_requests) {
      Request* r = waiting.front();
      // KV for the whole prompt is reserved at admission, so a started prefill never stalls.
      if (!s.admit(*r, r->prefill_target, s.prefix_hit_tokens(*r))) break;
      waiting.pop_front();
      running.push_back(r);
      const auto chunk =
          static_cast<std::int32_t>(std::min<std::int64_t>(budget, r->prefill_target - r->cached));
      s.add_prefill(batch, *r, chunk);
      budget -= chunk;
    }
  }
};

}  // namespace mlsim::serving
