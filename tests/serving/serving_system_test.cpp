// Issue 15's defects, each worked by hand through the serving system or the replica: a burst of
// requests at one instant is batched together (trace and any source), the router's load is a
// running total equal to the walk over the queues, and a one-token answer has no TPOT.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "models/serving/policies.hpp"
#include "models/serving/serving_system.hpp"
#include "test_support.hpp"

using namespace mlsim;
using namespace mlsim::serving;

namespace {

using fixtures::ListSource;

// One replica of a one-layer toy transformer (tp 1) on the toy GPU, continuous batching;
// `adjust` changes the configuration before the system is built.
struct System {
  Engine engine;
  fixtures::Platform platform{engine, fixtures::toy_gpu(), 1, {0}};
  std::unique_ptr<ServingSystem> sys;

  explicit System(std::unique_ptr<RequestSource> source,
                  const std::function<void(ServingConfig&, DeploymentConfig&)>& adjust = {}) {
    ServingConfig c;
    c.gpu = platform.gpu;
    DeploymentConfig d;
    d.name = "toy";
    d.model = fixtures::toy_transformer(1, "toy");
    d.exit_layers = {1};
    if (adjust) adjust(c, d);
    c.deployments.push_back(d);
    sys = std::make_unique<ServingSystem>(engine, *platform.compute, std::vector<NodeId>{0}, c,
                                          std::move(source), RandomStream(1, "t"),
                                          RandomStream(1, "e"));
  }
  void run() {
    sys->start();
    engine.run();
  }
};

RequestSpec system_spec(std::uint64_t id, Time at, int prompt, int output) {
  return {id, at, prompt, output, 0, -1, {}};
}

// The toy model with a 100-token context serving three requests (prompt, output): (100, 5) at 0,
// (90, 20) at 1 ms and (50, 5) at `third_at`.
System context_limited(Time third_at, bool request_log) {
  return System(std::make_unique<ListSource>(std::vector<RequestSpec>{
                    system_spec(0, Time::zero(), 100, 5), system_spec(1, Time::ms(1), 90, 20),
                    system_spec(2, third_at, 50, 5)}),
                [&](ServingConfig& c, DeploymentConfig& d) {
                  c.request_log = request_log;
                  d.model.context = 100;
                });
}

}  // namespace

// Four requests of one output token each arrive at t = 0. Batched together, one prefill
// iteration serves all four (each prefill samples its only token): 1 iteration, four equal TTFTs.
// Before the fix the first one ran alone (its replica's start event came before the second
// arrival's event): 2 iterations, and the other three waited for the first.
TEST(Burst, FourRequestsAtOneInstantShareOnePrefill) {
  System s(std::make_unique<ListSource>(std::vector<RequestSpec>{
      system_spec(0, Time::zero(), 100, 1), system_spec(1, Time::zero(), 200, 1),
      system_spec(2, Time::zero(), 300, 1), system_spec(3, Time::zero(), 400, 1)}));
  s.run();
  ASSERT_EQ(s.sys->metrics().completed(), 4u);
  EXPECT_EQ(s.sys->replicas().front()->iterations(), 1u);
  EXPECT_EQ(s.sys->replicas().front()->tokens_processed(), 1000u);  // 100 + 200 + 300 + 400
  const auto& ttft = s.sys->metrics().ttft();
  EXPECT_EQ(ttft.quantile(0), ttft.quantile(1));
}

// The same burst read from an Azure trace (four lines with one timestamp), then a fifth request
// 1 s later, alone: 2 iterations.
TEST(Burst, FromTheAzureTrace) {
  const auto dir = std::filesystem::temp_directory_path() / "mlsim_serving_burst_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "t.csv") << "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                  "2023-11-16 18:15:46.0000000,100,1\n"
                                  "2023-11-16 18:15:46.0000000,200,1\n"
                                  "2023-11-16 18:15:46.0000000,300,1\n"
                                  "2023-11-16 18:15:46.0000000,400,1\n"
                                  "2023-11-16 18:15:47.0000000,50,1\n";
  System s(std::make_unique<AzureTraceSource>(dir / "t.csv"));
  s.run();
  std::filesystem::remove_all(dir);
  ASSERT_EQ(s.sys->metrics().completed(), 5u);
  EXPECT_EQ(s.sys->replicas().front()->iterations(), 2u);
}

