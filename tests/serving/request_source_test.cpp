#include "models/serving/request_source.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "sim_core/base/error.hpp"
#include "test_support.hpp"

using namespace mlsim;
using namespace mlsim::serving;

TEST(TraceTimestamp, ExactNanoseconds) {
  EXPECT_EQ(parse_trace_timestamp_ns("1970-01-01 00:00:00", ""), 0);
  EXPECT_EQ(parse_trace_timestamp_ns("1970-01-02 00:00:01.5", ""), 86'401'500'000'000LL);
  // 18:15:50.9951690 - 18:15:46.6805900 = 4.3145790 s
  EXPECT_EQ(parse_trace_timestamp_ns("2023-11-16 18:15:50.9951690", "") -
                parse_trace_timestamp_ns("2023-11-16 18:15:46.6805900", ""),
            4'314'579'000LL);
  EXPECT_THROW(parse_trace_timestamp_ns("2023-11-16", "x"), InputError);
  EXPECT_THROW(parse_trace_timestamp_ns("2023-13-16 00:00:00", "x"), InputError);
}

TEST(AzureTrace, StreamsOffsetsAndReportsBadLines) {
  const auto dir = std::filesystem::temp_directory_path() / "mlsim_serving_trace_test";
  std::filesystem::create_directories(dir);
  {
    std::ofstream f(dir / "t.csv");
    f << "TIMESTAMP,ContextTokens,GeneratedTokens\n"
         "2023-11-16 18:15:46.6805900,374,44\n"
         "2023-11-16 18:15:50.9951690,396,0\n"
         "2023-11-16 18:15:51.0000000,abc,3\n";
  }
  AzureTraceSource src(dir / "t.csv", 2.0);
  auto a = src.next();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->arrival, Time::zero());
  EXPECT_EQ(a->prompt_tokens, 374);
  auto b = src.next();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->arrival, Time::ns(2'157'289'500));  // rate doubled: offsets halved
  EXPECT_EQ(b->output_tokens, 1);                  // 0 generated tokens read as 1
  try {
    (void)src.next();
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("t.csv:4"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

// Issue 17, defect 8: errors in the trace named the file and line but not the key that named it.
TEST(AzureTrace, ErrorsNameTheKeyTheFileAndTheLine) {
  const auto dir = std::filesystem::temp_directory_path() / "mlsim_azure_errors";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "t.csv") << "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                  "2023-11-16 18:15:46.6805900,12,x\n";
  AzureTraceSource src(dir / "t.csv");
  try {
    src.next();
    ADD_FAILURE() << "a bad token count was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "workload.trace");
    EXPECT_EQ(e.message(), (dir / "t.csv").string() + ":2: expected an integer, got \"x\"");
  }
  try {
    AzureTraceSource folder(dir);
    ADD_FAILURE() << "a folder was accepted as a trace";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "workload.trace");
    EXPECT_NE(e.message().find("is a folder, not a file"), std::string::npos) << e.message();
  }
  std::filesystem::remove_all(dir);
}

TEST(AzureTrace, WholeConversationTraceAndLengthFit) {
  const auto file =
      fixtures::shared_data_dir() / "llm_traces/azure_2023/AzureLLMInferenceTrace_conv.csv";
  if (!std::filesystem::exists(file)) GTEST_SKIP() << "Azure trace not found: " << file;
  AzureTraceSource src(file);
  std::int64_t n = 0;
  Time last;
  double log_prompt = 0;
  while (auto r = src.next()) {
    EXPECT_GE(r->arrival, last);
    last = r->arrival;
    log_prompt += std::log(r->prompt_tokens);
    ++n;
  }
  EXPECT_EQ(n, 19'366);
  EXPECT_GT(last, Time::s(3500));  // one hour
  EXPECT_LT(last, Time::s(3700));
  const auto fit = fit_lengths(file);
  EXPECT_EQ(fit.samples, n);
  EXPECT_NEAR(fit.prompt.mu, log_prompt / static_cast<double>(n), 1e-9);
  // Draws from the fit reproduce the fitted log-mean.
  RandomStream rng(3, "lengths");
  double s = 0;
  for (int i = 0; i < 20000; ++i) s += std::log(fit.output.draw(rng));
  EXPECT_NEAR(s / 20000, fit.output.mu, 0.05);
  std::printf("[azure conv] prompt lognormal mu %.3f sigma %.3f; output mu %.3f sigma %.3f\n",
              fit.prompt.mu, fit.prompt.sigma, fit.output.mu, fit.output.sigma);
}

TEST(Generator, PoissonRateAndDeterminism) {
  GeneratorParams p;
  p.rate_per_s = 10;
  p.count = 5000;
  p.lengths.prompt = {5.0, 1.0, 1, 4096};
  p.lengths.output = {4.0, 1.0, 1, 2048};
  GeneratedSource a(p, RandomStream(1, "arr"), RandomStream(1, "len"));
  GeneratedSource b(p, RandomStream(1, "arr"), RandomStream(1, "len"));
  Time last;
  for (int i = 0; i < 5000; ++i) {
    auto x = a.next();
    auto y = b.next();
    ASSERT_TRUE(x && y);
    EXPECT_EQ(x->arrival, y->arrival);
    EXPECT_EQ(x->prompt_tokens, y->prompt_tokens);
    last = x->arrival;
  }
  EXPECT_FALSE(a.next());
  EXPECT_NEAR(last.seconds(), 500.0, 500.0 * 0.05);  // 4999 gaps of mean 0.1 s
  p.arrival_cv = 2;                                  // gamma arrivals, same mean rate
  GeneratedSource g(p, RandomStream(2, "arr"), RandomStream(2, "len"));
  for (int i = 0; i < 5000; ++i) last = g.next()->arrival;
  EXPECT_NEAR(last.seconds(), 500.0, 500.0 * 0.15);
}

// The BurstGPT CSV (no file of it in ../shared/data; HPMLL/BurstGPT's header and rows as its
// README and data/BurstGPT_1.csv give them). By hand: rows at 5, 5, 45.25 and 110.5 s are offsets
// 0, 0, 40.25 and 105.5 s from the first row; at rate_scale 2 they halve (20.125 s, 52.75 s). The
// failed request (Response tokens 0) is a one-token answer; Model, Total tokens and Log Type are
// not used.
TEST(BurstGptTrace, StreamsOffsetsFailuresAndReportsBadLines) {
  const auto dir = std::filesystem::temp_directory_path() / "mlsim_burstgpt_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "t.csv") << "Timestamp,Model,Request tokens,Response tokens,Total tokens,"
                                  "Log Type\n"
                                  "5,ChatGPT,472,18,490,Conversation log\n"
                                  "5,GPT-4,30,7,37,API log\n"
                                  "45.25,ChatGPT,1087,0,1087,Conversation log\n"
                                  "\n"
                                  "110.5,GPT-4,417,505,922,API log\n"
                                  "100,ChatGPT,1,1,2,API log\n";
  BurstGptTraceSource src(dir / "t.csv", 2.0);
  const auto a = src.next(), b = src.next(), c = src.next(), d = src.next();
  ASSERT_TRUE(a && b && c && d);
  EXPECT_EQ(a->arrival, Time::zero());
  EXPECT_EQ(a->prompt_tokens, 472);
  EXPECT_EQ(a->output_tokens, 18);
  EXPECT_EQ(b->arrival, Time::zero());  // same instant: a burst
  EXPECT_EQ(b->prompt_tokens, 30);
  EXPECT_EQ(c->arrival, Time::ns(20'125'000'000));
  EXPECT_EQ(c->output_tokens, 1);  // failed request: 0 response tokens read as 1
  EXPECT_EQ(d->arrival, Time::ns(52'750'000'000));
  EXPECT_EQ(d->output_tokens, 505);
  EXPECT_EQ(d->id, 3u);
  try {
    (void)src.next();
    FAIL() << "a timestamp going backwards was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "workload.trace");
    EXPECT_EQ(e.message(), (dir / "t.csv").string() + ":7: timestamps must not go backwards");
  }
  std::ofstream(dir / "u.csv") << "Timestamp,Model,Request tokens,Response tokens,Total tokens,"
                                  "Log Type\n"
                                  "1,ChatGPT,12,x,12,API log\n"
                                  "2,ChatGPT,12,3\n";
  BurstGptTraceSource bad(dir / "u.csv");
  try {
    (void)bad.next();
    FAIL() << "a bad token count was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.message(), (dir / "u.csv").string() + ":2: expected an integer, got \"x\"");
  }
  try {
    (void)bad.next();
    FAIL() << "a short row was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.message(),
              (dir / "u.csv").string() + ":3: expected six comma-separated fields, got 4");
  }
  std::ofstream(dir / "azure.csv") << "TIMESTAMP,ContextTokens,GeneratedTokens\n";
  try {
    BurstGptTraceSource wrong(dir / "azure.csv");
    FAIL() << "an Azure CSV was read as BurstGPT";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "workload.trace");
    EXPECT_NE(e.message().find(":1: expected the BurstGPT header"), std::string::npos)
        << e.message();
  }
  std::filesystem::remove_all(dir);
}

// The fixed-length generator (issue 15, controlled studies): every request has the given lengths,
// and its arrivals are the fitted generator's (same seed, same arrival stream: no length draw
// disturbs them).
TEST(Generator, FixedLengthsKeepTheArrivals) {
  GeneratorParams fitted;
  fitted.rate_per_s = 4;
  fitted.count = 200;
  fitted.lengths.prompt = {5.0, 1.0, 1, 4096};
  fitted.lengths.output = {4.0, 1.0, 1, 2048};
  GeneratorParams fixed = fitted;
  fixed.fixed_prompt = 100;
  fixed.fixed_output = 10;
  GeneratedSource a(fitted, RandomStream(5, "arr"), RandomStream(5, "len"));
  GeneratedSource b(fixed, RandomStream(5, "arr"), RandomStream(5, "len"));
  int differing_lengths = 0;
  for (int i = 0; i < 200; ++i) {
    const auto x = a.next(), y = b.next();
    ASSERT_TRUE(x && y);
    EXPECT_EQ(x->arrival, y->arrival);
    EXPECT_EQ(y->prompt_tokens, 100);
    EXPECT_EQ(y->output_tokens, 10);
    differing_lengths += x->prompt_tokens != 100;
  }
  EXPECT_GT(differing_lengths, 150);  // the fitted source does draw its lengths
  EXPECT_FALSE(b.next());
}
