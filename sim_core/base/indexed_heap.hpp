#pragma once
// A min-heap of keys addressed by a small integer id (a slot index), whose keys can be changed or
// removed in place. The flow backend keeps the end-of-sending times of its sharing transfers here,
// so a re-solve that changes the rates of N transfers moves N keys instead of cancelling and
// rescheduling N engine events (cancelled events stay in the engine's set until they surface).
//
// 4-ary: half the depth of a binary heap, and the four children of a node are adjacent in
// memory, which suits the mostly sift-down work of key updates. Every operation is O(log n);
// `positions_` maps an id to its place in the heap. Keys compare with operator<; equal keys come
// out in an unspecified order, so callers that need determinism put a tie-breaker in the key.
//
// Storage grows with the largest id seen and is kept: no allocation once warm.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "sim_core/base/error.hpp"
#include "sim_core/base/heap_sift.hpp"

namespace mlsim {

template <typename Key>
class IndexedHeap {
 public:
  bool empty() const { return items_.empty(); }
  std::size_t size() const { return items_.size(); }
  bool contains(std::uint32_t id) const {
    return id < positions_.size() && positions_[id] != kAbsent;
  }

  std::uint32_t top_id() const { return items_.front().id; }
  const Key& top_key() const { return items_.front().key; }
  const Key& key(std::uint32_t id) const { return items_[positions_[id]].key; }

  // Inserts `id` (not in the heap) with `key`.
  void push(std::uint32_t id, const Key& key) {
    if (id >= positions_.size()) positions_.resize(std::size_t{id} + 1, kAbsent);
    MLSIM_CHECK(positions_[id] == kAbsent, "id already in the heap");
    items_.push_back(Item{key, id});
    positions_[id] = static_cast<std::uint32_t>(items_.size() - 1);
    if (!bulk_) sift_up(items_.size() - 1);
  }

  // Gives `id` (in the heap) a new key, smaller or larger.
  void update(std::uint32_t id, const Key& key) {
    MLSIM_CHECK(contains(id), "updating an id not in the heap");
    const std::size_t i = positions_[id];
    const bool smaller = key < items_[i].key;
    items_[i].key = key;
    if (bulk_) return;
    if (smaller) {
      sift_up(i);
    } else {
      sift_down(i);
    }
  }

  // Inserts or updates.
  void set(std::uint32_t id, const Key& key) {
    if (contains(id)) {
      update(id, key);
    } else {
      push(id, key);
    }
  }

  // Removes `id` if present; returns whether it was.
  bool erase(std::uint32_t id) {
    if (!contains(id)) return false;
    const std::size_t i = positions_[id];
    positions_[id] = kAbsent;
    heap::erase_at<kArity>(items_, i, KeyLess(), placer());
    return true;
  }

  void pop() { erase(top_id()); }

  // Bulk changes: between begin_bulk() and end_bulk(), push, update and set only store the key
  // (erase works as usual), and end_bulk() restores the heap order over all items in O(n) (Floyd's
  // heapify). Cheaper than one O(log n) sift per change when a good part of the keys change at once
  // (the flow backend re-timing most of its route classes after a solve). top_id, top_key and pop
  // must not be called in between. With distinct keys the heap gives the same order either way.
  void begin_bulk() { bulk_ = true; }
  void end_bulk() {
    bulk_ = false;
    if (items_.size() < 2) return;
    for (std::size_t i = (items_.size() - 2) / kArity + 1; i-- > 0;) sift_down(i);
  }

 private:
  static constexpr std::uint32_t kAbsent = ~0u;
  static constexpr std::size_t kArity = 4;
  struct Item {
    Key key;
    std::uint32_t id;
  };

  struct KeyLess {  // a type, not a function pointer, so the sifts inline the comparison
    bool operator()(const Item& a, const Item& b) const { return a.key < b.key; }
  };
  auto placer() {
    return [this](std::size_t i, const Item& item) {
      items_[i] = item;
      positions_[item.id] = static_cast<std::uint32_t>(i);
    };
  }
  void sift_up(std::size_t i) { heap::sift_up<kArity>(items_, i, KeyLess(), placer()); }
  void sift_down(std::size_t i) { heap::sift_down<kArity>(items_, i, KeyLess(), placer()); }

  std::vector<Item> items_;
  std::vector<std::uint32_t> positions_;
  bool bulk_ = false;
};

}  // namespace mlsim
