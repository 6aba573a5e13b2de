#pragma once
// When each host's sending thread is next free: the per-message CPU/NIC overhead of
// HostCosts::message_overhead, booked one message after another per host, shared by every
// collective that holds the same clock (a training job's many concurrent gradient collectives
// share one communication thread per host).
#include <algorithm>
#include <vector>

#include "sim_core/base/node_id.hpp"
#include "sim_core/base/time.hpp"

namespace mlsim::collectives {

class HostSendClock {
 public:
  // Books `cost` of `node`'s sender from max(now, when it is free); returns when it is paid.
  Time book(NodeId node, Time now, Time cost) {
    if (node >= free_.size()) free_.resize(std::size_t{node} + 1, Time::zero());
    Time& free = free_[node];
    free = std::max(free, now) + cost;
    return free;
  }

 private:
  std::vector<Time> free_;  // by node id
};

}  // namespace mlsim::collectives
