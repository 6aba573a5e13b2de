#include "sim_core/scenario/scenario_document.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "sim_core/scenario/json_reader.hpp"
#include "sim_core/scenario/strict_json.hpp"

namespace mlsim {

const std::string& Provenance::origin_of(std::string_view path) const {
  while (!path.empty()) {
    if (auto it = origin_.find(path); it != origin_.end()) return it->second;
    const auto cut = path.find_last_of(".[");
    if (cut == std::string_view::npos) break;
    path = path.substr(0, cut);
  }
  return main_;
}

InputError Provenance::attribute(const InputError& e) const {
  InputError out = e.file().empty() ? e.in_file(origin_of(e.path())) : e;
  const std::string note = " (with variant \"" + variant_ + "\")";
  if (variant_.empty() || out.message().find("variant \"" + variant_ + "\"") != std::string::npos)
    return out;
  return InputError(out.file(), out.path(), out.message() + note);
}

namespace {

std::string read_file(const std::filesystem::path& file, const std::string& shown,
                      const std::string& referrer, const std::string& referrer_path) {
  namespace fs = std::filesystem;
  auto fail = [&](const std::string& what) -> InputError {
    return referrer.empty() ? InputError(shown, "", what)
                            : InputError(referrer, referrer_path, what);
  };
  std::error_code ec;
  const auto status = fs::status(file, ec);
  if (ec || !fs::exists(status)) throw fail(fmt::format("file not found: {}", shown));
  if (!fs::is_regular_file(status)) throw fail(fmt::format("not a regular file: {}", shown));
  const auto size = fs::file_size(file, ec);
  if (ec) throw fail(fmt::format("cannot read {}: {}", shown, ec.message()));
  if (size > kMaxScenarioFileBytes)
    throw fail(fmt::format("{} is larger than {} MiB", shown, kMaxScenarioFileBytes >> 20));
  std::ifstream in(file, std::ios::binary);
  if (!in) throw fail(fmt::format("cannot open {}", shown));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void record_all(Provenance& p, const nlohmann::json& j, const std::string& prefix,
                const std::string& origin) {
  if (!j.is_object()) return;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const auto path = prefix.empty() ? it.key() : prefix + "." + it.key();
    p.record(path, origin);
    record_all(p, it.value(), path, origin);
  }
}

void merge_provenance(Provenance& into, const nlohmann::json& j, const Provenance& from,
                      const std::string& prefix) {
  if (!j.is_object()) return;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const auto path = prefix.empty() ? it.key() : prefix + "." + it.key();
    into.record(path, from.origin_of(path));
    merge_provenance(into, it.value(), from, path);
  }
}

// `chain` holds the canonical paths of the files being included, outermost first.
ScenarioDocument resolve(std::string_view text, const std::filesystem::path& file,
                         const std::string& shown, std::vector<std::filesystem::path>& chain) {
  nlohmann::json doc = parse_strict_json(text, shown);
  if (!doc.is_object())
    throw InputError(shown, "(root)", "expected an object, got " + json_type_name(doc));

  ScenarioDocument out{nlohmann::json::object(), Provenance(shown)};
  if (auto inc = doc.find("include"); inc != doc.end()) {
    if (!inc->is_array())
      throw InputError(shown, "include",
                       "expected an array of file names, got " + json_type_name(*inc));
    for (std::size_t i = 0; i < inc->size(); ++i) {
      const auto where = fmt::format("include[{}]", i);
      const auto& name = (*inc)[i];
      if (!name.is_string() || name.get<std::string>().empty())
        throw InputError(shown, where, "expected a file name, got " + json_type_name(name));
      const auto target = (file.parent_path() / name.get<std::string>()).lexically_normal();
      const auto target_shown = target.string();
      std::error_code ec;
      auto canonical = std::filesystem::weakly_canonical(target, ec);
      if (ec) canonical = target;
      for (const auto& open : chain)
        if (open == canonical) {
          std::string cycle;
          for (const auto& c : chain) cycle += c.filename().string() + " -> ";
          throw InputError(
              shown, where,
              fmt::format("include cycle: {}{}", cycle, canonical.filename().string()));
        }
      if (chain.size() >= static_cast<std::size_t>(kMaxIncludeDepth))
        throw InputError(shown, where,
                         fmt::format("includes nested deeper than {} files", kMaxIncludeDepth));
      const auto sub_text = read_file(target, target_shown, shown, where);
      chain.push_back(canonical);
      auto sub = resolve(sub_text, target, target_shown, chain);
      chain.pop_back();
      merge_provenance(out.provenance, sub.json, sub.provenance, "");
      deep_merge(out.json, std::move(sub.json));
    }
    doc.erase(inc);
  }
  record_all(out.provenance, doc, "", shown);
  deep_merge(out.json, std::move(doc));
  return out;
}

ScenarioDocument resolve_root(std::string_view text, const std::filesystem::path& file) {
  std::error_code ec;
  auto canonical = std::filesystem::weakly_canonical(file, ec);
  if (ec) canonical = file;
  std::vector<std::filesystem::path> chain{canonical};
  return resolve(text, file, file.string(), chain);
}

}  // namespace

