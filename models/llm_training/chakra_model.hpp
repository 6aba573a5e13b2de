#pragma once
// The "chakra_trace" model (docs/llm_training.md, "Chakra traces"): one MLCommons Chakra
// execution trace per rank (sim_core/workload/chakra) run by the platform's graph executor.
// Built only with protobuf (MLSIM_HAVE_CHAKRA).
#include <memory>

#include "sim_core/run/model.hpp"

namespace mlsim::llm_training {

std::unique_ptr<Model> make_chakra_model(ModelSetup& setup);

}  // namespace mlsim::llm_training
