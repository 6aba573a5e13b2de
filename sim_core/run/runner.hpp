#pragma once
// Running a loaded scenario in-process: build the topology, the network (BackendRegistry) and the
// model (ModelRegistry), run the engine, collect the model's Results and what the run cost.
//
// Two steps so that every input error surfaces before the first event: PreparedRun's constructor
// builds everything (the model's factory reads "system" and "workload" and builds the model
// against the engine and network); run() simulates.
// `mlsim validate` stops after the first step. Nothing here writes files (results_writer.hpp).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "sim_core/engine/engine.hpp"
#include "sim_core/hardware/compute.hpp"
#include "sim_core/hardware/host_speeds.hpp"
#include "sim_core/hardware/node_hardware.hpp"
#include "sim_core/run/budget.hpp"
#include "sim_core/run/events.hpp"
#include "sim_core/run/model.hpp"
#include "sim_core/run/results.hpp"
#include "sim_core/run/scenario.hpp"
#include "sim_core/run/span_trace.hpp"

namespace mlsim {

struct ProgressReport {
  Time simulated;
  std::uint64_t events = 0;
  double wall_seconds = 0;
  double events_per_second = 0;
  double fraction_done = -1;  // from Model::progress(), else from the time limit; < 0: unknown
  std::optional<double> eta_seconds;
};

struct RunOptions {
  // Called every `progress_every` processed events (0: never).
  std::uint64_t progress_every = 0;
  std::function<void(const ProgressReport&)> on_progress;
};

// Deterministic facts about a run (same scenario and seed: same values).
struct RunInfo {
  std::string name;
  std::optional<std::string> variant;
  std::uint64_t seed = 0;
  std::string version;
  std::string model;
  std::string backend;
  std::uint64_t events_processed = 0;
  // The clock at the end: the last event's time when running until idle, the limit when the
  // scenario sets run.time_limit.
  Time simulated_time;
  bool hit_time_limit = false;
  NetworkTotals network;
};

struct RunOutput {
  Results results;
  RunInfo info;
  double wall_seconds = 0;                 // the only field that differs between identical runs
  nlohmann::json resolved_scenario;        // with the model's defaults written in
  std::shared_ptr<const TraceFile> trace;  // the spans, when the scenario's output.trace is on
};

class PreparedRun {
 public:
  // Throws InputError (attributed to the scenario file that holds the bad value), also when the
  // model's estimate of its work passes `budget` (budget.hpp).
  PreparedRun(const LoadedScenario& scenario, const Registries& registries,
              const RunBudget& budget = {});
  ~PreparedRun();
  PreparedRun(const PreparedRun&) = delete;
  PreparedRun& operator=(const PreparedRun&) = delete;

  // Runs once; a second call is an InvariantError. Throws LimitError when the run passes its
  // budget's events or resident memory (checked every 2^16 events).
  RunOutput run(const RunOptions& options = {});

  const Topology& topology() const { return topology_; }
  const NodeHardware& node_hardware() const { return node_hardware_; }

 private:
  const LoadedScenario& scenario_;
  nlohmann::json resolved_;
  RunBudget budget_;
  Engine engine_;
  Topology topology_;
  std::unique_ptr<HostSpeeds> host_speeds_;
  NodeHardware node_hardware_;
  std::unique_ptr<Compute> compute_;
  std::unique_ptr<Network> network_;
  PlatformEvents events_;
  std::unique_ptr<LinkConditions> links_;
  std::unique_ptr<NodeHealth> nodes_;
  std::unique_ptr<EventScheduler> scheduler_;
  std::unique_ptr<SpanTrace> trace_;
  std::unique_ptr<ModelEnv> env_;
  std::unique_ptr<Model> model_;  // built against env_; destroyed before it
  bool ran_ = false;
};

// Prepare and run in one call.
RunOutput run_scenario(const LoadedScenario& scenario, const Registries& registries,
                       const RunOptions& options = {}, const RunBudget& budget = {});

}  // namespace mlsim
