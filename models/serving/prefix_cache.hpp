#pragma once
// Prefix caching of one replica (vLLM's automatic prefix caching, SGLang's radix cache, Mooncake's
// KVCache reuse): the KV of a prompt is kept in blocks of `block_tokens` tokens identified by
// content (Mooncake's `hash_ids`: one id per 512-token prompt block, equal ids = equal prefix up to
// and including that block), shared between requests, and evicted least recently used first when
// the KV pool is short.
//
// - Only full blocks are cached and matched (vLLM's rule); a prompt's last partial block is always
//   computed.
// - A request uses the longest run of leading blocks that are cached. Each block it uses holds a
//   reference; a referenced block is never evicted. A block whose last reference is dropped joins
//   the LRU list; a request's blocks join it last block first, so the deepest block of a prefix is
//   evicted before the blocks it extends (vLLM v1 frees blocks in reverse order for this reason).
// - The cache's blocks are layer-blocks of the replica's KvBlockPool (one holder for all cached
//   blocks), so the pool's used count is the requests' private KV plus the cache's.
#include <absl/container/flat_hash_map.h>

#include <cstdint>
#include <list>
#include <span>

#include "models/serving/kv_cache.hpp"

namespace mlsim::serving {

class PrefixCache {
 public:
  // `layer_blocks_per_block`: pool layer-blocks that one cached block occupies (its tokens over
  // the pool's block size, times the layers the replica keeps KV for).
  PrefixCache(KvBlockPool& pool, std::int32_t block_tokens, std::int64_t layer_blocks_per_block);
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  std::int32_t block_tokens() const { return block_tokens_; }
  std::int64_t layer_blocks_per_block() const { return per_block_; }

  // How many leading blocks of `hashes` are cached (at most `max_blocks`).
  std::int32_t match(std::span<const std::uint64_t> hashes, std::int32_t max_blocks) const;
  // Takes a reference on each block of `hashes` (all cached, from match()).
  void acquire(std::span<const std::uint64_t> hashes);
  // Drops a reference on each block of `hashes`.
  void release(std::span<const std::uint64_t> hashes);
  // A request that computed block `hash` (held in its private KV, `private_held` layer-blocks)
  // hands it to the cache and keeps a reference: the cache takes the block's layer-blocks from
  // the request's, or, when another request published the same content meanwhile, the request's
  // copy is freed and it references the cached one.
  void publish(std::uint64_t hash, std::int64_t& private_held);
  // Evicts unreferenced blocks, least recently used first, until `layer_blocks` are free in the
  // pool; evicts nothing and returns false when even evicting every unreferenced block would not
  // free enough.
  bool make_room(std::int64_t layer_blocks);

  // Statistics and checks.
  std::size_t blocks() const { return entries_.size(); }
  std::size_t evictable_blocks() const { return lru_.size(); }
  std::int64_t held_layer_blocks() const { return held_; }
  std::uint64_t evicted_blocks() const { return evicted_; }
  std::int64_t total_references() const { return references_; }
  // References on one block (0 when absent or unreferenced).
  std::int32_t references(std::uint64_t hash) const;

 private:
  struct Entry {
    std::int32_t refs = 0;
    std::list<std::uint64_t>::iterator lru;  // valid when refs == 0
  };
  void evict_one();

  KvBlockPool& pool_;
  std::int32_t block_tokens_;
  std::int64_t per_block_;
  std::int64_t held_ = 0;  // layer-blocks of the pool held by cached blocks
  absl::flat_hash_map<std::uint64_t, Entry> entries_;
  std::list<std::uint64_t> lru_;  // unreferenced blocks, least recently used first
  std::uint64_t evicted_ = 0;
  std::int64_t references_ = 0;
};

}  // namespace mlsim::serving
