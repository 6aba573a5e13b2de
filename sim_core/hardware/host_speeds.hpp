#pragma once
// Compute-rate multiplier per topology node, changed at run time (a straggler, a throttled GPU):
// 1 = nominal, 0.5 = half as fast. The runner owns one per run; Compute (compute.hpp) rescales
// work in progress when a host's speed changes, and anyone else who times GPU work registers a
// listener.
#include <cstddef>
#include <functional>
#include <vector>

#include "sim_core/base/node_id.hpp"

namespace mlsim {

class HostSpeeds {
 public:
  explicit HostSpeeds(std::size_t node_count);  // all 1.0

  std::size_t size() const { return speeds_.size(); }
  double speed(NodeId host) const;
  // `speed` must be finite and > 0 (InvariantError otherwise: scenario values are checked when
  // loaded). Listeners are called in registration order, after the new speed is stored, and only
  // when it differs from the old one.
  void set_speed(NodeId host, double speed);

  using Listener = std::function<void(NodeId host, double old_speed, double new_speed)>;
  void on_change(Listener listener);

 private:
  std::vector<double> speeds_;
  std::vector<Listener> listeners_;
};

}  // namespace mlsim
