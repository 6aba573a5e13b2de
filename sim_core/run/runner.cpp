#include "sim_core/run/runner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "sim_core/base/error.hpp"
#include "sim_core/base/version.hpp"
#include "sim_core/hardware/hardware.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim {

namespace {

// What the run will certainly cost beyond the model's own estimate: the scenario document held in
// memory (a 60 MB file of 30 M numbers peaks at 2.7 GB: docs/robustness.md), and the random
// failures (each a failure and a repair event per host).
void add_platform_estimate(WorkEstimate& estimate, const nlohmann::json& document,
                           const PlatformEvents& events) {
  // The document's tree is held three times at least: as loaded, as the run's resolved copy
  // (moved into the output), and in the summary being written.
  estimate.memory.push_back(
      {3 * json_memory_bytes(document), "the scenario document, held three times", ""});
  if (events.random_failures) {
    const auto& rf = *events.random_failures;
    const double failures = static_cast<double>(events.failure_candidates.size()) *
                            rf.until.seconds() / rf.mtbf.seconds();
    estimate.events.push_back(
        {2 * failures,
         fmt::format("random failures and repairs: {} hosts x {} / mtbf {}",
                     events.failure_candidates.size(), to_string(rf.until), to_string(rf.mtbf)),
         "events.random_failures.mtbf"});
  }
}

}  // namespace

PreparedRun::PreparedRun(const LoadedScenario& scenario, const Registries& registries,
                         const RunBudget& budget)
    : scenario_(scenario), resolved_(scenario.resolved), budget_(budget) {
  try {
    topology_ = build_topology(scenario.topology);
    host_speeds_ = std::make_unique<HostSpeeds>(topology_.nodes().size());
    node_hardware_ = build_node_hardware(topology_, scenario.topology, scenario.topology_hardware,
                                         scenario.hardware);
    MLSIM_CHECK(scenario.costs != nullptr, "scenario loaded without a cost model");
    compute_ = std::make_unique<Compute>(engine_, node_hardware_, *host_speeds_, *scenario.costs);
    MLSIM_CHECK(scenario.make_network != nullptr, "scenario loaded without a network factory");
    network_ = scenario.make_network(engine_, topology_);
    events_ = resolve_events(scenario.events, topology_, *network_);
    links_ = std::make_unique<LinkConditions>(topology_, *network_);
    nodes_ = std::make_unique<NodeHealth>(topology_.nodes().size());
    env_ = std::make_unique<ModelEnv>(
        ModelEnv{engine_, *network_, topology_, scenario.hardware, *host_speeds_, scenario.seed,
                 scenario.dir(), node_hardware_, *compute_, *links_, *nodes_, events_});
    if (scenario.output.trace) {
      trace_ = std::make_unique<SpanTrace>();
      env_->trace = trace_.get();
    }
    const ModelInfo* info = registries.models.find(scenario.model);
    if (!info)
      throw InputError("system.model", "model \"" + scenario.model + "\" is not registered");
    JsonReader root(resolved_, "");
    // The factory builds the whole model against the environment, so whatever the model
    // rejects is rejected here, before the first event, and by `mlsim validate` too.
    ModelSetup setup(root, *env_, *scenario.costs, scenario.network);
    model_ = info->make(setup);
    MLSIM_CHECK(model_ != nullptr, "model factory returned nothing");
    // A model section the model never opened would be silently ignored.
    for (const char* section : {"system", "workload"})
      if (root.has(section) && !root.was_read(section))
        throw InputError(section,
                         "the " + scenario.model + " model reads no \"" + section + "\" section");
    add_platform_estimate(setup.estimate, scenario.resolved, events_);
    check_budget(setup.estimate, budget_);
  } catch (const InputError& e) {
    throw scenario.provenance.attribute(e);
  }
  scheduler_ = std::make_unique<EventScheduler>(
      engine_, PlatformState{*links_, *host_speeds_, *nodes_}, events_,
      RandomStream(scenario.seed, "events.random_failures"));
}

PreparedRun::~PreparedRun() = default;

namespace {

// State the engine's periodic hook reaches through one pointer (the hook's capture is small).
struct ProgressProbe {
  const RunOptions& options;
  const Model& model;
  const ModelEnv& env;
  std::optional<Time> limit;
  std::chrono::steady_clock::time_point start;
  RunBudget budget;
  std::uint64_t next_report = 0;
  std::string over_budget;  // why the run was stopped, empty while within budget

