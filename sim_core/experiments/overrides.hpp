#pragma once
// Dotted JSON paths (json_path.hpp) as experiments use them: checking an override's path when a
// claims or sweep file is read, reading a value of a resolved scenario, and attributing an input
// error to the file it was found in.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "sim_core/base/error.hpp"

namespace mlsim {

// Throws InputError(where, ...) when `path` is not a well-formed dotted path.
void parse_override_path(const std::string& path, const std::string& where);
// The value at `path`, or nullptr when some step is missing.
const nlohmann::json* lookup_json_path(const nlohmann::json& doc, const std::string& path);
// `e` attributed to the file it was found in.
InputError in_file(const InputError& e, const std::filesystem::path& file);

}  // namespace mlsim
