#include "models/llm_training/chakra_model.hpp"

#ifdef MLSIM_HAVE_CHAKRA
#include "models/llm_training/graph_report.hpp"
#include "models/llm_training/policies.hpp"
#include "sim_core/collectives/read_costs.hpp"
#include "sim_core/run/simulation_model.hpp"
#include "sim_core/workload/chakra/chakra_source.hpp"
#include "sim_core/workload/graph_executor.hpp"

namespace mlsim::llm_training {

namespace {

struct ChakraParams {
  workload::ChakraTraceSpec trace;
  workload::ExecutorOptions executor;
};

class ChakraTrace {
 public:
  ChakraTrace(ModelEnv& env, const ChakraParams& p)
      : params_(p),
        source_(p.trace),
        executor_(env.engine, env.network, env.compute, env.links, source_, p.executor,
                  "workload.ranks") {}
  void start() { executor_.start(); }
  double progress() const { return executor_.progress(); }
  void report(Results& out) const {
    report_graph_run(executor_, source_, 1, out);
    out.details()["communication"] = communication_description(params_.executor.mode);
  }

 private:
  const ChakraParams& params_;
  workload::ChakraSource source_;
  workload::GraphExecutor executor_;
};

}  // namespace

std::unique_ptr<Model> make_chakra_model(ModelSetup& setup) {
  JsonReader system = setup.root.object("system");
  system.ignore("model");
  JsonReader workload = setup.root.object("workload");
  auto p = std::make_shared<ChakraParams>();
  p->executor.mode =
      llm_training_policies().communication.choose_or(system, "communication", "closed_form").value;
  if (std::optional<JsonReader> costs = system.optional_object("costs"))
    p->executor.costs = collectives::read_cost_model(*costs);
  p->trace.prefix = setup.scenario_dir / workload.string("trace");
  p->trace.ranks = static_cast<workload::RankId>(workload.integer("ranks", 1, 1 << 20));
  p->trace.where = workload.path_of("trace");
  if (workload.has("comm_groups"))
    p->trace.groups = workload::read_chakra_groups(
        setup.scenario_dir / workload.string("comm_groups"), workload.path_of("comm_groups"));
  system.finish();
  workload.finish();
  // The trace is read (and checked) by the simulation's constructor, now, at prepare time.
  return std::make_unique<SimulationModel<ChakraTrace>>(
      setup.env, [p](ModelEnv& env) { return std::make_unique<ChakraTrace>(env, *p); });
}

}  // namespace mlsim::llm_training
#endif
