#pragma once
// Strict JSON for everything a user writes (scenario files, fragments, --set values): no
// comments, no duplicate keys (nlohmann would silently keep the last one), and bounded nesting
// (so no later recursive walk can exhaust the stack).
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mlsim {

inline constexpr int kMaxJsonDepth = 64;

// Errors are InputErrors naming `file`, and the line (syntax) or the JSON path (duplicate key,
// nesting).
nlohmann::json parse_strict_json(std::string_view text, const std::string& file);

}  // namespace mlsim
