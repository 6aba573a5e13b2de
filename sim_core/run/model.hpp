#pragma once
// The contract between the scenario runner and a model (collectives, serving, ina, ...).
//
// A model is registered by name with a factory. The factory reads the model's own sections of
// the scenario (normally "system" and "workload") through JsonReader into typed parameters and
// builds the whole model against the run's engine, network and topology (ModelSetup::env), so
// every input error, including those only a built simulation finds (a KV cache that does not
// fit, an aggregator smaller than a packet), is raised during prepare and `mlsim validate`
// rejects what `mlsim run` would. It must not schedule events. The runner then calls start()
// (schedule the first events), runs the engine until idle (or the scenario's time limit), and
// calls finish() to collect metrics.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sim_core/engine/engine.hpp"
#include "sim_core/engine/random.hpp"
#include "sim_core/hardware/host_speeds.hpp"
#include "sim_core/hardware/node_health.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "sim_core/network/network.hpp"
#include "sim_core/network/network_factory.hpp"
#include "sim_core/network/topology.hpp"
#include "sim_core/run/budget.hpp"
#include "sim_core/run/policy_registry.hpp"
#include "sim_core/run/results.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim {

class HardwareCatalog;  // sim_core/hardware/hardware.hpp
class HostSpeeds;       // sim_core/hardware/host_speeds.hpp
class NodeHardware;     // sim_core/hardware/node_hardware.hpp
class CostModel;        // sim_core/hardware/cost_model.hpp
class Compute;          // sim_core/hardware/compute.hpp
struct PlatformEvents;  // sim_core/run/events.hpp
class SpanTrace;        // sim_core/run/span_trace.hpp

// What a model can use. Owned by the runner; valid from the factory call (at prepare) to finish().
//
// Dynamics come only from the platform, driven by the scenario's `events` section (applied by the
// runner; those at time 0 after the model is built and before start()): link changes through
// `links` (which applies them to `network`), compute speed through `host_speeds`, failures and
// repairs through `nodes`. A model reads them when it times work and subscribes (on_change) where
// it must react.
struct ModelEnv {
  Engine& engine;
  Network& network;
  const Topology& topology;
  const HardwareCatalog& hardware;
  HostSpeeds& host_speeds;  // per-node compute-rate multiplier, changed at run time
  std::uint64_t seed;
  std::filesystem::path scenario_dir;  // relative paths in the scenario resolve against it
  const NodeHardware& node_hardware;   // GPU, NIC, switch spec of each topology node
  Compute& compute;                    // runs GPU work on hosts (sim_core/hardware/compute.hpp)
  LinkConditions& links;
  NodeHealth& nodes;
  // The scenario's events, resolved, for a model that replays the run privately (commsched's
  // tuners); the runner applies them, a model never does.
  const PlatformEvents& events;
  // The run's timeline (span_trace.hpp) when the scenario's output.trace asks for one, else null.
  SpanTrace* trace = nullptr;
  RandomStream stream(std::string_view component) const { return RandomStream(seed, component); }
};

class Model {
 public:
  virtual ~Model() = default;
  virtual void start(ModelEnv& env) = 0;
  virtual void finish(ModelEnv& env, Results& out) = 0;
  // Fraction of the work done in [0, 1] for the progress line, or < 0 if unknown.
  virtual double progress(const ModelEnv&) const { return -1; }
};

// What a factory gets: the scenario root (read only the sections you own: "system", "workload"),
// the run's environment, already built (engine with no event run yet, network, topology,
// hardware, compute), to build the model against, and the cost model to check work against.
// topology, hardware, scenario_dir, seed and node_hardware are shorthands for env's.
struct ModelSetup {
  ModelSetup(JsonReader& root_reader, ModelEnv& run_env, const CostModel& cost_model,
             const NetworkSpec& network_spec)
      : root(root_reader),
        env(run_env),
        topology(run_env.topology),
        hardware(run_env.hardware),
        scenario_dir(run_env.scenario_dir),
        seed(run_env.seed),
        node_hardware(run_env.node_hardware),
        costs(cost_model),
        network(network_spec),
        events(run_env.events) {}

  JsonReader& root;
  ModelEnv& env;
  const Topology& topology;
  const HardwareCatalog& hardware;
  const std::filesystem::path& scenario_dir;
  std::uint64_t seed;
  const NodeHardware& node_hardware;  // per-node hardware (topology.hardware)
  const CostModel& costs;             // the "compute" section's providers, to check at prepare
  // The scenario's network backend (name, whether the scenario chose it, what it can do), for
  // models that must refuse a backend they cannot use.
  const NetworkSpec& network;
  // The scenario's events, resolved against the topology (a model may reject what it cannot
  // honour, or keep them to replay privately).
  const PlatformEvents& events;
  // Filled by the factory where its parameters can ask for unbounded work (budget.hpp): the
  // runner refuses the run before it starts when the estimate passes the run's budget.
  WorkEstimate estimate;
};

struct ModelInfo {
  std::string name;
  std::string description;
  // Every registered policy of the model, from its PolicyRegistry objects (`mlsim list`).
  std::vector<PolicyInfo> policies;
  std::function<std::unique_ptr<Model>(ModelSetup&)> make;
};

// One registry per run of the CLI, filled by register_* calls next to each model
// (models/<name>/register.hpp), never by static initialisers.
class ModelRegistry {
 public:
  void add(ModelInfo info) { models_.push_back(std::move(info)); }
  const ModelInfo* find(const std::string& name) const {
    for (const auto& m : models_)
      if (m.name == name) return &m;
    return nullptr;
  }
  const std::vector<ModelInfo>& all() const { return models_; }

 private:
  std::vector<ModelInfo> models_;
};

}  // namespace mlsim
