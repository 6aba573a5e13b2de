#pragma once
// Adds the in-network aggregation model ("ina") to a registry.
#include "sim_core/run/model.hpp"

namespace mlsim {
void register_ina(ModelRegistry& registry);
}
