#include "sim_core/experiments/overrides.hpp"

#include <cctype>
#include <string_view>
#include <variant>
#include <vector>

namespace mlsim {
namespace {

using Step = std::variant<std::string, std::size_t>;

std::vector<Step> split(const std::string& path, const std::string& where) {
  std::vector<Step> out;
  std::size_t i = 0;
  auto bad = [&](const char* what) {
    throw InputError(where, std::string("malformed path \"") + path + "\": " + what);
  };
  if (path.empty()) bad("empty");
  while (i < path.size()) {
    std::size_t j = i;
    while (j < path.size() && path[j] != '.' && path[j] != '[') ++j;
    if (j == i) bad("empty key");
    out.emplace_back(path.substr(i, j - i));
    while (j < path.size() && path[j] == '[') {
      const std::size_t close = path.find(']', j);
      if (close == std::string::npos || close == j + 1) bad("expected [index]");
      std::size_t index = 0;
      for (std::size_t k = j + 1; k < close; ++k) {
        if (!std::isdigit(static_cast<unsigned char>(path[k]))) bad("index is not a number");
        index = index * 10 + static_cast<std::size_t>(path[k] - '0');
      }
      out.emplace_back(index);
      j = close + 1;
    }
    if (j < path.size()) {
      if (path[j] != '.') bad("expected '.' or '[' after ']'");
      if (j + 1 == path.size()) bad("ends with '.'");
      ++j;
    }
    i = j;
  }
  return out;
}

// The message of `e` without the "path: " prefix InputError composes.
std::string bare_message(const InputError& e) {
  std::string_view w = e.what();
  const std::string prefix = e.path() + ": ";
  if (!e.path().empty() && w.starts_with(prefix)) w.remove_prefix(prefix.size());
  return std::string(w);
}

}  // namespace

void parse_override_path(const std::string& path, const std::string& where) {
  split(path, where);
}

const nlohmann::json* lookup_json_path(const nlohmann::json& doc, const std::string& path) {
  const nlohmann::json* cur = &doc;
  for (const auto& step : split(path, path)) {
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
  const std::string where = e.path().empty() ? file.string() : file.string() + ": " + e.path();
  return InputError(where, bare_message(e));
}

}  // namespace mlsim
