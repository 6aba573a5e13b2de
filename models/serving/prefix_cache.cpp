#include "models/serving/prefix_cache.hpp"

#include "sim_core/base/error.hpp"

namespace mlsim::serving {

PrefixCache::PrefixCache(KvBlockPool& pool, std::int32_t block_tokens,
                         std::int64_t layer_blocks_per_block)
    : pool_(pool), block_tokens_(block_tokens), per_block_(layer_blocks_per_block) {
  MLSIM_CHECK(block_tokens_ > 0 && per_block_ > 0, "bad prefix cache block size");
}

std::int32_t PrefixCache::match(std::span<const std::uint64_t> hashes,
                                std::int32_t max_blocks) const {
  std::int32_t n = 0;
  while (n < max_blocks && static_cast<std::size_t>(n) < hashes.size() &&
         entries_.contains(hashes[static_cast<std::size_t>(n)]))
    ++n;
  return n;
}

void PrefixCache::acquire(std::span<const std::uint64_t> hashes) {
  for (auto h : hashes) {
    auto it = entries_.find(h);
    MLSIM_CHECK(it != entries_.end(), "acquiring a block that is not cached");
    if (it->second.refs++ == 0) lru_.erase(it->second.lru);
    ++references_;
  }
}

void PrefixCache::release(std::span<const std::uint64_t> hashes) {
  // Last block first: the first block of the prefix ends most recently used.
  for (auto h = hashes.rbegin(); h != hashes.rend(); ++h) {
    auto it = entries_.find(*h);
    MLSIM_CHECK(it != entries_.end() && it->second.refs > 0, "releasing an unreferenced block");
    --references_;
    if (--it->second.refs == 0) it->second.lru = lru_.insert(lru_.end(), *h);
  }
}

void PrefixCache::publish(std::uint64_t hash, std::int64_t& private_held) {
  MLSIM_CHECK(private_held >= per_block_, "publishing a block the request does not hold");
  auto [it, inserted] = entries_.try_emplace(hash);
  if (!inserted) {  // computed twice (two requests prefilled it at once): keep one copy
    (void)pool_.resize(private_held, private_held - per_block_);
    if (it->second.refs++ == 0) lru_.erase(it->second.lru);
    ++references_;
    return;
  }
  (void)pool_.resize(private_held, private_held - per_block_);
  const bool ok = pool_.resize(held_, held_ + per_block_);
  MLSIM_CHECK(ok, "moving a block into the prefix cache cannot fail");
  it->second.refs = 1;
  ++references_;
}

bool PrefixCache::make_room(std::int64_t layer_blocks) {
  // Evicting everything evictable would not be enough: keep the cache as it is.
  if (pool_.free() + static_cast<std::int64_t>(lru_.size()) * per_block_ < layer_blocks)
    return false;
  while (pool_.free() < layer_blocks && !lru_.empty()) evict_one();
  return pool_.free() >= layer_blocks;
}

void PrefixCache::evict_one() {
  const std::uint64_t h = lru_.front();
  lru_.pop_front();
  auto it = entries_.find(h);
  MLSIM_CHECK(it != entries_.end() && it->second.refs == 0, "evicting a referenced block");
  entries_.erase(it);
  (void)pool_.resize(held_, held_ - per_block_);
  ++evicted_;
}

std::int32_t PrefixCache::references(std::uint64_t hash) const {
  auto it = entries_.find(hash);
  return it == entries_.end() ? 0 : it->second.refs;
}

}  // namespace mlsim::serving
