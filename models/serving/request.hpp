#pragma once
// A serving request: what the workload asks for (RequestSpec) and its progress through a replica
// (Request). Progress follows vLLM's convention: a prefill pass computes the KV of its input
// tokens and samples the first output token; each decode step feeds the last sampled token (its
// KV is written) and samples the next. Preemption by recompute drops the KV and re-prefills the
// prompt plus the tokens generated so far, then samples the next token.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "sim_core/base/time.hpp"

namespace mlsim::serving {

struct RequestSpec {
  std::uint64_t id = 0;
  Time arrival;
  std::int32_t prompt_tokens = 0;
  std::int32_t output_tokens = 0;  // >= 1
  std::int32_t tier = 0;           // target tier of the model family (0 = smallest)
  // After answering at `tier`, the answer is escalated and re-generated at this tier (-1: none).
  std::int32_t escalate_to = -1;
  // Content ids of the prompt's blocks (Mooncake's hash_ids: one per block of the source's
  // hash_block_tokens, the last one possibly partial); empty when the source has none.
  std::vector<std::uint64_t> block_hashes;
};

struct Request {
  RequestSpec spec;
  std::int32_t tier = 0;   // tier of the answer being generated now
  bool escalated = false;  // the current answer is the escalated one
  // Tokens whose KV must be computed before decoding: the prompt, or after a preemption the
  // prompt plus the tokens generated so far.
  std::int32_t prefill_target = 0;
  std::int32_t cached = 0;     // tokens whose KV is in the cache (all layers this answer uses)
  std::int32_t generated = 0;  // output tokens of the current answer
  // Layers whose KV of the first `prefill_target` tokens was kept from a lower tier's answer:
  // the prefill runs only above them (MFS escalation reuse).
  std::int32_t reused_layers = 0;
  std::int32_t kv_layers = 0;       // layers this answer keeps KV for (the tier's depth)
  std::int64_t kv_blocks = 0;       // layer-blocks held in the replica's KV pool
  std::int64_t feature_blocks = 0;  // layer-block equivalents held for exit-layer features
  // Prefill/decode disaggregation: layer-blocks reserved in the decode replica's pool for the KV
  // on its way from the prefill replica (kv_blocks still holds the prefill replica's copy).
  std::int64_t incoming_kv_blocks = 0;
  std::int32_t preemptions = 0;
  // Prefix caching: the first `shared_blocks` blocks of spec.block_hashes are the replica's cached
  // blocks this request references (its KV there is shared, not in kv_blocks).
  std::int32_t shared_blocks = 0;
  // For the per-request log: prompt tokens found in the prefix cache (all admissions), the
  // replica (index in the system) of the last dispatch, the start of its first iteration.
  std::int32_t prefix_hit = 0;
  std::int32_t replica = -1;
  Time admitted = Time::max();
  Time first_token = Time::max();  // of the first answer; TTFT = first_token - arrival
  Time answer_start;               // when the current answer was dispatched

  bool in_prefill() const { return cached < prefill_target; }
  bool done() const { return generated >= spec.output_tokens; }
  // Tokens still to produce, counting the prefill left: what "least outstanding tokens" routes on.
  // Decode steps write KV past the prefill target, so the prefill part stops at zero (it once went
  // negative and counted every decode step twice).
  std::int64_t outstanding_tokens() const {
    return std::int64_t{std::max(0, prefill_target - cached)} + (spec.output_tokens - generated);
  }
};

}  // namespace mlsim::serving
