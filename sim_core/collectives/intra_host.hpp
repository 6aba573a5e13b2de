#pragma once
// A collective among the GPUs of one host, over the host's intra_node link in closed form
// (collective_cost): each GPU has its own NVSwitch port, so nothing else shares the route and
// no bytes need to cross the network event by event. One implementation for the execution
// graph (sim_core/workload) and the training core's Megatron op pricer (models/llm_training), so
// that the two cores price a tensor-parallel all-reduce alike.
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

}  // namespace mlsim::collectives
