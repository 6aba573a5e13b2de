// The shipped GPT-3 and Llama-2 scenarios in closed form (their default communication) on both
// cores, at a reduced batch: the training core (system.core "training", MegatronCoreJob in
// closed form) gives the execution graph's iteration and per-phase breakdown to the nanosecond,
// with both DP syncs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "models/llm_training/register.hpp"
#include "sim_core/run/runner.hpp"
#include "sim_core/run/scenario.hpp"
#include "tests/support/run_json.hpp"

namespace mlsim {
namespace scenario_closed_form_test {

RunOutput run_scenario_with(const std::string& name, const std::vector<std::string>& sets) {
  ScenarioRequest request{
      std::filesystem::path(MLSIM_SOURCE_DIR) / "workloads/scenarios" / (name + ".json"), {}, {}};
  for (const auto& s : sets) {
    const auto eq = s.find('=');
    request.overrides.push_back(
        {s.substr(0, eq), nlohmann::json::parse(s.substr(eq + 1)), s.substr(0, eq)});
  }
  const Registries r = test::registries_with(register_llm_training);
  return run_scenario(load_scenario(request, r), r);
}

TEST(LlmTrainingClosedForm, TheTrainingCoreGivesTheGraphsClosedForm) {
  struct Setting {
    const char* scenario;
    const char* batch;  // 8 micro-batches per pipeline
    const char* sync;
  };
  for (const Setting& run :
       {Setting{"llm_training_gpt3_1024", "system.global_batch=64", "all_reduce"},
        Setting{"llm_training_gpt3_1024", "system.global_batch=64", "reduce_scatter_all_gather"},
        Setting{"llm_training_llama2_70b_1024", "system.global_batch=128", "all_reduce"}}) {
    auto with = [&](const std::string& core) {
      return run_scenario_with(run.scenario, {run.batch, "system.communication=\"closed_form\"",
                                              "system.core=\"" + core + "\"",
                                              std::string("system.dp_sync=\"") + run.sync + "\""});
    };
    const RunOutput graph = with("graph"), core = with("training");
    const auto& g = graph.results.metrics();
    const auto& c = core.results.metrics();
    const std::string what = std::string(run.scenario) + " " + run.sync;
    EXPECT_EQ(c.at("completed"), 1) << what;
    EXPECT_EQ(c.at("iteration_time_s"), g.at("iteration_time_s")) << what;
    EXPECT_EQ(c.at("dp_bytes_delivered"), 0) << what;  // nothing through the network
    EXPECT_EQ(core.results.details().at("communication"),
              graph.results.details().at("communication"));
    for (const char* name :
         {"compute_s", "exposed_tp_s", "exposed_pp_s", "exposed_dp_s", "critical_rank_compute_s",
          "critical_rank_exposed_tp_s", "critical_rank_exposed_pp_s", "critical_rank_exposed_dp_s",
          "model_tflops_per_gpu", "megatron_tflops_per_gpu"}) {
      EXPECT_EQ(c.at(name), g.at(name)) << name << " " << what;
      EXPECT_GT(c.at(name), 0) << name << " " << what;
    }
    EXPECT_EQ(core.results.details().at("critical_rank"),
              graph.results.details().at("critical_rank"))
        << what;
    // The graph's counts with the same meaning (MegatronCoreJob::counts): nothing through the
    // network in the closed form on either.
    for (const char* name : {"kernels", "collectives", "messages", "network_collectives"})
      EXPECT_EQ(c.at(name), g.at(name)) << name << " " << what;
    EXPECT_EQ(c.at("network_collectives"), 0) << what;
    EXPECT_GT(c.at("collectives"), 0) << what;
  }
}

}  // namespace scenario_closed_form_test
}  // namespace mlsim
