#pragma once
// Adds the communication-scheduling model ("commsched") to a registry.
#include "sim_core/run/model.hpp"

namespace mlsim {
void register_commsched(ModelRegistry& registry);
}