  // The resident memory is read (from /proc) at most every 2^16 events: under 0.2% of a run.
  static constexpr std::uint64_t kMemoryCheckEvery = std::uint64_t{1} << 16;
  std::uint64_t next_memory_check = 0;

  // Called by the engine's periodic hook: stops the engine past the budget, reports progress
  // when due.
  void watch(Engine& engine) {
    const std::uint64_t events = engine.events_processed();
    const bool check_memory = events >= next_memory_check;
    if (check_memory) next_memory_check = events + kMemoryCheckEvery;
    if (events > budget.max_events) {
      over_budget = fmt::format(
          "stopped after {} events, more than the run's budget of {}; raise it with "
          "--max-events, or shorten the run (run.time_limit, fewer iterations or requests)",
          events, budget.max_events);
    } else if (const std::int64_t held = check_memory ? resident_bytes() : 0;
               held > budget.max_memory_bytes) {
      over_budget = fmt::format(
          "stopped after {} events holding {:.3g} GiB, more than the run's budget of {:.3g} GiB; "
          "raise it with --max-memory, or make the scenario smaller",
          events, static_cast<double>(held) / (1u << 30),
          static_cast<double>(budget.max_memory_bytes) / (1u << 30));
    }
    if (!over_budget.empty()) {
      engine.stop();
      return;
    }
    if (options.progress_every > 0 && options.on_progress && events >= next_report) {
      report(engine);
      next_report = events + options.progress_every;
    }
  }

  void report(Engine& engine) const {
    ProgressReport r;
    r.simulated = engine.now();
    r.events = engine.events_processed();
    r.wall_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.events_per_second = r.wall_seconds > 0 ? static_cast<double>(r.events) / r.wall_seconds : 0;
    r.fraction_done = model.progress(env);
    if (r.fraction_done < 0 && limit && limit->count_ns() > 0)
      r.fraction_done =
          static_cast<double>(engine.now().count_ns()) / static_cast<double>(limit->count_ns());
    if (r.fraction_done > 0 && r.fraction_done <= 1)
      r.eta_seconds = r.wall_seconds * (1 - r.fraction_done) / r.fraction_done;
    options.on_progress(r);
  }
};

}  // namespace

RunOutput PreparedRun::run(const RunOptions& options) {
  MLSIM_CHECK(!ran_, "PreparedRun::run called twice");
  ran_ = true;
  const auto start = std::chrono::steady_clock::now();
  ProgressProbe probe{.options = options,
                      .model = *model_,
                      .env = *env_,
                      .limit = scenario_.run.time_limit,
                      .start = start,
                      .budget = budget_,
                      .next_report = options.progress_every,
                      .over_budget = {},
                      .next_memory_check = ProgressProbe::kMemoryCheckEvery};
  // The budget is watched every 2^16 events, or at every progress report if those come more often.
  const std::uint64_t every =
      options.progress_every > 0
          ? std::min(options.progress_every, ProgressProbe::kMemoryCheckEvery)
          : ProgressProbe::kMemoryCheckEvery;
  engine_.set_periodic_hook(every, [p = &probe](Engine& e) { p->watch(e); });

  // Platform events first: those at time 0 apply before the model starts, and later ones run
  // before the model's events at the same time.
  scheduler_->start();
  model_->start(*env_);
  RunOutput out;
  if (scenario_.run.time_limit) {
    engine_.run_until(*scenario_.run.time_limit);
    out.info.hit_time_limit = engine_.pending_events() > 0;
  } else {
    engine_.run();
  }
  engine_.set_periodic_hook(0, nullptr);
  if (!probe.over_budget.empty()) throw LimitError(probe.over_budget);
  model_->finish(*env_, out.results);
  if (trace_) out.trace = trace_->release_file();
  out.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  auto& info = out.info;
  info.name = scenario_.name;
  info.variant = scenario_.variant;
  info.seed = scenario_.seed;
  info.version = std::string(version());
  info.model = scenario_.model;
  info.backend = scenario_.network.backend;
  info.events_processed = engine_.events_processed();
  info.simulated_time = engine_.now();
  info.network = network_->totals();
  out.resolved_scenario = std::move(resolved_);  // run() runs once: no copy of a large document
  return out;
}

RunOutput run_scenario(const LoadedScenario& scenario, const Registries& registries,
                       const RunOptions& options, const RunBudget& budget) {
  PreparedRun prepared(scenario, registries, budget);
  return prepared.run(options);
}

}  // namespace mlsim
