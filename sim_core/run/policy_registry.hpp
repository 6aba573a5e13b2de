#pragma once
// Named choices inside a model: serving's routers and batch schedulers, ina's aggregation
// policies, commsched's schedulers and tuners, ... Each is registered once with a name, one line
// of description (`mlsim list` prints it) and a value: a factory where the policy is an object
// (a router, a batch scheduler), else the settings it stands for (a preset of a model's
// mechanisms, an enumerator). A scenario picks one by name; an unknown name is an InputError at
// the key's JSON path listing the registered names. Adding a policy is its own file plus one
// add() line in its model's policies.cpp.
//
// A model's registries are built by one function in its folder (models/<name>/policies.cpp) on
// first use and never change afterwards; no static initialiser in another file registers
// anything, so nothing disappears when a linker drops an unreferenced object file.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim_core/base/error.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim {

// What `mlsim list` shows of one registered policy.
struct PolicyInfo {
  std::string kind;  // what it is in its model: "router", "scheduler", "tuner", ...
  std::string name;
  std::string description;
};

template <typename Value>
class PolicyRegistry {
 public:
  struct Entry {
    std::string name;
    std::string description;
    Value value;
  };

  // `kind` names the choice in errors and listings ("scheduler").
  explicit PolicyRegistry(std::string kind) : kind_(std::move(kind)) {}

  PolicyRegistry& add(std::string name, std::string description, Value value) {
    MLSIM_CHECK(find(name) == nullptr, kind_ + " \"" + name + "\" registered twice");
    entries_.push_back({std::move(name), std::move(description), std::move(value)});
    return *this;
  }

  const Entry* find(std::string_view name) const {
    for (const Entry& e : entries_)
      if (e.name == name) return &e;
    return nullptr;
  }

  // The entry called `name`; InputError at `where` listing the registered names otherwise.
  const Entry& get(std::string_view name, const std::string& where) const {
    if (const Entry* e = find(name)) return *e;
    std::string known;
    for (const Entry& e : entries_) known += (known.empty() ? "\"" : ", \"") + e.name + "\"";
    throw InputError(
        where, "unknown " + kind_ + " \"" + std::string(name) + "\" (registered: " + known + ")");
  }

  // The entry named by the reader's `key` (required).
  const Entry& choose(JsonReader& r, std::string_view key) const {
    return get(r.string(key), r.path_of(key));
  }
  // The same with a default, written back like any JsonReader default.
  const Entry& choose_or(JsonReader& r, std::string_view key, const std::string& def) const {
    return get(r.string_or(key, def), r.path_of(key));
  }

  const std::string& kind() const { return kind_; }
  const std::vector<Entry>& entries() const { return entries_; }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const Entry& e : entries_) out.push_back(e.name);
    return out;
  }
  // Appends this registry's policies to `out` (for ModelInfo::policies).
  void describe(std::vector<PolicyInfo>& out) const {
    for (const Entry& e : entries_) out.push_back({kind_, e.name, e.description});
  }

 private:
  std::string kind_;
  std::vector<Entry> entries_;
};

}  // namespace mlsim
