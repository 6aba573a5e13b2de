#pragma once
// Adds the in-network aggregation model ("ina") to a registry.
#include "sim_core/model.hpp"

namespace mlsim {
void register_ina(ModelRegistry& registry);
}
