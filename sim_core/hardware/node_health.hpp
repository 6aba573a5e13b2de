#pragma once
// Which topology nodes (hosts or switches) are up, with listeners for failures and repairs.
//
// The runner owns one per run and the `events` section drives it (docs/scenario.md). What a
// failure means: the platform takes every link into and out of the node down for the failure's
// duration (LinkConditions::set_node_up), so transfers to or from it fail and traffic through a
// failed switch reroutes; then it tells the listeners, which decide what the failure does to the
// work on the node (cluster: jobs on it are killed and requeued). A repair brings the links back
// (those not failed on their own) before the listeners hear of it.
#include <cstddef>
#include <functional>
#include <vector>

#include "sim_core/base/node_id.hpp"

namespace mlsim {

class NodeHealth {
 public:
  explicit NodeHealth(std::size_t node_count) : up_(node_count, 1) {}

  bool up(NodeId node) const { return up_.at(node) != 0; }
  // Failures so far (a failure of a node already down does not count).
  std::size_t failures() const { return failures_; }

  // Listeners run (in subscription order) only when the state changes.
  void set_up(NodeId node, bool up) {
    if (this->up(node) == up) return;
    up_[node] = up ? 1 : 0;
    if (!up) ++failures_;
    for (const Listener& l : listeners_) l(node, up);
  }

  using Listener = std::function<void(NodeId node, bool up)>;
  void on_change(Listener listener) { listeners_.push_back(std::move(listener)); }

  std::size_t size() const { return up_.size(); }

 private:
  std::vector<unsigned char> up_;
  std::vector<Listener> listeners_;
  std::size_t failures_ = 0;
};

}  // namespace mlsim
