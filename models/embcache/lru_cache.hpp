#pragma once
// A worker's embedding cache: which rows it holds, least recently used evicted first. Whether a
// held row is up to date is kept by the training's directory (embedding_training.hpp), one entry
// per row for all workers.
//
// Every sample touches one row per field, so put() is the model's hottest call: the recency list
// lives in one slab of `capacity` nodes linked by index (no allocation per insert, an eviction
// reuses the evicted row's node) and the row-to-node index is an open-addressing map sized once.
#include <absl/container/flat_hash_map.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "sim_core/base/error.hpp"

namespace mlsim::embcache {

using Key = std::uint64_t;

class LruCache {
 public:
  explicit LruCache(std::size_t capacity) : capacity_(capacity) {
    MLSIM_CHECK(capacity < kNone, "an embedding cache holds fewer than 2^32 - 1 rows");
  }

  std::size_t size() const { return index_.size(); }
  std::size_t capacity() const { return capacity_; }
  bool contains(Key k) const { return index_.contains(k); }
  // Makes k the most recently used row; returns the row evicted to make room. A cache of
  // capacity 0 holds nothing and returns k itself.
  std::optional<Key> put(Key k) {
    if (capacity_ == 0) return k;
    if (auto it = index_.find(k); it != index_.end()) {
      move_to_front(it->second);
      return std::nullopt;
    }
    if (nodes_.size() < capacity_) {
      if (nodes_.empty()) index_.reserve(capacity_);
      nodes_.push_back({k, kNone, kNone});
      index_.emplace(k, last_index());
      link_front(last_index());
      return std::nullopt;
    }
    // Full: the least recent node takes the new row.
    const Slot victim = tail_;
    const Key evicted = nodes_[victim].key;
    index_.erase(evicted);
    nodes_[victim].key = k;
    index_.emplace(k, victim);
    move_to_front(victim);
    return evicted;
  }
  // Rows from most to least recently used.
  template <typename F>
  void for_each(F f) const {
    for (Slot s = head_; s != kNone; s = nodes_[s].next) f(nodes_[s].key);
  }

 private:
  using Slot = std::uint32_t;
  static constexpr Slot kNone = ~Slot{0};
  struct Node {
    Key key;
    Slot prev, next;
  };
  Slot last_index() const { return static_cast<Slot>(nodes_.size() - 1); }
  void unlink(Slot s) {
    Node& n = nodes_[s];
    (n.prev == kNone ? head_ : nodes_[n.prev].next) = n.next;
    (n.next == kNone ? tail_ : nodes_[n.next].prev) = n.prev;
  }
  void link_front(Slot s) {
    nodes_[s].prev = kNone;
    nodes_[s].next = head_;
    (head_ == kNone ? tail_ : nodes_[head_].prev) = s;
    head_ = s;
  }
  void move_to_front(Slot s) {
    if (s == head_) return;
    unlink(s);
    link_front(s);
  }

  std::size_t capacity_;
  std::vector<Node> nodes_;  // grows to capacity_, then recycled
  absl::flat_hash_map<Key, Slot> index_;
  Slot head_ = kNone, tail_ = kNone;  // most and least recently used
};

}  // namespace mlsim::embcache
