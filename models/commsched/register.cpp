#include "models/commsched/register.hpp"

#include "models/commsched/commsched_model.hpp"
#include "models/commsched/policies.hpp"

namespace mlsim {

void register_commsched(ModelRegistry& registry) {
  registry.add({"commsched",
                "Data-parallel training (PS or ring all-reduce) from real layer profiles with "
                "its gradient communication scheduled: framework FIFO against ByteScheduler "
                "(partition, priority, credit), tuned statically, by exhaustive grid, by a BO-like "
                "search at the start, or online by AutoByte",
                commsched::commsched_policies().describe(),
                [](ModelSetup& setup) { return commsched::make_commsched_model(setup); }});
}

}  // namespace mlsim
