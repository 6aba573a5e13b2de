#pragma once
// Registers the "serving" model (LLM serving: continuous batching, chunked prefill, MFS tiers).
#include "sim_core/run/model.hpp"

namespace mlsim {

void register_serving(ModelRegistry& registry);

}  // namespace mlsim
