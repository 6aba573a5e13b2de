#include "sim_core/collectives/intra_host.hpp"

#include "sim_core/base/error.hpp"
#include "sim_core/collectives/collective.hpp"

namespace mlsim::collectives {

Time intra_host_collective_time(const CostModel& costs, Operation op, int participants, Bytes bytes,
                                const HostHardware* host) {
  MLSIM_CHECK(host != nullptr && host->intra_node && host->intra_node->bandwidth.bytes_per_s > 0,
              "GPUs of one host communicate, but the host has no intra_node link");
  return collective_cost(costs, op, algorithms_for(op).front(), participants, 2, bytes,
                         host->intra_node->bandwidth, host->intra_node->latency)
      .time;
}

Time IntraHostPriceCache::time(Operation op, int participants, Bytes bytes,
                               const HostHardware* host) {
  if (host == nullptr || !host->intra_node)  // the check's error, from the function itself
    return intra_host_collective_time(costs_, op, participants, bytes, host);
  const double bps = host->intra_node->bandwidth.bytes_per_s;
  const Time latency = host->intra_node->latency;
  for (const Entry& e : entries_)
    if (e.op == op && e.participants == participants && e.bytes == bytes.count &&
        e.bytes_per_s == bps && e.latency == latency)
      return e.time;
  ++computed_;
  const Time t = intra_host_collective_time(costs_, op, participants, bytes, host);
  if (entries_.size() < kCapacity)
    entries_.push_back({op, participants, bytes.count, bps, latency, t});
  return t;
}

}  // namespace mlsim::collectives
