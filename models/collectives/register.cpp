#include "models/collectives/register.hpp"

#include "models/collectives/collectives_model.hpp"
#include "models/collectives/policies.hpp"

namespace mlsim {

void register_collectives(ModelRegistry& registry) {
  registry.add(ModelInfo{
      "collectives",
      "one all-reduce (ring, parameter server, reduce-broadcast tree or RAT, the resilient "
      "allreduce tree over the topology's regions) with chunking and link failures, on any "
      "network backend; reports completion time, algorithm and bus bandwidth",
      collectives::collectives_policies().describe(), [](ModelSetup& setup) {
        JsonReader system = setup.root.object("system");
        return collectives::make_collectives_model(
            setup.env, collectives::read_collectives_params(system, setup.topology));
      }});
}

}  // namespace mlsim
