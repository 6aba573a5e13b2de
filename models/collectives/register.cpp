#include "models/collectives/register.hpp"

#include "models/collectives/collectives_model.hpp"

namespace mlsim {

void register_collectives(ModelRegistry& registry) {
  registry.add(ModelInfo{
      "collectives",
      "one all-reduce (ring, parameter server, reduce-broadcast tree or RAT, the resilient "
      "allreduce tree over the topology's regions) with chunking and link failures, on any "
      "network backend; reports completion time, algorithm and bus bandwidth",
      {"ring", "ps", "tree", "rat"},
      [](ModelSetup& setup) {
        JsonReader system = setup.root.object("system");
        return collectives::make_collectives_model(
            collectives::read_collectives_params(system, setup.topology));
      }});
}

}  // namespace mlsim
