// The span trace (sim_core/run/span_trace.hpp): Chrome's JSON array format, exact times from the
// integer clock, escaping, and a spill file that is handed over once and removed with its owner.
#include "sim_core/run/span_trace.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sim_core/base/error.hpp"

namespace mlsim {
namespace {

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(SpanTrace, WritesChromeEventsWithExactMicroseconds) {
  SpanTrace trace;
  trace.name_process(3, "replica \"a\"");
  trace.name_thread(3, 1, "stage 1");
  // 1,234,567 ns = 1234.567 us; 5 ns = 0.005 us; zero-length spans are allowed.
  trace.span("prefill", "iteration", Time::ns(1'234'567), Time::ns(1'234'572), 3, 1,
             R"({"tokens":8})");
  trace.span("decode", "iteration", Time::s(2), Time::s(2), 3, 1);
  EXPECT_EQ(trace.spans(), 2u);
  const auto file = trace.release_file();
  const std::string text = read(file->path());
  EXPECT_NE(text.find(R"("ts":1234.567,"dur":0.005,"pid":3,"tid":1,"args":{"tokens":8})"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"("ts":2000000.000,"dur":0.000)"), std::string::npos) << text;
  const auto doc = nlohmann::json::parse(text);  // a valid JSON array, names escaped
  ASSERT_EQ(doc.size(), 4u);
  EXPECT_EQ(doc[0]["args"]["name"], "replica \"a\"");
  EXPECT_EQ(doc[2]["ph"], "X");
  const std::filesystem::path path = file->path();
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_THROW(trace.span("late", "x", Time::zero(), Time::zero(), 0, 0), InvariantError);
}

TEST(SpanTrace, TheSpillFileGoesWithItsLastOwner) {
  std::filesystem::path path;
  {
    SpanTrace unreleased;
    unreleased.span("a", "b", Time::zero(), Time::ns(1), 0, 0);
    const auto file = SpanTrace().release_file();  // an empty trace is an empty array
    EXPECT_EQ(nlohmann::json::parse(read(file->path())).size(), 0u);
    path = file->path();
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace mlsim
