// The shipped serving scenarios load, validate every variant, and run end to end through the
// runner (shortened with overrides so the test stays fast); bad serving sections are InputErrors
// naming the JSON path.
#include <gtest/gtest.h>

#include <fstream>

#include "cli/registry.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/run/runner.hpp"
#include "sim_core/run/scenario.hpp"
#include "test_support.hpp"

using namespace mlsim;

namespace {

std::filesystem::path scenario(const std::string& name) {
  return serving::fixtures::source_dir() / "workloads/scenarios" / name;
}

bool have_traces() {
  return std::filesystem::exists(serving::fixtures::shared_data_dir() / "llm_traces/azure_2023");
}

RunOutput run(const std::string& file, const std::string& variant,
              std::vector<std::pair<std::string, nlohmann::json>> sets) {
  const auto registries = make_registries();
  ScenarioRequest req{scenario(file), variant, {}};
  for (auto& [path, value] : sets) req.overrides.push_back(Override{path, value, "--set " + path});
  const auto loaded = load_scenario(req, registries);
  PreparedRun prepared(loaded, registries);
  return prepared.run();
}

}  // namespace

TEST(ServingScenarios, MfsStudyRunsBothVariantsOnTheSameRequests) {
  if (!have_traces()) GTEST_SKIP() << "Azure traces not found under ../shared/data";
  const std::vector<std::pair<std::string, nlohmann::json>> sets = {
      {"workload.generator.count", 150}};
  const auto mfs = run("mfs_llama2.json", "mfs", sets);
  const auto sep = run("mfs_llama2.json", "separate", sets);
  const auto& m = mfs.results.metrics();
  const auto& s = sep.results.metrics();
  // Prompts drawn at 4096 tokens or more reach Llama-2's context limit and are refused, the same
  // ones in both variants; every other request completes.
  EXPECT_EQ(m.at("serving_requests_rejected_context"), s.at("serving_requests_rejected_context"));
  EXPECT_EQ(m.at("serving_requests_completed") + m.at("serving_requests_rejected_context"), 150);
  EXPECT_EQ(s.at("serving_requests_completed") + s.at("serving_requests_rejected_context"), 150);
  EXPECT_EQ(m.at("serving_tokens_generated"), s.at("serving_tokens_generated"));
  // One copy of the 70B (plus two exit heads of 32000 x 8192 fp16 and their norms) against one
  // copy of each family member.
  const auto c = serving::fixtures::llama2();
  const double head = (32000.0 + 1) * 8192 * 2;
  EXPECT_DOUBLE_EQ(m.at("serving_memory_weights_bytes"),
                   static_cast<double>(c.get("llama-2-70b", "").weight_bytes()) + 2 * head);
  EXPECT_DOUBLE_EQ(s.at("serving_memory_weights_bytes"),
                   static_cast<double>(c.get("llama-2-7b", "").weight_bytes() +
                                       c.get("llama-2-13b", "").weight_bytes() +
                                       c.get("llama-2-70b", "").weight_bytes()));
  std::printf(
      "[mfs study, 150 requests] e2e mean mfs %.3f s separate %.3f s; memory peak mfs %.1f GB "
      "separate %.1f GB\n",
      m.at("serving_e2e_mean_s"), s.at("serving_e2e_mean_s"),
      m.at("serving_memory_peak_bytes") / 1e9, s.at("serving_memory_peak_bytes") / 1e9);
}

TEST(ServingScenarios, AzureTraceScenarioRunsAPrefix) {
  if (!have_traces()) GTEST_SKIP() << "Azure traces not found under ../shared/data";
  for (const char* variant : {"continuous", "chunked_prefill", "static"}) {
    const auto out = run("serving_azure_conv_70b.json", variant, {{"workload.limit", 200}});
    EXPECT_EQ(out.results.metrics().at("serving_requests_completed") +
                  out.results.metrics().at("serving_requests_dropped"),
              200)
        << variant;
    // TP all-reduces are costed by the collective layer's closed form (intra-node NVSwitch, no
    // other traffic), not moved through the network.
    EXPECT_EQ(out.info.network.transfers_delivered, 0u) << variant;
  }
}

TEST(ServingScenarios, TpAllReducesTakeTheHostsIntraNodeLink) {
  // The TP all-reduce's bandwidth is topology.hardware's intra_node link: at a tenth of the A100
  // catalog's 300 GB/s the same requests take longer; the star's own links play no part (a
  // hundredth of their bandwidth changes nothing: serving sends nothing through the network).
  if (!have_traces()) GTEST_SKIP() << "Azure traces not found under ../shared/data";
  const std::vector<std::pair<std::string, nlohmann::json>> small = {
      {"workload.generator.count", 60}};
  auto with = [&](std::vector<std::pair<std::string, nlohmann::json>> sets) {
    sets.insert(sets.end(), small.begin(), small.end());
    return run("mfs_llama2.json", "mfs", std::move(sets))
        .results.metrics()
        .at("serving_e2e_mean_s");
  };
  const double plain = with({});
  EXPECT_GT(with({{"topology.hardware.intra_node.bandwidth", "30GB/s"}}), plain * 1.2);
  EXPECT_EQ(with({{"topology.link.bandwidth", "3GB/s"}}), plain);
}

