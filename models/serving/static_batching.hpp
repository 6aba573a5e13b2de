#pragma once
// Static (request-level) batching, as in FasterTransformer-era serving: a batch is formed only
// when the replica is empty; each admitted request reserves KV for its whole length up front (so
// nothing is ever preempted); the batch is prefilled in one iteration and decoded until its last
// request finishes; requests arriving meanwhile wait. Finished requests leave at once (no padding
// compute is charged for them).
// Batch limits: at most max_batch_requests requests, and prompts totalling at most
// max_batch_tokens (the first prompt is always admitted). A waiting request that would pass the
// token limit closes the batch: it and the requests behind it wait for the whole batch to finish.
// Each batch closed that way is counted (ReplicaState::batches_cut_by_token_limit, reported per
// replica), so a token limit that splits static batches is visible in the results.
#include "models/serving/scheduler.hpp"

namespace mlsim::serving {

class StaticBatching final : public BatchScheduler {
 public:
  std::string_view name() const override { return "static"; }
  void next_batch(ReplicaState& s, Batch& batch) override {
    batch.clear();
    auto& running = s.running();
    if (running.empty()) {
      auto& waiting = s.waiting();
      while (!waiting.empty() &&
             static_cast<std::int32_t>(running.size()) < s.limits().max_requests) {
        Request* r = waiting.front();
        const std::int32_t hit = s.prefix_hit_tokens(*r);  // prefill the prefix cache saves
        const std::int32_t need = r->prefill_target - r->cached - hit;
        if (!batch.empty() && batch.tokens + need > s.limits().max_tokens) {
          s.note_batch_cut_by_token_limit();
          break;
        }
        if (!s.admit(*r, std::int64_t{r->spec.prompt_tokens} + r->spec.output_tokens, hit)) break;
        waiting.pop_front();
        running.push_back(r);
        s.add_prefill(batch, *r, need);
      }
      return;
    }
    for (Request* r : running) s.add_decode(batch, *r);
  }
};

}  // namespace mlsim::serving
