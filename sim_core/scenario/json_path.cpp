#include "sim_core/scenario/json_path.hpp"

#include <fmt/format.h>

#include "sim_core/base/error.hpp"
#include "sim_core/scenario/json_reader.hpp"
#include "sim_core/scenario/strict_json.hpp"

namespace mlsim {

std::vector<JsonPathStep> parse_json_path(std::string_view path, const std::string& where) {
  auto bad = [&](const std::string& why) -> InputError {
    return InputError(where, fmt::format("malformed path \"{}\": {}", path, why));
  };
  // A path is a walk down nested containers: the scenario's nesting limit bounds it too (a
  // 20,000-step --set path used to build a 1 GB document; issue 17).
  auto too_deep = [&]() -> InputError {
    return InputError(where, fmt::format("path \"{}...\" is deeper than {} levels",
                                         path.substr(0, 40), kMaxJsonDepth));
  };
  std::vector<JsonPathStep> steps;
  std::size_t i = 0;
  if (path.empty()) throw bad("empty");
  while (i < path.size()) {
    if (path[i] == '[') {
      if (steps.empty()) throw bad("it must start with a key");
      const auto close = path.find(']', i);
      if (close == std::string_view::npos) throw bad("'[' without ']'");
      const auto digits = path.substr(i + 1, close - i - 1);
      if (digits.empty() || digits.size() > 9 ||
          digits.find_first_not_of("0123456789") != std::string_view::npos)
        throw bad("an index must be a non-negative integer");
      steps.emplace_back(static_cast<std::size_t>(std::stoul(std::string(digits))));
      if (steps.size() > static_cast<std::size_t>(kMaxJsonDepth)) throw too_deep();
      i = close + 1;
      if (i < path.size() && path[i] != '.' && path[i] != '[')
        throw bad("expected '.' or '[' after ']'");
      if (i < path.size() && path[i] == '.') {
        ++i;
        if (i == path.size()) throw bad("ends with '.'");
      }
      continue;
    }
    const auto end = path.find_first_of(".[]", i);
    const auto key = path.substr(i, end == std::string_view::npos ? path.npos : end - i);
    if (key.empty()) throw bad("empty key");
    steps.emplace_back(std::string(key));
    if (steps.size() > static_cast<std::size_t>(kMaxJsonDepth)) throw too_deep();
    if (end == std::string_view::npos) break;
    if (path[end] == ']') throw bad("']' without '['");
    i = end;
    if (path[i] == '.') {
      ++i;
      if (i == path.size()) throw bad("ends with '.'");
    }
  }
  return steps;
}

std::string format_json_path(const std::vector<JsonPathStep>& steps) {
  std::string out;
  for (const auto& s : steps) {
    if (const auto* key = std::get_if<std::string>(&s))
      out += (out.empty() ? "" : ".") + *key;
    else
      out += fmt::format("[{}]", std::get<std::size_t>(s));
  }
  return out;
}

Override parse_set_option(std::string_view assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string_view::npos)
    throw InputError("--set", "", fmt::format("expected PATH=VALUE, got \"{}\"", assignment));
  Override o;
  o.path = std::string(assignment.substr(0, eq));
  o.where = o.path;
  try {
    parse_json_path(o.path, "");  // reject a malformed path early
  } catch (const InputError& e) {
    throw e.in_file("--set");
  }
  const auto text = assignment.substr(eq + 1);
  // Not valid JSON (e.g. 64MiB, flow) means a plain string. Valid JSON is parsed with the
  // scenario's strict rules (no duplicate keys, bounded nesting), like a scenario file.
  if (nlohmann::json::accept(text))
    o.value = parse_strict_json(text, "--set");
  else
    o.value = std::string(text);
  try {
    (void)o.value.dump();  // a plain string must be valid UTF-8 to be echoed into results
  } catch (const nlohmann::json::exception&) {
    throw InputError("--set", o.path, "the value is not valid UTF-8");
  }
  return o;
}

void apply_override(nlohmann::json& doc, const Override& o) {
  const std::string& where = o.where.empty() ? o.path : o.where;
  const auto steps = parse_json_path(o.path, where);
  // The value lands `steps` levels down: together they must respect the nesting limit.
  const int value_depth = json_nesting_depth(o.value);
  if (steps.size() + static_cast<std::size_t>(value_depth) >
      static_cast<std::size_t>(kMaxJsonDepth))
    throw InputError(where,
                     fmt::format("cannot set \"{}\": a path of {} steps holding a value "
                                 "nested {} levels deep passes the {}-level nesting limit",
                                 o.path.substr(0, 60), steps.size(), value_depth, kMaxJsonDepth));
  nlohmann::json* at = &doc;
  std::vector<JsonPathStep> walked;
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const auto& step = steps[k];
    const bool last = k + 1 == steps.size();
    if (const auto* key = std::get_if<std::string>(&step)) {
      if (at->is_null()) *at = nlohmann::json::object();
      if (!at->is_object())
        throw InputError(where, fmt::format("cannot set \"{}\": {} is {}, not an object", o.path,
                                            walked.empty() ? "(root)" : format_json_path(walked),
                                            json_type_name(*at)));
      at = &(*at)[*key];
    } else {
      const auto index = std::get<std::size_t>(step);
      if (!at->is_array())
        throw InputError(where, fmt::format("cannot set \"{}\": {} is {}, not an array", o.path,
                                            format_json_path(walked),
                                            at->is_null() ? "absent" : json_type_name(*at)));
      if (index >= at->size())
        throw InputError(where, fmt::format("cannot set \"{}\": {} has {} elements", o.path,
                                            format_json_path(walked), at->size()));
      at = &(*at)[index];
    }
    walked.push_back(step);
    if (last) *at = o.value;
  }
}

bool override_applies(const nlohmann::json& doc, const Override& o) {
  std::vector<JsonPathStep> steps;
  try {
    steps = parse_json_path(o.path, o.where);
  } catch (const InputError&) {
    return false;
  }
  if (steps.size() + static_cast<std::size_t>(json_nesting_depth(o.value)) >
      static_cast<std::size_t>(kMaxJsonDepth))
    return false;
  const nlohmann::json* at = &doc;  // nullptr: absent (apply_override would create an object)
  for (const auto& step : steps) {
    if (const auto* key = std::get_if<std::string>(&step)) {
      if (at == nullptr || at->is_null()) {
        at = nullptr;
        continue;
      }
      if (!at->is_object()) return false;
      const auto it = at->find(*key);
      at = it == at->end() ? nullptr : &*it;
    } else {
      const auto index = std::get<std::size_t>(step);
      if (at == nullptr || !at->is_array() || index >= at->size()) return false;
      at = &(*at)[index];
    }
  }
  return true;
}

}  // namespace mlsim
