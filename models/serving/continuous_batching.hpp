#pragma once
// vLLM-style continuous (iteration-level) batching (Kwon et al., SOSP'23; vLLM v0 scheduler):
// each iteration first admits waiting requests in arrival order while their prompts' KV blocks
// fit and the token budget allows, and runs them as a prefill-only batch; when nothing can be
// admitted it decodes every running request, one token each. When a decode step finds no free
// block it preempts the most recently admitted request by recompute.
#include "models/serving/scheduler.hpp"

namespace mlsim::serving {

class ContinuousBatching final : public BatchScheduler {
 public:
  std::string_view name() const override { return "continuous"; }
  void next_batch(ReplicaState& s, Batch& batch) override {
    batch.clear();
    auto& waiting = s.waiting();
    auto& running = s.running();
    while (!waiting.empty() &&
           static_cast<std::int32_t>(running.size()) < s.limits().max_requests) {
      Request* r = waiting.front();
      const std::int32_t hit = s.prefix_hit_tokens(*r);  // prefill the prefix cache saves
      const std::int32_t need = r->prefill_target - r->cached - hit;
      // The first prompt of a batch is admitted even above the token budget (it must run).
      if (!batch.empty() && batch.tokens + need > s.limits().max_tokens) break;
      if (!s.admit(*r, r->prefill_target, hit)) break;
      waiting.pop_front();
      running.push_back(r);
      s.add_prefill(batch, *r, need);
    }
    if (!batch.empty()) return;
    schedule_decodes(s, batch);
  }
};

}  // namespace mlsim::serving
