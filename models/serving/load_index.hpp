#pragma once
// The replicas a router chooses between, ordered by outstanding tokens (issue 15: router cost
// O(log n) per arrival). An indexed min-heap (sim_core/base/indexed_heap.hpp) keyed by
// (outstanding tokens, position in the router's list): the position breaks ties towards the
// earlier replica, as the scan it replaces did (strict < over the list in order), so the choice
// is the same replica, and results the same bytes.
//
// A replica's load changes many times per iteration (each request's progress), so a change only
// marks the replica (O(1), LoadListener); the marked replicas are re-keyed, O(log n) each, when
// the minimum is next asked for. Per arrival that is O(log n) for its own submit plus O(log n)
// per replica whose load changed since the previous arrival, each of those paid once per event
// that changed it, whatever the number of replicas.
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "models/serving/replica.hpp"
#include "sim_core/base/indexed_heap.hpp"

namespace mlsim::serving {

// `Member` is Replica, or in the benchmark a stand-in with the same two calls:
// outstanding_tokens() and set_load_listener(LoadListener*, slot).
template <typename Member>
class LoadIndex final : public LoadListener {
 public:
  LoadIndex() = default;
  LoadIndex(const LoadIndex&) = delete;  // the members point at it
  LoadIndex& operator=(const LoadIndex&) = delete;

  // Indexes `replicas` in this order, replacing the previous set (whose replicas stop reporting
  // here). O(n log n); called when the set changes, not per arrival. A replica reports to one
  // index at a time. The index must outlive the replicas' changes of load, or be re-assigned.
  void assign(std::span<Member* const> replicas) {
    for (Member* r : replicas_) r->set_load_listener(nullptr, 0);
    replicas_.assign(replicas.begin(), replicas.end());
    heap_ = IndexedHeap<Key>{};
    dirty_.clear();
    marked_.assign(replicas_.size(), 0);
    for (std::uint32_t slot = 0; slot < replicas_.size(); ++slot) {
      replicas_[slot]->set_load_listener(this, slot);
      heap_.push(slot, key(slot));
    }
  }

  std::span<Member* const> replicas() const { return replicas_; }

  // The replica with the fewest outstanding tokens, the earliest in the list among equals.
  // The set must be non-empty.
  Member& least_loaded() {
    for (const std::uint32_t slot : dirty_) {
      marked_[slot] = 0;
      heap_.update(slot, key(slot));
    }
    dirty_.clear();
    return *replicas_[heap_.top_id()];
  }

  void load_changed(std::uint32_t slot) override {
    if (marked_[slot] != 0) return;
    marked_[slot] = 1;
    dirty_.push_back(slot);
  }

 private:
  using Key = std::pair<std::int64_t, std::uint32_t>;  // (outstanding tokens, slot)
  Key key(std::uint32_t slot) const { return {replicas_[slot]->outstanding_tokens(), slot}; }

  std::vector<Member*> replicas_;
  IndexedHeap<Key> heap_;
  std::vector<std::uint32_t> dirty_;  // slots whose load changed since the last least_loaded()
  std::vector<std::uint8_t> marked_;  // per slot: in dirty_
};

using ReplicaLoadIndex = LoadIndex<Replica>;

}  // namespace mlsim::serving
