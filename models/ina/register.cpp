#include "models/ina/register.hpp"

#include "models/ina/ina_model.hpp"
#include "models/ina/policies.hpp"

namespace mlsim {

void register_ina(ModelRegistry& registry) {
  registry.add(
      {"ina",
       "In-network aggregation: data-parallel jobs sharing a ToR switch's aggregator "
       "pool (SwitchML static slots, ATP hashed pool with PS fallback, DSA preemption) as a "
       "switch program; system.data_path \"packet\" (default): the model's own "
       "packet-level star links, network.backend refused; \"network\": bursts are "
       "transfers of network.backend to the switch node hosting the program; each job runs "
       "on the training core, system.scheduler ordering its gradients (ByteScheduler over "
       "ATP/DSA), and a job may name its own policy (SwitchML beside ATP or DSA)",
       ina::ina_policies().describe(),
       [](ModelSetup& setup) { return ina::make_ina_model(setup); }});
}

}  // namespace mlsim
