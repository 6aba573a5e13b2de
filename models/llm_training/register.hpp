#pragma once
// Adds the LLM training model ("llm_training") and, when built with protobuf, the Chakra trace
// model ("chakra_trace") to a registry.
#include "sim_core/run/model.hpp"

namespace mlsim {
void register_llm_training(ModelRegistry& registry);
}
