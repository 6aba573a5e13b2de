#include "models/ina/register.hpp"

#include "models/ina/ina_model.hpp"

namespace mlsim {

void register_ina(ModelRegistry& registry) {
  registry.add({"ina",
                "In-network aggregation: data-parallel jobs sharing a ToR switch's aggregator "
                "pool (SwitchML static slots, ATP hashed pool with PS fallback, DSA preemption); "
                "host links are packet-level inside the model, so network.backend is not used",
                {"switchml", "atp", "dsa"},
                [](ModelSetup& setup) { return ina::make_ina_model(setup); }});
}

}  // namespace mlsim
