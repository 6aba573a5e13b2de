#pragma once
// Chooses a network backend by name ("analytic", "flow", and, when built, "simgrid", "ns3").
// The scenario's "network" section is parsed into NetworkSpec by the scenario loader.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim_core/engine/engine.hpp"
#include "sim_core/network/network.hpp"
#include "sim_core/network/topology.hpp"

namespace mlsim {

class JsonReader;

struct NetworkSpec {
  std::string backend = "flow";
  // The scenario named the backend (rather than taking the default): a model that moves its bytes
  // some other way must refuse it instead of ignoring it.
  bool backend_explicit = false;
  // The backend can end and start transfers at switch nodes, so it can host a switch program
  // (switch_program.hpp); copied from BackendInfo by the loader.
  bool hosts_switch_programs = false;
  // Backend-specific options (e.g. simgrid "model": "CM02"; ns3 "transport": "tcp"), validated by
  // the backend's own options parser.
  nlohmann::json options = nlohmann::json::object();
};

struct BackendInfo {
  std::string name;
  std::string description;  // what it models and what it costs, shown by `mlsim list`
  // Reads and validates the backend's options (keys of the "network" section other than
  // "backend"), throwing InputError with the JSON path; returns the factory to call at run time.
  std::function<std::function<std::unique_ptr<Network>(Engine&, const Topology&)>(JsonReader&)>
      configure;
  // Transfers may end and start at switch nodes (switch programs, switch_program.hpp).
  bool hosts_switch_programs = false;
};

class BackendRegistry {
 public:
  void add(BackendInfo info) { backends_.push_back(std::move(info)); }
  const BackendInfo* find(const std::string& name) const {
    for (const auto& b : backends_)
      if (b.name == name) return &b;
    return nullptr;
  }
  const std::vector<BackendInfo>& all() const { return backends_; }

 private:
  std::vector<BackendInfo> backends_;
};

// Registers "analytic" and "flow" (sim_core). SimGrid and ns-3 register from their own targets.
void register_core_backends(BackendRegistry& registry);

}  // namespace mlsim
