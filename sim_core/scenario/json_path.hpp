#pragma once
// Addressing a field of a JSON document by a dotted path with array indices ("system.bytes",
// "topology.links[2].bandwidth"), as the scenario's `variants` and the CLI's `--set` do.
// Keys containing '.', '[' or ']' cannot be addressed (catalog names never contain them).
#include <cstddef>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace mlsim {

// One step of a path: an object key or an array index.
using JsonPathStep = std::variant<std::string, std::size_t>;

// Throws InputError(where, ...) on a malformed path ("", "a..b", "a[", "a[x]", "[0]").
std::vector<JsonPathStep> parse_json_path(std::string_view path, const std::string& where);
std::string format_json_path(const std::vector<JsonPathStep>& steps);

// A field to replace: `path` = `value`.
struct Override {
  std::string path;
  nlohmann::json value;
  // The JSON path errors about this override are reported at: the path itself for --set,
  // "variants.NAME.PATH" for a variant's.
  std::string where;
};

// Parses "path=value" from the command line (errors are attributed to the file "--set"). The value
// is read as JSON when it is valid JSON (numbers, true/false, arrays, objects, quoted strings) and
// as a plain string otherwise, so
// `--set system.bytes=64MiB` and `--set seed=7` both do what they say.
Override parse_set_option(std::string_view assignment);

// Sets the field, creating missing object keys on the way (so the scenario's strict reader
// reports a misspelt key at its full path); an array index must already exist. Throws
// InputError at o.where when a step crosses a value that is not an object or array.
void apply_override(nlohmann::json& doc, const Override& o);
// Whether apply_override(doc, o) would succeed, without copying or changing `doc` (checking many
// variants of a large document must not copy it once per variant).
bool override_applies(const nlohmann::json& doc, const Override& o);

}  // namespace mlsim
