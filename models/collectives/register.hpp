#pragma once
// Adds the "collectives" model to a registry (called by the CLI and tests; no static
// registration).
#include "sim_core/run/model.hpp"

namespace mlsim {

void register_collectives(ModelRegistry& registry);

}  // namespace mlsim