// A (prompt 3, 3 tokens) and B (prompt 5, 2 tokens) at t = 0, C (prompt 2, 1 token) at 1 s:
//   submitted:         A 3+3, B 5+2                         -> 13
//   after the prefill: A 0+2, B 0+1 (first tokens sampled)  -> 3
//   after a decode:    A 0+1, B done                        -> 1 (the walk with the old
//                      definition gave A (3-4)+1 = 0: decode KV counted as negative prefill)
//   after the decode:  A done                               -> 0
// then C arrives: 2+1 = 3, and 0 after its prefill.
TEST(Router, OutstandingTokensIsARunningTotalByHand) {
  System s(std::make_unique<ListSource>(std::vector<RequestSpec>{
      system_spec(0, Time::zero(), 3, 3), system_spec(1, Time::zero(), 5, 2),
      system_spec(2, Time::s(1), 2, 1)}));
  // After every event: the running total equals the walk; the distinct values in order.
  std::vector<std::int64_t> after;
  s.engine.set_periodic_hook(1, [&](Engine&) {
    const auto& rep = *s.sys->replicas().front();
    std::int64_t walk = 0;
    for (const Request* r : rep.state().waiting()) walk += r->outstanding_tokens();
    for (const Request* r : rep.state().running()) walk += r->outstanding_tokens();
    EXPECT_EQ(rep.outstanding_tokens(), walk);
    if (after.empty() || after.back() != walk) after.push_back(walk);
  });
  s.run();
  EXPECT_EQ(after, (std::vector<std::int64_t>{13, 3, 1, 0, 3, 0}));
}

// SLO 2 s TTFT and 200 ms TPOT. By hand:
//   a: 1 output token, TTFT 1 s           -> TPOT undefined; meets the TTFT SLO: met
//   b: 1 output token, TTFT 3 s           -> TPOT undefined; misses the TTFT SLO
//   c: 3 output tokens, first at 1 s, done at 1.5 s -> TPOT 0.5 / 2 = 0.25 s > 0.2 s: missed
// TPOT statistics hold c only (mean 0.25 s); before the fix a and b had TPOT 0 (mean 0.083 s)
// and a one-token answer always passed the TPOT SLO.
TEST(Metrics, OneTokenAnswersHaveNoTpot) {
  ServingMetrics m(SloTargets{Time::s(2), Time::ms(200)}, 1, Time::s(1));
  auto done = [&](int output, Time first, Time end) {
    Request r;
    r.spec = system_spec(0, Time::zero(), 10, output);
    r.generated = output;
    r.first_token = first;
    m.on_arrival(r);
    m.on_completed(r, end);
  };
  done(1, Time::s(1), Time::s(1));
  done(1, Time::s(3), Time::s(3));
  done(3, Time::s(1), Time::ms(1500));
  EXPECT_EQ(m.tpot().count(), 1u);
  EXPECT_DOUBLE_EQ(m.tpot().mean(), 0.25);
  EXPECT_EQ(m.tpot_undefined(), 2u);
  EXPECT_EQ(m.slo_met(), 1u);
  Results out;
  m.write(out, Time::s(3));
  EXPECT_DOUBLE_EQ(out.metrics().at("serving_slo_attainment"), 1.0 / 3);
  // One request met both SLOs over a 3 s makespan: 1/3 request per second of goodput.
  EXPECT_DOUBLE_EQ(out.metrics().at("serving_goodput_requests_per_s"), 1.0 / 3);
  EXPECT_DOUBLE_EQ(out.metrics().at("serving_slo_ttft_attainment"), 2.0 / 3);
  EXPECT_DOUBLE_EQ(out.metrics().at("serving_slo_tpot_attainment"), 0.0);
  EXPECT_DOUBLE_EQ(out.metrics().at("serving_requests_tpot_undefined"), 2.0);
  // CDFs beside the e2e one: TTFT over all three (1, 1, 3 s), TPOT over c alone.
  EXPECT_EQ(out.details().at("serving_tpot_cdf"), nlohmann::json::parse("[[0.25, 1.0]]"));
  EXPECT_EQ(out.details().at("serving_ttft_cdf").size(), 3u);
  EXPECT_DOUBLE_EQ(out.details().at("serving_ttft_cdf").at(2).at(0).get<double>(), 3.0);
}

