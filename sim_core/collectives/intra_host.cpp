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

}  // namespace mlsim::collectives