TEST(ServingScenarios, BadServingSectionsNameTheirPath) {
  if (!have_traces()) GTEST_SKIP() << "Azure traces not found under ../shared/data";
  auto expect_error = [](std::vector<std::pair<std::string, nlohmann::json>> sets,
                         const std::string& path) {
    try {
      (void)run("mfs_llama2.json", "mfs", std::move(sets));
      ADD_FAILURE() << "expected an InputError at " << path;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  };
  expect_error({{"workload.tier_mix", nlohmann::json::array({0.5, 0.2, 0.2})}},
               "workload.tier_mix");
  expect_error({{"system.mfs.tp", 3}}, "system.mfs.tp");
  // No roofline calibration for the 40 GB A100 and no compute.scale_from: "compute".
  expect_error({{"topology.hardware.gpu", "A100-SXM4-40GB"}}, "compute");
  expect_error({{"topology.hardware.gpu", "B200"}}, "topology.hardware.gpu");
  // Two GPU types in one serving deployment: not modelled, said so (two 4-GPU hosts, the second
  // on H100, under the MFS 70B's two replicas of TP 4).
  expect_error({{"topology.hosts", 2},
                {"topology.hardware.gpus_per_host", 4},
                {"system.mfs.tp", 4},
                {"system.mfs.replicas", 2},
                {"topology.hardware.groups",
                 nlohmann::json::parse(R"([{"hosts": [1], "gpu": "H100-SXM5-80GB"}])")}},
               "topology.hardware: a deployment runs one GPU type");
  // Issue 15: a TP group larger than a host takes whole hosts: TP 8 cannot be placed on hosts
  // of 3 GPUs (8 is not a multiple of 3), nor across hosts of different sizes (4 then 8).
  expect_error({{"topology.hosts", 8}, {"topology.hardware.gpus_per_host", 3}},
               "system.mfs.tp: tp 8 is larger than host 0 (3 GPU(s))");
  expect_error({{"topology.hosts", 2},
                {"topology.hardware.gpus_per_host", 4},
                {"topology.hardware.groups",
                 nlohmann::json::parse(R"([{"hosts": [1], "gpus_per_host": 8}])")}},
               "system.mfs.tp: a tensor-parallel group across hosts takes whole hosts of one size");
  expect_error({{"system.gpu", "A100-SXM4-80GB"}}, "system.gpu");  // moved to the topology
  // The fixed per-all-reduce latency moved to the collective layer's costs.
  expect_error({{"system.allreduce_latency", "10us"}}, "system.allreduce_latency: moved");
  expect_error({{"system.costs.lunch", "1us"}}, "system.costs");  // strict, like the layer's
  expect_error({{"system.engine", "tgi"}}, "system.engine");      // not in the catalog
  expect_error({{"system.iteration_overhead", "1ms"}}, "system.iteration_overhead");  // and engine
  expect_error({{"system.mfs.tp", 1}}, "system.mfs: ");  // 70B does not fit one GPU
  expect_error({{"system.family", nlohmann::json::array({"llama-2-7b", "llama-3"})}},
               "system.family[1]");
  expect_error({{"system.mfs.replicas", 2}}, "system.mode");  // 16 GPUs on one 8-GPU host
  // Issue 15: a misspelt generator key is named as unknown, not as the key it should have been.
  expect_error({{"workload.generator.rat", 5}}, "workload.generator.rat: unknown key");
  expect_error(
      {{"workload.generator.prompt_tokens", 100}, {"workload.generator.output_tokens", 10}},
      "workload.generator.lengths_from: give either");
  // Issue 17, defect 8: files named by keys, missing or folders, name the key.
  expect_error({{"system.catalog", "no-such-catalog.json"}}, "system.catalog: model catalog ");
  expect_error({{"system.catalog", "."}}, "is a folder, not a file");
  try {  // a folder as the trace: refused when the scenario is prepared, not when it runs
    const auto registries = make_registries();
    ScenarioRequest req{scenario("serving_azure_conv_70b.json"), "continuous", {}};
    req.overrides.push_back(Override{"workload.trace", ".", "workload.trace"});
    const auto loaded = load_scenario(req, registries);
    PreparedRun prepared(loaded, registries);
    ADD_FAILURE() << "a folder was accepted as the request trace";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("workload.trace: request trace"), std::string::npos)
        << e.what();
  }
}