ScenarioDocument read_scenario_document(const std::filesystem::path& file) {
  return resolve_root(read_file(file, file.string(), "", ""), file);
}

ScenarioDocument read_scenario_text(std::string_view text, const std::filesystem::path& file) {
  return resolve_root(text, file);
}

void deep_merge(nlohmann::json& base, const nlohmann::json& top) {
  if (!base.is_object() || !top.is_object()) {
    base = top;
    return;
  }
  for (auto it = top.begin(); it != top.end(); ++it) {
    auto found = base.find(it.key());
    if (found == base.end())
      base[it.key()] = it.value();
    else
      deep_merge(*found, it.value());
  }
}

void deep_merge(nlohmann::json& base, nlohmann::json&& top) {
  if (!base.is_object() || !top.is_object()) {
    base = std::move(top);
    return;
  }
  for (auto it = top.begin(); it != top.end(); ++it) {
    auto found = base.find(it.key());
    if (found == base.end())
      base[it.key()] = std::move(it.value());
    else
      deep_merge(*found, std::move(it.value()));
  }
}

void apply_variant(ScenarioDocument& doc, const std::string& variant) {
  auto& j = doc.json;
  auto vars = j.find("variants");
  std::string known;
  if (vars != j.end() && vars->is_object())
    for (auto it = vars->begin(); it != vars->end(); ++it)
      if (it.key().empty() || it.key()[0] != '_')
        known += (known.empty() ? "\"" : ", \"") + it.key() + "\"";
  if (vars == j.end() || !vars->is_object() || !vars->contains(variant) || variant.empty() ||
      variant[0] == '_')
    throw InputError(doc.provenance.origin_of("variants"), "variants",
                     fmt::format("unknown variant \"{}\" (the scenario has: {})", variant,
                                 known.empty() ? "none" : known));
  const auto where = "variants." + variant;
  const auto file = doc.provenance.origin_of(where);
  doc.provenance.set_variant(variant);
  const nlohmann::json overrides = (*vars)[variant];  // copy: applying may rewrite "variants"
  if (!overrides.is_object())
    throw InputError(
        file, where,
        "expected an object of \"path\": value overrides, got " + json_type_name(overrides));
  for (auto it = overrides.begin(); it != overrides.end(); ++it) {
    if (it.key() == "comment" || (!it.key().empty() && it.key()[0] == '_')) continue;
    Override o{it.key(), it.value(), where + "." + it.key()};
    try {
      apply_override(j, o);
    } catch (const InputError& e) {
      throw e.in_file(file);
    }
    doc.provenance.record(it.key(), file);
    record_all(doc.provenance, it.value(), it.key(), file);
  }
}

void apply_overrides(ScenarioDocument& doc, const std::vector<Override>& overrides) {
  for (const auto& o : overrides) {
    try {
      if (parse_json_path(o.path, o.where).front() == JsonPathStep{std::string("include")})
        throw InputError(o.where,
                         "includes are resolved before overrides; edit the scenario file instead");
      apply_override(doc.json, o);
    } catch (const InputError& e) {
      throw e.in_file("--set");
    }
    doc.provenance.record(o.path, "--set");
    record_all(doc.provenance, o.value, o.path, "--set");
  }
}

}  // namespace mlsim
