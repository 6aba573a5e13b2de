#pragma once
// Registers the "simgrid" network backend (built when MLSIM_WITH_SIMGRID is on).
#include "sim_core/network/network_factory.hpp"

namespace mlsim {

void register_simgrid_backend(BackendRegistry& registry);

}  // namespace mlsim
