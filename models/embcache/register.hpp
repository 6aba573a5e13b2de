#pragma once
// Adds the GPU embedding-cache training model ("embcache") to a registry.
#include "sim_core/run/model.hpp"

namespace mlsim {
void register_embcache(ModelRegistry& registry);
}
