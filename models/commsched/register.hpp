#pragma once
// Adds the communication-scheduling model ("commsched") to a registry.
#include "sim_core/model.hpp"

namespace mlsim {
void register_commsched(ModelRegistry& registry);
}
