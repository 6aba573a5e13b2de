#include "models/collectives/register.hpp"

#include "models/collectives/collectives_model.hpp"

namespace mlsim {

void register_collectives(ModelRegistry& registry) {
  registry.add(ModelInfo{
      "collectives",
      "one all-reduce (ring, parameter server or reduce-broadcast tree) with chunking, on any "
      "network backend; reports completion time, algorithm and bus bandwidth",
      {"ring", "ps", "tree"},
      [](ModelSetup& setup) {
        JsonReader system = setup.root.object("system");
        return collectives::make_collectives_model(
            collectives::read_collectives_params(system, setup.topology.hosts().size()));
      }});
}

}  // namespace mlsim
