#pragma once
// Adds the pipeline-parallel training model ("pipeline") to a registry.
#include "sim_core/run/model.hpp"

namespace mlsim {
void register_pipeline(ModelRegistry& registry);
}
