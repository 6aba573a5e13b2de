#pragma once
// Paged KV cache of one replica (vLLM's PagedAttention layout). The unit is a layer-block: the K
// and V of `block_tokens` tokens in one layer. A request of a tier that is L layers deep holds
// ceil(tokens / block_tokens) * L layer-blocks, so requests of different depths (MFS tiers) share
// one pool exactly; for a plain model this is vLLM's block count times the depth.
#include <cstdint>

#include "sim_core/base/error.hpp"

namespace mlsim::serving {

class KvBlockPool {
 public:
  KvBlockPool(std::int64_t total_layer_blocks, std::int32_t block_tokens)
      : total_(total_layer_blocks), block_tokens_(block_tokens) {
    MLSIM_CHECK(total_ >= 0 && block_tokens_ > 0, "bad KV pool size");
  }

  std::int32_t block_tokens() const { return block_tokens_; }
  std::int64_t total() const { return total_; }
  std::int64_t used() const { return used_; }
  std::int64_t free() const { return total_ - used_; }
  std::int64_t peak() const { return peak_; }

  std::int64_t blocks_for(std::int64_t tokens, std::int32_t layers) const {
    return (tokens + block_tokens_ - 1) / block_tokens_ * layers;
  }

  // Changes a holder's allocation from `held` to `want` layer-blocks. Shrinking always succeeds;
  // growing fails (and changes nothing) when the pool has too few free blocks.
  [[nodiscard]] bool resize(std::int64_t& held, std::int64_t want) {
    MLSIM_CHECK(want >= 0 && held >= 0 && held <= used_, "bad KV resize");
    if (want > held && want - held > free()) return false;
    used_ += want - held;
    held = want;
    if (used_ > peak_) peak_ = used_;
    return true;
  }

 private:
  std::int64_t total_;
  std::int32_t block_tokens_;
  std::int64_t used_ = 0;
  std::int64_t peak_ = 0;
};

}  // namespace mlsim::serving