// A BurstGPT CSV through the scenario (workload.format "burstgpt"), on the Azure scenario's
// Llama-2-70B replica: a hand-written file of five rows (no BurstGPT file is in ../shared/data).
// The 5,000-token prompt is past Llama-2's
// 4,096-token context and refused; the other four complete. A misspelt format is named.
TEST(ServingScenarios, BurstGptTraceRunsThroughTheScenario) {
  if (!have_traces()) GTEST_SKIP() << "Azure traces not found under ../shared/data";
  const auto dir = std::filesystem::temp_directory_path() / "mlsim_burstgpt_scenario";
  std::filesystem::create_directories(dir);
  const auto file = dir / "burst.csv";
  std::ofstream(file) << "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                         "0,ChatGPT,300,20,320,Conversation log\n"
                         "0,ChatGPT,200,10,210,Conversation log\n"
                         "1.5,GPT-4,5000,10,5010,API log\n"
                         "3,ChatGPT,100,0,100,Conversation log\n"
                         "60,GPT-4,50,5,55,API log\n";
  const auto out = run("serving_azure_conv_70b.json", "continuous",
                       {{"workload.trace", file.string()}, {"workload.format", "burstgpt"}});
  const auto& m = out.results.metrics();
  EXPECT_EQ(m.at("serving_requests_completed"), 4);
  EXPECT_EQ(m.at("serving_requests_rejected_context"), 1);
  EXPECT_EQ(m.at("serving_tokens_generated"), 20 + 10 + 1 + 5);
  EXPECT_GT(out.info.simulated_time, Time::s(60));  // the last row arrives at 60 s
  try {
    (void)run("serving_azure_conv_70b.json", "continuous",
              {{"workload.trace", file.string()}, {"workload.format", "burstgtp"}});
    ADD_FAILURE() << "a misspelt format was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "workload.format") << e.what();
  }
  std::filesystem::remove_all(dir);
}

