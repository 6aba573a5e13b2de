#pragma once
// mlsim's version, recorded in every result so a number can be traced to the code that made it.
#include <string_view>

namespace mlsim {
std::string_view version();
}  // namespace mlsim
