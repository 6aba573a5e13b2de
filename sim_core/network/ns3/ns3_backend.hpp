#pragma once
// Registers the "ns3" network backend (built when MLSIM_WITH_NS3 is on).
#include "sim_core/network/network_factory.hpp"

namespace mlsim {

void register_ns3_backend(BackendRegistry& registry);

}  // namespace mlsim
