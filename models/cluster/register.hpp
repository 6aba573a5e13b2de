#pragma once
// Adds the shared GPU-cluster scheduling model ("cluster") to a registry.
#include "sim_core/run/model.hpp"

namespace mlsim {
void register_cluster(ModelRegistry& registry);
}
