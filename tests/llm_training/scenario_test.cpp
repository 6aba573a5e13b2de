// The llm_training model through the whole loader and runner: the shipped GPT-3 scenario at a
// reduced batch, its symmetry and communication modes, and input errors at prepare time.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "models/llm_training/llm_training_model.hpp"
#include "models/llm_training/policies.hpp"
#include "models/llm_training/register.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/run/runner.hpp"
#include "sim_core/run/scenario.hpp"
#include "tests/support/run_json.hpp"

namespace mlsim {
namespace {

using llm_training::choose_core;
using llm_training::Core;
using llm_training::CoreChoice;

const std::filesystem::path kGpt3 =
    std::filesystem::path(MLSIM_SOURCE_DIR) / "workloads/scenarios/llm_training_gpt3_1024.json";

Registries registries() {
  return test::registries_with(register_llm_training);
}

RunOutput run_gpt3(std::vector<std::string> sets) {
  ScenarioRequest request{kGpt3, {}, {}};
  for (const auto& s : sets) {
    const auto eq = s.find('=');
    request.overrides.push_back(
        {s.substr(0, eq), nlohmann::json::parse(s.substr(eq + 1)), s.substr(0, eq)});
  }
  const Registries r = registries();
  return run_scenario(load_scenario(request, r), r);
}

double metric(const RunOutput& o, const std::string& name) {
  return o.results.metrics().at(name);
}

// The graph's counts the core reports with the same meaning (MegatronCoreJob::counts): equal on
// both cores, and not trivially.
void expect_same_counts(const RunOutput& core, const RunOutput& graph, const std::string& what) {
  for (const char* name : {"kernels", "collectives", "messages"}) {
    EXPECT_EQ(metric(core, name), metric(graph, name)) << name << " " << what;
    EXPECT_GT(metric(core, name), 0) << name << " " << what;
  }
  EXPECT_EQ(metric(core, "network_collectives"), metric(graph, "network_collectives")) << what;
  EXPECT_GT(metric(core, "ops"), 0) << what;
  EXPECT_EQ(core.results.metrics().count("nodes"), 0u) << what;  // no graph on the core
  EXPECT_GT(metric(graph, "nodes"), metric(graph, "kernels")) << what;
}

// The InputError's message of a run with these overrides, or "no error".
std::string input_error(std::vector<std::string> sets) {
  try {
    run_gpt3(std::move(sets));
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(LlmTrainingScenario, Gpt3OnAThousandGpusRunsAndItsPhasesAddUp) {
  // 128 sequences over DP 8: 16 micro-batches per pipeline (the shipped 1536 gives 192). On the
  // default core (the training core, "auto") and on the graph.
  for (const char* core : {"auto", "graph"}) {
    SCOPED_TRACE(core);
    const RunOutput o =
        run_gpt3({"system.global_batch=128", std::string("system.core=\"") + core + "\""});
    EXPECT_EQ(metric(o, "completed"), 1);
    const double t = metric(o, "iteration_time_s");
    // Per rank, compute + exposed phases = the rank's finish; the critical rank ends the
    // iteration.
    const double critical =
        metric(o, "critical_rank_compute_s") + metric(o, "critical_rank_exposed_tp_s") +
        metric(o, "critical_rank_exposed_pp_s") + metric(o, "critical_rank_exposed_dp_s");
    EXPECT_NEAR(critical, t, 1e-9 * t);
    // 1F1B's bubble: with M = 16 and PP = 16, the first stage (which ends the iteration) idles
    // (PP-1)/(M+PP-1) = 15/31 of the pipeline's time waiting for its neighbours, at least (the
    // messages add to it); later stages start later and end earlier, so idle less.
    const double pipeline = t - metric(o, "critical_rank_exposed_dp_s");
    EXPECT_GE(metric(o, "critical_rank_exposed_pp_s"), 15.0 / 31.0 * pipeline);
    EXPECT_LT(metric(o, "exposed_pp_s"), metric(o, "critical_rank_exposed_pp_s"));
    EXPECT_EQ(metric(o, "gpus"), 1024);
    const auto& layout = o.results.details().at("layout");
    if (std::string(core) == "graph") {
      EXPECT_EQ(layout.at("graph_ranks"), 128);
      EXPECT_EQ(o.results.details().at("core"), "graph");
    } else {
      EXPECT_EQ(layout.at("core_workers"), 128);
      EXPECT_EQ(o.results.details().at("core"), "training");
    }
  }
}

TEST(LlmTrainingScenario, SymmetryAndCommunicationModesAgree) {
  // Collapsing each TP group into one rank changes the rank count, not the times (closed form),
  // on the default core (the training core, which runs TP not collapsed in the closed form since
  // 2026-12-07) and on the graph.
  const RunOutput a = run_gpt3({"system.global_batch=64"});
  const RunOutput b = run_gpt3({"system.global_batch=64", "system.collapse_tensor_parallel=false"});
  const RunOutput g = run_gpt3(
      {"system.global_batch=64", "system.collapse_tensor_parallel=false", "system.core=\"graph\""});
  EXPECT_NEAR(metric(a, "iteration_time_s"), metric(b, "iteration_time_s"), 1e-9);
  EXPECT_NEAR(metric(g, "iteration_time_s"), metric(b, "iteration_time_s"), 1e-9);
  EXPECT_EQ(a.results.details().at("core"), "training");
  EXPECT_EQ(b.results.details().at("core"), "training");
  EXPECT_EQ(b.results.details().at("layout").at("core_workers"), 1024);
  EXPECT_EQ(g.results.details().at("layout").at("graph_ranks"), 1024);
  // Through the network (1:1 leaf-spine, one NIC's share per GPU) the bytes meet no more
  // contention than the closed form assumes, except where ECMP puts two flows on one uplink:
  // within 1%.
  const RunOutput n = run_gpt3({"system.global_batch=64", "system.communication=\"network\""});
  EXPECT_GT(metric(n, "network_collectives"), 0);
  EXPECT_EQ(metric(a, "network_collectives"), 0);
  EXPECT_NEAR(metric(n, "iteration_time_s"), metric(a, "iteration_time_s"),
              0.01 * metric(a, "iteration_time_s"));
}

TEST(LlmTrainingScenario, SameScenarioSameResults) {
  for (const char* core : {"auto", "graph"}) {
    const std::vector<std::string> sets = {"system.global_batch=64",
                                           "system.communication=\"network\"",
                                           std::string("system.core=\"") + core + "\""};
    EXPECT_EQ(run_gpt3(sets).results.metrics(), run_gpt3(sets).results.metrics()) << core;
  }
}

// The default core ("auto"): the training core whenever nothing it cannot run is found, named in
// details.core; otherwise the graph, with the core's reason in details.core_fallback (the one
// reason "training" would throw at system.core). Since every TP layout the graph runs moved onto
// the core (core_tp_layouts_test.cpp), llm_training's auto no longer falls back on a layout: the
// two that did (two TP groups of 4 on each 8-GPU host; TP not collapsed in the closed form) now
// take the core, and the one combination the core refuses needs an option of the core
// (core_op_steps "merged"), which is an error with a layout the core cannot run. So the fallback
// is checked on choose_core itself and, on a run, by the cluster's Megatron jobs
// (MegatronJobs.OnTheTrainingCoreAJobAloneTakesTheGraphsTime).
TEST(LlmTrainingScenario, TheDefaultCoreFallsBackToTheGraphAndSaysWhy) {
  const RunOutput core = run_gpt3({"system.global_batch=64"});
  EXPECT_EQ(core.results.details().at("core"), "training");
  EXPECT_EQ(core.results.details().at("core_requested"), "auto");
  EXPECT_FALSE(core.results.details().contains("core_fallback"));
  const RunOutput graph = run_gpt3({"system.global_batch=64", "system.core=\"graph\""});
  EXPECT_EQ(graph.results.details().at("core"), "graph");
  EXPECT_EQ(graph.results.details().at("core_requested"), "graph");
  EXPECT_FALSE(graph.results.details().contains("core_fallback"));
  for (const std::vector<std::string>& sets :
       {std::vector<std::string>{"system.global_batch=64", "system.tp=4"},
        std::vector<std::string>{"system.global_batch=64",
                                 "system.collapse_tensor_parallel=false"}}) {
    const RunOutput o = run_gpt3(sets);
    EXPECT_EQ(metric(o, "completed"), 1) << sets[1];
    EXPECT_EQ(o.results.details().at("core"), "training") << sets[1];
    EXPECT_FALSE(o.results.details().contains("core_fallback")) << sets[1];
  }
  // choose_core: auto takes the training core unless there is a reason, then the graph and the
  // reason; training throws the reason at the path; graph never asks.
  const CoreChoice runs = choose_core(Core::kAuto, std::nullopt, "system.core");
  EXPECT_EQ(runs.core, Core::kTraining);
  EXPECT_FALSE(runs.fallback.has_value());
  const CoreChoice falls = choose_core(Core::kAuto, std::string("a reason"), "system.core");
  EXPECT_EQ(falls.core, Core::kGraph);
  EXPECT_EQ(falls.fallback, std::optional<std::string>("a reason"));
  EXPECT_EQ(choose_core(Core::kGraph, std::string("a reason"), "system.core").core, Core::kGraph);
  try {
    choose_core(Core::kTraining, std::string("a reason"), "system.core");
    ADD_FAILURE() << "the training core asked for with a reason must throw";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("system.core"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("a reason"), std::string::npos) << e.what();
  }
}

TEST(LlmTrainingScenario, InputErrorsNameTheirPathAtPrepareTime) {
  EXPECT_NE(input_error({"system.pp=5"}).find("system.pp"), std::string::npos);
  EXPECT_NE(input_error({"system.global_batch=100"}).find("system.global_batch"),
            std::string::npos);
  EXPECT_NE(input_error({"workload.model.sequence=0"}).find("workload.model.sequence"),
            std::string::npos);
  EXPECT_NE(input_error({"system.unknown=1"}).find("system.unknown"), std::string::npos);
  EXPECT_NE(input_error({"system.dp=9", "system.global_batch=1152"}).find("system.tp"),
            std::string::npos);  // 1152 > 1024 GPUs
}

// system.core "training": the same iteration as a job on the training core
// (megatron_core_job.hpp), equal to the graph's to the nanosecond on the shipped GPT-3 scenario
// (NCCL costs, roofline operators, PP 16, 64 sequences): with one spine (no route has an ECMP
// choice) and with the shipped eight, where the core labels its messages and DP rings as the
// graph does (sim_core/workload/flow_labels.hpp), so messages crossing leaves take the same
// uplinks on both.
TEST(LlmTrainingScenario, TheTrainingCoreGivesTheGraphsIteration) {
  for (const bool one_spine : {true, false}) {
    std::vector<std::string> sets = {"system.global_batch=64", "system.communication=\"network\""};
    if (one_spine) sets.push_back("topology.spines=1");
    auto with = [&](const std::string& core) {
      auto s = sets;
      s.push_back("system.core=\"" + core + "\"");
      return run_gpt3(s);
    };
    const RunOutput graph = with("graph"), core = with("training");
    EXPECT_EQ(metric(core, "completed"), 1);
    EXPECT_EQ(metric(core, "iteration_time_s"), metric(graph, "iteration_time_s")) << one_spine;
    EXPECT_EQ(core.results.details().at("core"), "training");
    // 16 stages x 8 DP pipelines of 8 micro-batches: 2 x 15 boundaries x 8 messages each.
    EXPECT_EQ(metric(core, "messages"), 2 * 15 * 8 * 8);
    // The per-phase breakdown, computed the same way on both (docs/llm_training.md, "Exposure,
    // defined"): equal, and not trivially (TP 8, 16 stages, DP 8 all expose some time).
    for (const char* name : {"compute_s", "exposed_tp_s", "exposed_pp_s", "exposed_dp_s",
                             "critical_rank_compute_s", "critical_rank_exposed_tp_s",
                             "critical_rank_exposed_pp_s", "critical_rank_exposed_dp_s"}) {
      EXPECT_EQ(metric(core, name), metric(graph, name)) << name << " " << one_spine;
      EXPECT_GT(metric(core, name), 0) << name;
    }
    EXPECT_EQ(core.results.details().at("critical_rank"),
              graph.results.details().at("critical_rank"));
  }
}

TEST(LlmTrainingScenario, TheTrainingCoresInputErrorsNameTheirPath) {
  EXPECT_NE(input_error({"system.core=\"tree\""}).find("system.core"), std::string::npos);
  // The core's options are errors on the graph, asked for by name ...
  EXPECT_NE(input_error({"system.core=\"graph\"", "system.stage_as_one_tensor=false"})
                .find("system.stage_as_one_tensor"),
            std::string::npos);
  EXPECT_NE(input_error({"system.core=\"graph\"", "system.core_op_steps=\"merged\""})
                .find("system.core_op_steps"),
            std::string::npos);
  // ... and taken by the default core, which runs the shipped layout.
  EXPECT_EQ(input_error({"system.global_batch=64", "system.core_op_steps=\"merged\""}), "no error");
  EXPECT_NE(input_error({"system.core=\"training\"", "system.communication=\"network\"",
                         "system.core_op_steps=\"fused\""})
                .find("system.core_op_steps"),
            std::string::npos);
  EXPECT_EQ(input_error({"system.core=\"training\"", "system.communication=\"network\"",
                         "system.global_batch=64", "system.stage_as_one_tensor=false"}),
            "no error");
  // TP not collapsed runs on the core (since 2026-12-07; it was refused at system.core), in both
  // modes (the closed form since 2026-12-07 too).
  for (const char* mode : {"\"network\"", "\"closed_form\""})
    EXPECT_EQ(input_error({"system.core=\"training\"", std::string("system.communication=") + mode,
                           "system.global_batch=64", "system.collapse_tensor_parallel=false"}),
              "no error")
        << mode;
  // Two TP groups of 4 on an 8-GPU host run on the core (since 2026-12-07), collapsed or not: in
  // the closed form at DP 8 (each stage's DP group on four hosts, two GPUs on each) and through
  // the network at DP 2 (each DP group inside one host). Through the network at DP 8 both cores
  // refuse it at system.tp: the network carries no bytes between the GPUs of a host.
  for (const char* collapse : {"true", "false"}) {
    const std::string c = std::string("system.collapse_tensor_parallel=") + collapse;
    EXPECT_EQ(input_error({"system.core=\"training\"", "system.communication=\"closed_form\"",
                           "system.global_batch=64", "system.tp=4", c}),
              "no error")
        << collapse;
    EXPECT_EQ(input_error({"system.core=\"training\"", "system.communication=\"network\"",
                           "system.global_batch=64", "system.tp=4", "system.dp=2", c}),
              "no error")
        << collapse;
    for (const char* core : {"\"training\"", "\"graph\""}) {
      const std::string e =
          input_error({std::string("system.core=") + core, "system.communication=\"network\"",
                       "system.global_batch=64", "system.tp=4", c});
      EXPECT_NE(e.find("system.tp"), std::string::npos) << collapse << core << e;
      EXPECT_NE(e.find("several GPUs on one host"), std::string::npos) << collapse << core << e;
    }
  }
  // A TP group of 2 over two one-GPU hosts runs on the core when not collapsed (since
  // 2026-12-07; the graph runs its all-reduces through the network, and so does the core);
  // collapsed, a rank of width 2 cannot span hosts on either (system.tp). Still refused at
  // system.core: merged op steps with it through the network (its all-reduces are network
  // collectives, not one step).
  const std::vector<std::string> spanning = {"system.core=\"training\"",
                                             "system.communication=\"network\"",
                                             "system.global_batch=64",
                                             "system.tp=2",
                                             "system.dp=4",
                                             "topology.hardware.gpus_per_host=1"};
  auto with = [&](std::vector<std::string> more) {
    auto s = spanning;
    s.insert(s.end(), more.begin(), more.end());
    return input_error(s);
  };
  EXPECT_EQ(with({"system.collapse_tensor_parallel=false"}), "no error");
  EXPECT_NE(with({"system.collapse_tensor_parallel=true"}).find("system.tp"), std::string::npos);
  const std::string merged =
      with({"system.collapse_tensor_parallel=false", "system.core_op_steps=\"merged\""});
  EXPECT_NE(merged.find("system.core:"), std::string::npos) << merged;
  EXPECT_NE(merged.find("core_op_steps"), std::string::npos) << merged;
  EXPECT_EQ(with({"system.collapse_tensor_parallel=false", "system.core_op_steps=\"merged\"",
                  "system.communication=\"closed_form\""}),
            "no error");
}

// TP not collapsed (every GPU its own rank, 1024 of them) on both cores: the shipped GPT-3
// scenario at 64 sequences through the network, with one spine and with the shipped eight. The
// core's TP all-reduces are rendezvous among the group's eight workers, its messages and DP
// rings one per GPU with the graph's labels: the same iteration and per-phase exposure to the
// last digit.
TEST(LlmTrainingScenario, TheTrainingCoreGivesTheGraphsIterationWithTensorParallelNotCollapsed) {
  for (const bool one_spine : {true, false}) {
    std::vector<std::string> sets = {"system.global_batch=64", "system.communication=\"network\"",
                                     "system.collapse_tensor_parallel=false"};
    if (one_spine) sets.push_back("topology.spines=1");
    auto with = [&](const std::string& core) {
      auto s = sets;
      s.push_back("system.core=\"" + core + "\"");
      return run_gpt3(s);
    };
    const RunOutput graph = with("graph"), core = with("training");
    EXPECT_EQ(metric(core, "completed"), 1);
    EXPECT_EQ(metric(core, "iteration_time_s"), metric(graph, "iteration_time_s")) << one_spine;
    EXPECT_EQ(core.results.details().at("layout").at("core_workers"), 1024);
    // 16 stages x 8 DP pipelines x 8 TP ranks of 8 micro-batches: 2 x 15 boundaries.
    EXPECT_EQ(metric(core, "messages"), 2 * 15 * 8 * 8 * 8);
    for (const char* name :
         {"compute_s", "exposed_tp_s", "exposed_pp_s", "exposed_dp_s", "critical_rank_compute_s",
          "critical_rank_exposed_tp_s", "critical_rank_exposed_pp_s", "critical_rank_exposed_dp_s"})
      EXPECT_EQ(metric(core, name), metric(graph, name)) << name << " " << one_spine;
    EXPECT_EQ(core.results.details().at("critical_rank"),
              graph.results.details().at("critical_rank"));
    expect_same_counts(core, graph, "not collapsed");
  }
}

// The distributed optimizer (dp_sync "reduce_scatter_all_gather") on both cores: the shipped
// GPT-3 scenario as above (one spine, 64 sequences). The core's strategy
// (models/training/reduce_scatter_all_gather_sync.hpp) runs each stage's ring reduce-scatter and
// then its all-gather, as the graph's two collective nodes, so the iterations are equal to the
// nanosecond; the distributed optimizer pays one more collective launch per stage than the
// all-reduce, so its iteration is not shorter.
TEST(LlmTrainingScenario, TheTrainingCoreGivesTheGraphsIterationWithTheDistributedOptimizer) {
  auto with = [](const std::string& core, const std::string& sync) {
    return run_gpt3({"system.global_batch=64", "system.communication=\"network\"",
                     "topology.spines=1", "system.core=\"" + core + "\"",
                     "system.dp_sync=\"" + sync + "\""});
  };
  const RunOutput graph = with("graph", "reduce_scatter_all_gather");
  const RunOutput core = with("training", "reduce_scatter_all_gather");
  EXPECT_EQ(metric(core, "completed"), 1);
  EXPECT_EQ(metric(core, "iteration_time_s"), metric(graph, "iteration_time_s"));
  expect_same_counts(core, graph, "distributed optimizer");
  EXPECT_GE(metric(core, "iteration_time_s"),
            metric(with("training", "all_reduce"), "iteration_time_s"));
}

}  // namespace
}  // namespace mlsim
