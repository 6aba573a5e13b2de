#pragma once
// Reading a scenario file into one JSON document: strict JSON (no comments, no duplicate keys,
// bounded nesting), `include` fragments resolved relative to the including file and deep-merged
// (objects merge key by key, anything else is replaced; the including file wins over its
// includes, a later include over an earlier one), then variant and --set overrides applied.
//
// The document remembers which file (or override) each field came from, so an error found later
// (by the section parsers or a model) can name the file the user must edit.
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim_core/base/error.hpp"
#include "sim_core/scenario/json_path.hpp"
#include "sim_core/scenario/strict_json.hpp"

namespace mlsim {

// Field path ("topology.hosts", "hardware.gpus.A100-SXM4-80GB") -> the file or override that set
// it. A path not listed inherits from its closest listed ancestor, then from the main file.
class Provenance {
 public:
  explicit Provenance(std::string main_file = {}) : main_(std::move(main_file)) {}
  void record(const std::string& path, const std::string& origin) { origin_[path] = origin; }
  const std::string& origin_of(std::string_view path) const;
  const std::string& main_file() const { return main_; }
  // `e` attributed to the origin of its path (unless it already names a file), and to the
  // variant the document was loaded with, if any.
  InputError attribute(const InputError& e) const;
  // The variant applied to the document: every error attributed names it.
  void set_variant(std::string name) { variant_ = std::move(name); }

 private:
  std::string main_;
  std::string variant_;
  std::map<std::string, std::string, std::less<>> origin_;
};

struct ScenarioDocument {
  nlohmann::json json;
  Provenance provenance;
};

// Limits that keep a hostile or broken input from exhausting the machine.
inline constexpr std::size_t kMaxScenarioFileBytes = 64u << 20;
inline constexpr int kMaxIncludeDepth = 16;

// Reads `file` and resolves its includes. Throws InputError (with the file) for a missing or
// unreadable file, bad JSON, an include cycle or a bad `include` value.
ScenarioDocument read_scenario_document(const std::filesystem::path& file);
// The same for text that claims to live at `file` (its includes resolve against file's folder).
ScenarioDocument read_scenario_text(std::string_view text, const std::filesystem::path& file);

// Object members merged recursively; any other value of `top` replaces `base`'s.
void deep_merge(nlohmann::json& base, const nlohmann::json& top);
// The same, moving `top`'s values instead of copying them (a large document is not copied).
void deep_merge(nlohmann::json& base, nlohmann::json&& top);

// Applies the named variant's overrides (from the document's "variants" section), recording
// their origin. Unknown variant names are an InputError at "variants" listing the known ones.
void apply_variant(ScenarioDocument& doc, const std::string& variant);
void apply_overrides(ScenarioDocument& doc, const std::vector<Override>& overrides);

}  // namespace mlsim
