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
// Linear in the text (bench/strict_json_bench.cpp: a 64 MiB scenario in about a second).
nlohmann::json parse_strict_json(std::string_view text, const std::string& file);
// The same, keeping object members in file order (sweep and claims files, whose order matters).
nlohmann::ordered_json parse_strict_ordered_json(std::string_view text, const std::string& file);

// Levels of containers in `value` (a scalar 0, [] 1, {"a": [1]} 2), counted no further than
// `limit` + 1, so a deep value costs no more than the limit to check.
int json_nesting_depth(const nlohmann::json& value, int limit = kMaxJsonDepth);

}  // namespace mlsim
