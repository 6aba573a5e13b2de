#include "models/llm_training/register.hpp"

#include "models/llm_training/chakra_model.hpp"
#include "models/llm_training/llm_training_model.hpp"
#include "models/llm_training/policies.hpp"

namespace mlsim {

void register_llm_training(ModelRegistry& registry) {
  registry.add({"llm_training",
                "One Megatron-LM training iteration of a GPT/Llama transformer with tensor x "
                "pipeline (1F1B) x data parallelism, as an execution graph on the platform's "
                "Compute and collectives (network or closed form)",
                llm_training::llm_training_policies().describe(),
                [](ModelSetup& setup) { return llm_training::make_llm_training_model(setup); }});
#ifdef MLSIM_HAVE_CHAKRA
  registry.add({"chakra_trace",
                "MLCommons Chakra execution traces (one per rank, the format ASTRA-sim reads) run "
                "as an execution graph on the platform's Compute and collectives (network or "
                "closed form)",
                llm_training::llm_training_policies().describe(),
                [](ModelSetup& setup) { return llm_training::make_chakra_model(setup); }});
#endif
}

}  // namespace mlsim
