#include "models/pipeline/register.hpp"

#include "models/pipeline/pipeline_model.hpp"
#include "models/pipeline/policies.hpp"

namespace mlsim {

void register_pipeline(ModelRegistry& registry) {
  registry.add({"pipeline",
                "Pipeline-parallel training (PipeDream 1F1B) from real layer profiles: "
                "PipeDream's one-shot partition against AutoPipe-style re-partitioning when GPU "
                "speeds or bandwidths change",
                pipeline::pipeline_policies().describe(),
                [](ModelSetup& setup) { return pipeline::make_pipeline_model(setup); }});
}

}  // namespace mlsim
