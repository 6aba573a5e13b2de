#pragma once
// Adds the pipeline-parallel training model ("pipeline") to a registry.
#include "sim_core/model.hpp"

namespace mlsim {
void register_pipeline(ModelRegistry& registry);
}
