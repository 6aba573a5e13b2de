#include "sim_core/experiments/overrides.hpp"

#include <variant>

#include "sim_core/scenario/json_path.hpp"

namespace mlsim {

void parse_override_path(const std::string& path, const std::string& where) {
  parse_json_path(path, where);
}

const nlohmann::json* lookup_json_path(const nlohmann::json& doc, const std::string& path) {
  const nlohmann::json* cur = &doc;
  for (const auto& step : parse_json_path(path, path)) {
    if (const auto* key = std::get_if<std::string>(&step)) {
      if (!cur->is_object() || !cur->contains(*key)) return nullptr;
      cur = &(*cur)[*key];
    } else {
      const auto index = std::get<std::size_t>(step);
      if (!cur->is_array() || index >= cur->size()) return nullptr;
      cur = &(*cur)[index];
    }
  }
  return cur;
}

InputError in_file(const InputError& e, const std::filesystem::path& file) {
  return e.file().empty() ? e.in_file(file.string()) : e;
}

}  // namespace mlsim
