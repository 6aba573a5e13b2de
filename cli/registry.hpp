#pragma once
// The one place where the program learns every model and network backend it can run.
#include "sim_core/run/registries.hpp"

namespace mlsim {

Registries make_registries();

}  // namespace mlsim