// The shipped prefix-caching study on the first 400 requests of Mooncake's trace: with prefix
// caching the prefill saved is positive and the mean TTFT lower than without; every request
// completes or is refused at the 128k context. Prefix caching needs block ids and one depth.
TEST(ServingScenarios, MooncakePrefixCachingStudy) {
  const auto trace =
      serving::fixtures::shared_data_dir() / "llm_traces/mooncake/synthetic_trace.jsonl";
  if (!std::filesystem::exists(trace)) GTEST_SKIP() << "Mooncake trace not found";
  auto run_study = [](const std::string& variant,
                      std::vector<std::pair<std::string, nlohmann::json>> sets) {
    const auto registries = make_registries();
    ScenarioRequest req{
        serving::fixtures::source_dir() / "workloads/serving/mooncake_prefix_cache.json",
        variant,
        {}};
    sets.emplace_back("workload.limit", 400);
    for (auto& [path, value] : sets) req.overrides.push_back(Override{path, value, path});
    const auto loaded = load_scenario(req, registries);
    PreparedRun prepared(loaded, registries);
    return prepared.run();
  };
  const auto on = run_study("prefix_on", {});
  const auto off = run_study("prefix_off", {});
  const auto& m = on.results.metrics();
  const auto& o = off.results.metrics();
  EXPECT_GT(m.at("serving_prefix_hit_tokens"), 0);
  EXPECT_FALSE(o.contains("serving_prefix_hit_tokens"));
  EXPECT_LT(m.at("serving_ttft_mean_s"), o.at("serving_ttft_mean_s"));
  EXPECT_EQ(m.at("serving_requests_completed") + m.at("serving_requests_rejected_context"), 400);
  EXPECT_EQ(o.at("serving_requests_completed") + o.at("serving_requests_rejected_context"), 400);
  std::printf("[mooncake 400] hit rate %.3f; TTFT mean on %.3f s, off %.3f s\n",
              m.at("serving_prefix_hit_rate"), m.at("serving_ttft_mean_s"),
              o.at("serving_ttft_mean_s"));
  auto expect_error = [&](std::vector<std::pair<std::string, nlohmann::json>> sets,
                          const std::string& path) {
    try {
      (void)run_study("prefix_on", std::move(sets));
      ADD_FAILURE() << "expected an InputError at " << path;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  };
  expect_error({{"workload.format", "azure"}}, "system.prefix_caching: prefix caching needs");
  expect_error({{"system.block_tokens", 48}}, "system.prefix_caching");
}

// A GPU type per deployment (issue 15): the separate study on two 4-GPU hosts (7B TP 2 and 13B
// TP 2 packed on host 0, 70B TP 4 on host 1), host 1 on H100. Only the 70B's requests (tier 2)
// move, and they get faster; the 7B and 13B see the same requests on the same GPUs.
TEST(ServingScenarios, EachDeploymentRunsItsHostsGpu) {
  if (!have_traces()) GTEST_SKIP() << "Azure traces not found under ../shared/data";
  const std::vector<std::pair<std::string, nlohmann::json>> small = {
      {"workload.generator.count", 150},
      {"topology.hosts", 2},
      {"topology.hardware.gpus_per_host", 4}};
  auto with_h100 = small;
  with_h100.emplace_back("topology.hardware.groups",
                         nlohmann::json::parse(R"([{"hosts": [1], "gpu": "H100-SXM5-80GB"}])"));
  const auto het = run("mfs_llama2.json", "separate", with_h100);
  const auto hom = run("mfs_llama2.json", "separate", small);
  const auto& h = het.results.metrics();
  const auto& a = hom.results.metrics();
  EXPECT_EQ(h.at("serving_e2e_mean_tier0_s"), a.at("serving_e2e_mean_tier0_s"));
  EXPECT_EQ(h.at("serving_e2e_mean_tier1_s"), a.at("serving_e2e_mean_tier1_s"));
  EXPECT_LT(h.at("serving_e2e_mean_tier2_s"), a.at("serving_e2e_mean_tier2_s"));
  const auto& replicas = het.results.details().at("serving_replicas");
  EXPECT_EQ(replicas.at(0).at("gpu"), "A100-SXM4-80GB");
  EXPECT_EQ(replicas.at(2).at("gpu"), "H100-SXM5-80GB");
  std::printf("[heterogeneous] 70B tier e2e mean: A100 %.3f s, H100 %.3f s\n",
              a.at("serving_e2e_mean_tier2_s"), h.at("serving_e2e_mean_tier2_s"));
}

// Pipeline parallelism through the scenario (issue 15): Llama-2-70B as two stages of TP 4 on one
// 8-GPU host (activations over its NVLink) and as two stages of TP 8 on two hosts (activations
// through the star's links, which then matter); every request completes either way.
TEST(ServingScenarios, PipelineStagesOnOneHostAndAcrossHosts) {
  if (!have_traces()) GTEST_SKIP() << "Azure traces not found under ../shared/data";
  const std::vector<std::pair<std::string, nlohmann::json>> small = {{"workload.limit", 200}};
  auto with = [&](std::vector<std::pair<std::string, nlohmann::json>> sets) {
    sets.insert(sets.end(), small.begin(), small.end());
    return run("serving_azure_conv_70b.json", "continuous", std::move(sets));
  };
  const auto one_host = with({{"system.separate[0].tp", 4}, {"system.separate[0].pp", 2}});
  const auto two_hosts = with({{"topology.hosts", 2}, {"system.separate[0].pp", 2}});
  const auto slow_fabric = with(
      {{"topology.hosts", 2}, {"system.separate[0].pp", 2}, {"topology.link.bandwidth", "1GB/s"}});
  const auto slow_fabric_one_host = with({{"system.separate[0].tp", 4},
                                          {"system.separate[0].pp", 2},
                                          {"topology.link.bandwidth", "1GB/s"}});
  for (const auto* r : {&one_host, &two_hosts, &slow_fabric}) {
    const auto& m = r->results.metrics();
    // (serving_requests_dropped counts the context refusals too.)
    EXPECT_EQ(m.at("serving_requests_completed") + m.at("serving_requests_dropped"), 200);
    const auto& rep = r->results.details().at("serving_replicas").at(0);
    EXPECT_EQ(rep.at("pp"), 2);
    EXPECT_EQ(rep.at("stage_layers"), nlohmann::json::array({40, 40}));
    EXPECT_GT(rep.at("activation_bytes").get<double>(), 0);
  }
  const auto e2e = [](const RunOutput& r) { return r.results.metrics().at("serving_e2e_mean_s"); };
  EXPECT_GT(e2e(slow_fabric), e2e(two_hosts));
  EXPECT_EQ(e2e(slow_fabric_one_host), e2e(one_host));
  std::printf(
      "[pipeline] 70B mean e2e: pp2 x tp4 one host %.3f s, pp2 x tp8 two hosts %.3f s "
      "(1 GB/s fabric: %.3f s)\n",
      e2e(one_host), e2e(two_hosts), e2e(slow_fabric));
}

TEST(ServingScenarios, BadPipelineKeysNameTheirPath) {
  if (!have_traces()) GTEST_SKIP() << "Azure traces not found under ../shared/data";
  auto expect_error = [](const std::string& file, const std::string& variant,
                         std::vector<std::pair<std::string, nlohmann::json>> sets,
                         const std::string& path) {
    try {
      (void)run(file, variant, std::move(sets));
      ADD_FAILURE() << "expected an InputError at " << path;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  };
  const std::string azure = "serving_azure_conv_70b.json";
  expect_error(azure, "continuous",
               {{"system.separate[0].tp", 4},
                {"system.separate[0].pp", 2},
                {"system.separate[0].stage_layers", nlohmann::json::array({40, 39})}},
               "system.separate[0].stage_layers: expected pp (2) layer counts summing to the 80");
  expect_error(azure, "continuous",
               {{"system.separate[0].stage_layers", nlohmann::json::array({40, 40})}},
               "system.separate[0].stage_layers: expected pp (1)");
  expect_error(azure, "continuous", {{"system.separate[0].pp", 0}}, "system.separate[0].pp");
  expect_error(azure, "continuous", {{"system.separate[0].pp", 2}},
               "system.mode");  // 16 GPUs on one 8-GPU host
  expect_error(azure, "continuous", {{"system.separate[0].ppp", 2}},
               "system.separate[0].ppp: unknown key");
  expect_error("mfs_llama2.json", "mfs", {{"system.mfs.tp", 4}, {"system.mfs.pp", 2}},
               "system.mfs.pp: pipeline stages with MFS tiers");
}

// Prefill/decode disaggregation through the scenario (issue 15): Llama-2-70B as a TP 4 prefill
// replica and a TP 4 decode replica on one 8-GPU host (KV over NVLink), and as TP 8 pools on two
// hosts (KV through the star's links: a slower fabric lengthens the time between tokens, not the
// time to the first one, which the prefill replica samples).
TEST(ServingScenarios, DisaggregatedPoolsOnOneHostAndAcrossHosts) {
  if (!have_traces()) GTEST_SKIP() << "Azure traces not found under ../shared/data";
  auto with = [&](std::vector<std::pair<std::string, nlohmann::json>> sets) {
    sets.emplace_back("workload.limit", 200);
    return run("serving_azure_conv_70b.json", "continuous", std::move(sets));
  };
  const auto pools = [](int tp) {
    return nlohmann::json::array(
        {{{"model", "llama-2-70b"}, {"prefill", {{"tp", tp}}}, {"decode", {{"tp", tp}}}}});
  };
  const auto one_host = with({{"system.separate", pools(4)}});
  const auto two_hosts = with({{"system.separate", pools(8)}, {"topology.hosts", 2}});
  const auto slow = with({{"system.separate", pools(8)},
                          {"topology.hosts", 2},
                          {"topology.link.bandwidth", "10GB/s"}});
  for (const auto* r : {&one_host, &two_hosts, &slow}) {
    const auto& m = r->results.metrics();
    EXPECT_EQ(m.at("serving_requests_completed") + m.at("serving_requests_dropped"), 200);
    // Every completed request with more than one output token moved its KV once.
    EXPECT_GT(m.at("serving_kv_transfer_count"), 150);
    const auto& reps = r->results.details().at("serving_replicas");
    EXPECT_EQ(reps.at(0).at("role"), "prefill");
    EXPECT_EQ(reps.at(1).at("role"), "decode");
  }
  const auto metric = [](const RunOutput& r, const char* k) { return r.results.metrics().at(k); };
  EXPECT_GT(metric(slow, "serving_kv_transfer_mean_s"),
            5 * metric(two_hosts, "serving_kv_transfer_mean_s"));
  EXPECT_GT(metric(slow, "serving_tpot_mean_s"), metric(two_hosts, "serving_tpot_mean_s"));
  EXPECT_EQ(metric(slow, "serving_ttft_mean_s"), metric(two_hosts, "serving_ttft_mean_s"));
  std::printf(
      "[disaggregated] 70B, 200 requests: 1+1 TP4 on one host TTFT %.3f s TPOT %.4f s "
      "KV transfer mean %.2f ms; 1+1 TP8 on two hosts TTFT %.3f s TPOT %.4f s KV %.2f ms "
      "(10 GB/s fabric: KV %.2f ms)\n",
      metric(one_host, "serving_ttft_mean_s"), metric(one_host, "serving_tpot_mean_s"),
      1e3 * metric(one_host, "serving_kv_transfer_mean_s"),
      metric(two_hosts, "serving_ttft_mean_s"), metric(two_hosts, "serving_tpot_mean_s"),
      1e3 * metric(two_hosts, "serving_kv_transfer_mean_s"),
      1e3 * metric(slow, "serving_kv_transfer_mean_s"));
}

TEST(ServingScenarios, BadDisaggregationKeysNameTheirPath) {
  if (!have_traces()) GTEST_SKIP() << "Azure traces not found under ../shared/data";
  auto expect_error = [](nlohmann::json separate, const std::string& path) {
    try {
      (void)run("serving_azure_conv_70b.json", "continuous", {{"system.separate", separate}});
      ADD_FAILURE() << "expected an InputError at " << path;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  };
  auto j = [](const char* text) { return nlohmann::json::parse(text); };
  expect_error(
      j(R"([{"model": "llama-2-70b", "tp": 4, "prefill": {"tp": 4}, "decode": {"tp": 4}}])"),
      "system.separate[0].tp: a disaggregated deployment gives tp and replicas per pool");
  expect_error(j(R"([{"model": "llama-2-70b", "prefill": {"tp": 4}}])"),
               "system.separate[0].decode");
  expect_error(
      j(R"([{"model": "llama-2-70b", "prefill": {"tp": 4}, "decode": {"tp": 4, "pp": 2}}])"),
      "system.separate[0].decode.pp: pipeline stages in a disaggregated pool");
  expect_error(
      j(R"([{"model": "llama-2-70b", "prefill": {"tp": 4}, "decode": {"tp": 4, "tpp": 2}}])"),
      "system.separate[0].decode.tpp: unknown key");
  expect_error(j(R"([{"model": "llama-2-70b", "prefill": {"tp": 8}, "decode": {"tp": 8}}])"),
               "system.mode");  // 16 GPUs on one 8-GPU host
}

// The shipped colocated-vs-disaggregated study (workloads/serving/pd_disaggregation.json) on the
// first 300 requests: every variant runs, every request completes or is refused, and the pooled
// variants move one KV cache per request with more than one output token.
TEST(ServingScenarios, DisaggregationStudyRunsEveryVariant) {
  if (!have_traces()) GTEST_SKIP() << "Azure traces not found under ../shared/data";
  for (const char* variant : {"colocated", "colocated_chunked", "pd_1p3d", "pd_2p2d", "pd_3p1d"}) {
    const auto registries = make_registries();
    ScenarioRequest req{
        serving::fixtures::source_dir() / "workloads/serving/pd_disaggregation.json", variant, {}};
    req.overrides.push_back(Override{"workload.limit", 300, "workload.limit"});
    const auto loaded = load_scenario(req, registries);
    PreparedRun prepared(loaded, registries);
    const auto out = prepared.run();
    const auto& m = out.results.metrics();
    EXPECT_EQ(m.at("serving_requests_completed") + m.at("serving_requests_dropped"), 300)
        << variant;
    if (std::string(variant).starts_with("pd_")) {
      EXPECT_EQ(m.at("serving_kv_transfer_count"),
                m.at("serving_requests_completed") - m.at("serving_requests_tpot_undefined"))
          << variant;
    }
  }
}

// Mixture of experts through the scenario (issue 15): the shipped Mixtral study
// (workloads/serving/moe_mixtral.json) on the first 300 Azure conversation requests. Expert
// parallelism sends all-to-all bytes (experts split by tensor parallelism send none); a busiest
// GPU with twice the mean expert load makes every token slower; bad keys name their path.
TEST(ServingScenarios, MixtralExpertParallelism) {
  if (!have_traces()) GTEST_SKIP() << "Azure traces not found under ../shared/data";
  const std::string file = "../serving/moe_mixtral.json";
  const std::vector<std::pair<std::string, nlohmann::json>> first300 = {{"workload.limit", 300}};
  const auto ep2 = run(file, "tp2_ep2", first300);
  const auto ep1 = run(file, "tp2_ep1", first300);
  const auto skewed = run(file, "tp2_ep2_imbalance_2", first300);
  for (const auto* out : {&ep2, &ep1, &skewed})
    EXPECT_EQ(out->results.metrics().at("serving_requests_completed"), 300);
  const auto& r2 = ep2.results.details().at("serving_replicas").at(0);
  EXPECT_EQ(r2.at("ep"), 2);
  EXPECT_GT(r2.at("alltoall_bytes").get<double>(), 0);
  EXPECT_EQ(ep1.results.details().at("serving_replicas").at(0).at("alltoall_bytes"), 0);
  EXPECT_GT(skewed.results.metrics().at("serving_tpot_mean_s"),
            ep2.results.metrics().at("serving_tpot_mean_s"));
  std::printf(
      "[mixtral tp2, 300 requests] TPOT mean ep1 %.2f ms, ep2 %.2f ms, ep2 x2 skew %.2f ms\n",
      1e3 * ep1.results.metrics().at("serving_tpot_mean_s"),
      1e3 * ep2.results.metrics().at("serving_tpot_mean_s"),
      1e3 * skewed.results.metrics().at("serving_tpot_mean_s"));
  auto expect_error = [&](std::vector<std::pair<std::string, nlohmann::json>> sets,
                          const std::string& path) {
    try {
      (void)run(file, "tp2_ep2", std::move(sets));
      ADD_FAILURE() << "expected an InputError at " << path;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  };
  expect_error({{"system.separate[0].tp", 4}}, "system.separate[0].ep: ep 2 must be 1");
  expect_error({{"system.separate[0].expert_imbalance", 0.5}},
               "system.separate[0].expert_imbalance");
  expect_error({{"system.family", nlohmann::json::array({"llama-2-7b"})},
                {"system.separate[0].model", "llama-2-7b"}},
               "system.separate[0].ep: llama-2-7b is not a mixture-of-experts model");
}

// More GPUs than KV heads (issue 15): Llama-2-70B (64 heads, 8 KV heads of 128) at TP 16 on two
// 8-GPU hosts, each KV head replicated on two GPUs as vLLM does (QKVParallelLinear). By hand, the
// replica then holds the model with 16 KV heads: per layer 8192 x (8192 + 2 x 2048) + 8192^2
// attention + 3 x 8192 x 28672 MLP + 2 x 8192 norms = 872,431,616 parameters, x 80 layers +
// 2 x 32000 x 8192 + 8192 = 70,318,825,472 parameters, 140,637,650,944 B in fp16: the catalog's
// 137,953,296,384 B plus 80 x 2 x 8192 x 1024 x 2 B = 2,684,354,560 B of replicated K/V
// projections. KV per token: 80 layers x 2 x 16 x 128 x 2 B = 655,360 B (twice the unique KV).
// KV pool: 0.9 x 80 GiB x 16 GPUs = 1,236,950,581,248 B less the weights = 1,096,312,930,304 B,
// in layer-blocks of 16 tokens x 8,192 B (16 KV heads x 128 x 2 x 2 B): 8,364,203 blocks =
// 1,096,312,815,616 B (without the replication, 4,096 B a token-layer and the catalog's weights:
// 1,098,997,235,712 B). TP 12 does not divide the 64 heads: refused at the deployment's tp.
TEST(ServingScenarios, TensorParallelBeyondTheKvHeadsReplicatesThem) {
  if (!have_traces()) GTEST_SKIP() << "Azure traces not found under ../shared/data";
  const std::vector<std::pair<std::string, nlohmann::json>> tp16 = {
      {"workload.limit", 50}, {"topology.hosts", 2}, {"system.separate[0].tp", 16}};
  const auto out = run("serving_azure_conv_70b.json", "continuous", tp16);
  const auto& m = out.results.metrics();
  EXPECT_EQ(m.at("serving_requests_completed") + m.at("serving_requests_rejected_context"), 50);
  EXPECT_DOUBLE_EQ(m.at("serving_memory_weights_bytes"), 140'637'650'944.0);
  const auto& r = out.results.details().at("serving_replicas").at(0);
  EXPECT_EQ(r.at("tp"), 16);
  EXPECT_EQ(r.at("kv_head_replicas"), 2);
  EXPECT_EQ(r.at("hosts").size(), 2u);
  const double capacity = r.at("kv_capacity_bytes").get<double>();
  EXPECT_DOUBLE_EQ(capacity, 1'096'312'815'616.0);
  const auto tp8 = run("serving_azure_conv_70b.json", "continuous", {{"workload.limit", 50}});
  EXPECT_FALSE(tp8.results.details().at("serving_replicas").at(0).contains("kv_head_replicas"));
  std::printf("[70b tp16, 50 requests] e2e mean %.3f s (tp 8: %.3f s); KV capacity %.1f GB\n",
              m.at("serving_e2e_mean_s"), tp8.results.metrics().at("serving_e2e_mean_s"),
              capacity / 1e9);
  try {
    (void)run("serving_azure_conv_70b.json", "continuous",
              {{"workload.limit", 5}, {"topology.hosts", 2}, {"system.separate[0].tp", 12}});
    ADD_FAILURE() << "tp 12 was accepted for 64 heads";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "system.separate[0].tp") << e.what();
  }
}

// A TP group across hosts through the scenario (issue 15): Llama-2-70B at TP 8 as one 8-GPU host
// and as two 4-GPU hosts (the group on both, its all-reduces over the star's links shared by the
// four GPUs of a host). The replica names both hosts; the slower the links, the slower the
// requests, where the one-host group does not move with them.
TEST(ServingScenarios, TensorParallelGroupAcrossHosts) {
  if (!have_traces()) GTEST_SKIP() << "Azure traces not found under ../shared/data";
  auto with = [&](std::vector<std::pair<std::string, nlohmann::json>> sets) {
    sets.emplace_back("workload.limit", 100);
    return run("serving_azure_conv_70b.json", "continuous", std::move(sets));
  };
  const std::vector<std::pair<std::string, nlohmann::json>> two_hosts = {
      {"topology.hosts", 2}, {"topology.hardware.gpus_per_host", 4}};
  auto slow = two_hosts;
  slow.emplace_back("topology.link.bandwidth", "10GB/s");
  const auto one = with({});
  const auto two = with(two_hosts);
  const auto two_slow = with(slow);
  // The same slowdown as a link event at 0 s (the events section reaches the group's route), and
  // at 5 s (part of the run at the first speed).
  auto event_at = [&](const char* at) {
    auto sets = two_hosts;
    sets.emplace_back(
        "events",
        nlohmann::json{{"list", {{{"at", at}, {"all_links", true}, {"bandwidth", "10GB/s"}}}}});
    return with(std::move(sets));
  };
  const auto two_event_0 = event_at("0s");
  const auto two_event_5 = event_at("5s");
  auto one_slow_sets =
      std::vector<std::pair<std::string, nlohmann::json>>{{"topology.link.bandwidth", "10GB/s"}};
  const auto one_slow = with(one_slow_sets);
  for (const auto* out : {&one, &two, &two_slow})
    EXPECT_EQ(out->results.metrics().at("serving_requests_completed") +
                  out->results.metrics().at("serving_requests_dropped"),
              100);
  EXPECT_EQ(one.results.details().at("serving_replicas").at(0).at("hosts").size(), 1u);
  EXPECT_EQ(two.results.details().at("serving_replicas").at(0).at("hosts").size(), 2u);
  const auto e2e = [](const auto& out) { return out.results.metrics().at("serving_e2e_mean_s"); };
  EXPECT_GT(e2e(two), e2e(one));
  EXPECT_GT(e2e(two_slow), e2e(two));
  EXPECT_EQ(e2e(one_slow), e2e(one));
  EXPECT_EQ(e2e(two_event_0), e2e(two_slow));
  EXPECT_GT(e2e(two_event_5), e2e(two));
  EXPECT_LT(e2e(two_event_5), e2e(two_slow));
  std::printf(
      "[70B TP 8, 100 requests] e2e mean: one host %.3f s, two 4-GPU hosts %.3f s, at 10 GB/s "
      "links %.3f s, slowed to 10 GB/s by an event at 0 s %.3f s, at 5 s %.3f s\n",
      e2e(one), e2e(two), e2e(two_slow), e2e(two_event_0), e2e(two_event_5));
}

// MoE capacity factor and expert parallelism across hosts through the scenario (issue 15): the
// Mixtral study's TP 8 EP 8 replica on its first 300 requests. At capacity factor 1 a uniform
// router overflows some experts in every batch; at 2 far fewer; dropless reports nothing. EP 8
// on two 4-GPU hosts sends the all-to-alls over the star's links.
TEST(ServingScenarios, MixtralCapacityFactorAndExpertParallelAcrossHosts) {
  if (!have_traces()) GTEST_SKIP() << "Azure traces not found under ../shared/data";
  const std::string file = "../serving/moe_mixtral.json";
  const std::vector<std::pair<std::string, nlohmann::json>> first300 = {{"workload.limit", 300}};
  const auto dropless = run(file, "tp8_ep8", first300);
  const auto cf1 = run(file, "tp8_ep8_capacity_1", first300);
  const auto cf2 = run(file, "tp8_ep8_capacity_2", first300);
  const auto across = run(file, "tp8_ep8_two_hosts", first300);
  EXPECT_EQ(dropless.results.metrics().count("serving_moe_drop_fraction"), 0u);
  const double f1 = cf1.results.metrics().at("serving_moe_drop_fraction");
  const double f2 = cf2.results.metrics().at("serving_moe_drop_fraction");
  EXPECT_GT(f1, 0.0);
  EXPECT_LT(f2, f1);
  EXPECT_EQ(cf1.results.details().at("serving_replicas").at(0).at("capacity_factor"), 1.0);
  // The same seed draws the same routing: the drops repeat exactly.
  EXPECT_EQ(
      run(file, "tp8_ep8_capacity_1", first300).results.metrics().at("serving_moe_dropped_pairs"),
      cf1.results.metrics().at("serving_moe_dropped_pairs"));
  EXPECT_EQ(across.results.details().at("serving_replicas").at(0).at("hosts").size(), 2u);
  EXPECT_GT(across.results.metrics().at("serving_tpot_mean_s"),
            dropless.results.metrics().at("serving_tpot_mean_s"));
  std::printf(
      "[mixtral tp8 ep8, 300 requests] drop fraction cf 1 %.4f, cf 2 %.4f; TPOT mean one host "
      "%.2f ms, two hosts %.2f ms\n",
      f1, f2, 1e3 * dropless.results.metrics().at("serving_tpot_mean_s"),
      1e3 * across.results.metrics().at("serving_tpot_mean_s"));
  try {
    (void)run(file, "tp8_ep8_capacity_1",
              {{"workload.limit", 10}, {"system.separate[0].expert_imbalance", 1.5}});
    ADD_FAILURE() << "expected an InputError at capacity_factor";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("system.separate[0].capacity_factor"), std::string::npos)
        << e.what();
  }
}
