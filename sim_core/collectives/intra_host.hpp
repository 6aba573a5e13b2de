#pragma once
// A collective among the GPUs of one host, over the host's intra_node link in closed form
// (collective_cost): each GPU has its own NVSwitch port, so nothing else shares the route and
// no bytes need to cross the network event by event. One implementation for the execution
// graph (sim_core/workload) and the training core's Megatron op pricer (models/llm_training), so
// that the two cores price a tensor-parallel all-reduce alike.
#include <cstdint>
#include <vector>

#include "sim_core/base/time.hpp"
#include "sim_core/base/units.hpp"
#include "sim_core/collectives/costs.hpp"
#include "sim_core/hardware/node_hardware.hpp"

namespace mlsim::collectives {

// The time of `op` among `participants` GPUs of `host` (its hardware, or null), by the
// operation's first algorithm with arity 2. An internal check fails when the host has no
// intra_node link: a caller places several GPUs of a job on one host only where it has one.
Time intra_host_collective_time(const CostModel& costs, Operation op, int participants, Bytes bytes,
                                const HostHardware* host);

// intra_host_collective_time remembered per distinct (operation, participants, bytes, intra_node
// bandwidth and latency) under one CostModel, for a caller that prices the same few collectives
// hundreds of thousands of times (the execution graph's tensor-parallel all-reduces). The time is
// a pure function of those, so a remembered one equals a recomputed one. At most kCapacity
// distinct arguments are kept; past that, calls are computed each time.
class IntraHostPriceCache {
 public:
  static constexpr std::size_t kCapacity = 64;

  explicit IntraHostPriceCache(const CostModel& costs) : costs_(costs) {}
  Time time(Operation op, int participants, Bytes bytes, const HostHardware* host);
  std::int64_t computed() const { return computed_; }  // calls that priced (not remembered)

 private:
  struct Entry {
    Operation op;
    int participants;
    std::int64_t bytes;
    double bytes_per_s;
    Time latency;
    Time time;
  };
  const CostModel& costs_;
  std::vector<Entry> entries_;
  std::int64_t computed_ = 0;
};

}  // namespace mlsim::collectives
