#include "models/commsched/register.hpp"

#include "models/commsched/commsched_model.hpp"

namespace mlsim {

void register_commsched(ModelRegistry& registry) {
  registry.add({"commsched",
                "Data-parallel training (PS or ring all-reduce) from real layer profiles with "
                "its gradient communication scheduled: framework FIFO against ByteScheduler "
                "(partition, priority, credit), tuned statically, by exhaustive grid, by a BO-like "
                "search at the start, or online by AutoByte",
                {"fifo", "bytescheduler", "static", "grid_best", "bo_like", "autobyte"},
                [](ModelSetup& setup) { return commsched::make_commsched_model(setup); }});
}

}  // namespace mlsim
