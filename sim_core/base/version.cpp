#include "sim_core/base/version.hpp"

#ifndef MLSIM_VERSION
#error "MLSIM_VERSION must be defined by the build (sim_core/CMakeLists.txt)"
#endif

namespace mlsim {
std::string_view version() {
  return MLSIM_VERSION;
}
}  // namespace mlsim
