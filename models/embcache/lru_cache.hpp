#pragma once
// A worker's embedding cache: which rows it holds, least recently used evicted first. Whether a
// held row is up to date is kept by the training's directory (embedding_training.hpp), one entry
// per row for all workers.
#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>

namespace mlsim::embcache {

using Key = std::uint64_t;

class LruCache {
 public:
  explicit LruCache(std::size_t capacity) : capacity_(capacity) {}

  std::size_t size() const { return index_.size(); }
  std::size_t capacity() const { return capacity_; }
  bool contains(Key k) const { return index_.count(k) != 0; }
  // Makes k the most recently used row; returns the row evicted to make room. A cache of
  // capacity 0 holds nothing and returns k itself.
  std::optional<Key> put(Key k) {
    if (capacity_ == 0) return k;
    if (auto it = index_.find(k); it != index_.end()) {
      order_.splice(order_.begin(), order_, it->second);
      return std::nullopt;
    }
    std::optional<Key> evicted;
    if (index_.size() == capacity_) {
      evicted = order_.back();
      index_.erase(order_.back());
      order_.pop_back();
    }
    order_.push_front(k);
    index_[k] = order_.begin();
    return evicted;
  }
  template <typename F>
  void for_each(F f) const {
    for (Key k : order_) f(k);
  }

 private:
  std::size_t capacity_;
  std::list<Key> order_;  // most recent first
  std::unordered_map<Key, std::list<Key>::iterator> index_;
};

}  // namespace mlsim::embcache