// Per request class (target tier), SLO 2 s TTFT and 200 ms TPOT, makespan 4 s. By hand:
//   tier 0: a: 5 tokens, first at 1 s, done at 1.4 s   -> TPOT 0.4 / 4 = 0.1 s: both met
//           b: 3 tokens, first at 3 s, done at 3.2 s   -> TPOT 0.2 / 2 = 0.1 s; TTFT 3 s missed
//           c: dropped                                  -> meets nothing
//   tier 1: d: 3 tokens, first at 0.5 s, done at 1.5 s -> TPOT 1.0 / 2 = 0.5 s missed; TTFT met
//           e: 1 token, first at 2 s, done at 2 s      -> TPOT undefined; TTFT 2 s met (<=): met
// tier 0: arrived 3, completed 2, dropped 1; SLO met 1 -> attainment 1/3, TTFT 1/3, TPOT 2/2,
//         goodput 1 / 4 s = 0.25/s.
// tier 1: arrived 2, completed 2; SLO met 1 (e) -> attainment 1/2, TTFT 2/2, TPOT 0/1 (d alone
//         has a TPOT), goodput 0.25/s. Overall: 2 of 5 met, goodput 0.5/s = 0.25 + 0.25.
TEST(Metrics, SloAttainmentAndGoodputPerClass) {
  ServingMetrics m(SloTargets{Time::s(2), Time::ms(200)}, 2, Time::s(1));
  auto request = [](int tier, int output, Time first) {
    Request r;
    r.spec = system_spec(0, Time::zero(), 10, output);
    r.spec.tier = tier;
    r.tier = tier;
    r.generated = output;
    r.first_token = first;
    return r;
  };
  auto done = [&](int tier, int output, Time first, Time end) {
    const Request r = request(tier, output, first);
    m.on_arrival(r);
    m.on_completed(r, end);
  };
  done(0, 5, Time::s(1), Time::ms(1400));
  done(0, 3, Time::s(3), Time::ms(3200));
  const Request c = request(0, 4, Time::max());
  m.on_arrival(c);
  m.on_dropped(c);
  done(1, 3, Time::ms(500), Time::ms(1500));
  done(1, 1, Time::s(2), Time::s(2));
  ASSERT_EQ(m.by_class().size(), 2u);
  EXPECT_EQ(m.by_class()[0].slo_met, 1u);
  EXPECT_EQ(m.by_class()[1].tpot_defined, 1u);
  Results out;
  m.write(out, Time::s(4));
  const auto& x = out.metrics();
  EXPECT_EQ(x.at("serving_tier0_requests_arrived"), 3);
  EXPECT_EQ(x.at("serving_tier0_requests_completed"), 2);
  EXPECT_EQ(x.at("serving_tier0_requests_dropped"), 1);
  EXPECT_EQ(x.at("serving_tier0_requests_slo_met"), 1);
  EXPECT_DOUBLE_EQ(x.at("serving_tier0_slo_attainment"), 1.0 / 3);
  EXPECT_DOUBLE_EQ(x.at("serving_tier0_slo_ttft_attainment"), 1.0 / 3);
  EXPECT_DOUBLE_EQ(x.at("serving_tier0_slo_tpot_attainment"), 1.0);
  EXPECT_DOUBLE_EQ(x.at("serving_tier0_goodput_requests_per_s"), 0.25);
  EXPECT_EQ(x.at("serving_tier1_requests_arrived"), 2);
  EXPECT_EQ(x.at("serving_tier1_requests_completed"), 2);
  EXPECT_EQ(x.at("serving_tier1_requests_dropped"), 0);
  EXPECT_DOUBLE_EQ(x.at("serving_tier1_slo_attainment"), 0.5);
  EXPECT_DOUBLE_EQ(x.at("serving_tier1_slo_ttft_attainment"), 1.0);
  EXPECT_DOUBLE_EQ(x.at("serving_tier1_slo_tpot_attainment"), 0.0);
  EXPECT_DOUBLE_EQ(x.at("serving_tier1_goodput_requests_per_s"), 0.25);
  EXPECT_DOUBLE_EQ(x.at("serving_slo_attainment"), 2.0 / 5);
  EXPECT_DOUBLE_EQ(x.at("serving_goodput_requests_per_s"), 0.5);
}

// A model with a 100-token context (toy shape). By hand:
//   a: prompt 100, 5 tokens  -> the prompt fills the context: refused, reported dropped
//   b: prompt 90, 20 tokens  -> served, its output stops at 100 - 90 = 10 tokens (counted)
//   c: prompt 50, 5 tokens   -> served as asked
// completed 2, dropped 1 (rejected for context 1), tokens generated 10 + 5 = 15.
TEST(ContextLimit, PromptsAtTheLimitAreRefusedLongOutputsStopThere) {
  auto run = context_limited(Time::ms(2), false);
  run.run();
  const auto& m = run.sys->metrics();
  EXPECT_EQ(m.completed(), 2u);
  EXPECT_EQ(m.dropped(), 1u);
  EXPECT_EQ(m.rejected_context(), 1u);
  EXPECT_EQ(m.output_capped(), 1u);
  EXPECT_EQ(m.tokens_generated(), 15u);
  EXPECT_EQ(m.tokens_requested(), 15u);
}

// Every catalog entry gives its context (max_position_embeddings of its config.json).
TEST(ContextLimit, CatalogEntriesCarryTheirContext) {
  const auto c = fixtures::llama2();
  EXPECT_EQ(c.get("llama-2-70b", "").context, 4096);
  EXPECT_EQ(c.get("llama-3.1-70b", "").context, 131072);
  nlohmann::json j = nlohmann::json::parse(
      R"({"_source": "x", "layers": 1, "hidden": 8, "heads": 1, "kv_heads": 1, "ffn": 8,
          "vocab": 10})");
  JsonReader r(j, "models.m");
  EXPECT_THROW((void)parse_transformer_shape(r, "m"), InputError);
}

// The per-request log (system.request_log) of the context-limit case above: one row per request,
// the refused one marked dropped with no times; the served ones start at once on the idle replica
// (queue 0) and the capped one shows its 10 output tokens.
TEST(RequestLog, OneRowPerRequest) {
  auto run = context_limited(Time::s(2), true);
  run.run();
  Results out;
  run.sys->finish(out);
  const TimeSeries* log = nullptr;
  for (const auto& s : out.series())
    if (s.name == "serving_requests") log = &s;
  ASSERT_NE(log, nullptr);
  ASSERT_EQ(log->rows.size(), 3u);
  const auto col = [&](std::size_t row, const std::string& name) {
    const auto it = std::find(log->columns.begin(), log->columns.end(), name);
    return log->rows[row].second[static_cast<std::size_t>(it - log->columns.begin())];
  };
  EXPECT_EQ(col(0, "id"), 0);
  EXPECT_EQ(col(0, "dropped"), 1);
  EXPECT_TRUE(std::isnan(col(0, "e2e_s")));
  EXPECT_EQ(col(1, "id"), 1);
  EXPECT_EQ(col(1, "queue_s"), 0);
  EXPECT_EQ(col(1, "output_tokens"), 10);
  EXPECT_EQ(col(1, "replica"), 0);
  EXPECT_DOUBLE_EQ(col(1, "arrival_s"), 0.001);
  EXPECT_EQ(col(2, "id"), 2);
  EXPECT_EQ(col(2, "queue_s"), 0);
  // A dropped request meets no SLO; the toy model serves b and c well inside 2 s / 200 ms.
  EXPECT_EQ(col(0, "slo_met"), 0);
  EXPECT_EQ(col(1, "slo_met"), 1);
  EXPECT_EQ(col(2, "slo_met"), 1);
}
