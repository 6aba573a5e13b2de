#include "cli/progress_line.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

using namespace mlsim;

namespace {

std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string out;
  char buf[256];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  return out;
}

ProgressReport report(double wall, double fraction) {
  ProgressReport r;
  r.simulated = Time::ms(1500);
  r.events = 3'000'000;
  r.wall_seconds = wall;
  r.events_per_second = 2e6;
  r.fraction_done = fraction;
  if (fraction > 0) r.eta_seconds = wall * (1 - fraction) / fraction;
  return r;
}

}  // namespace

TEST(ProgressLine, SilentForShortRunsAndWhenDisabled) {
  std::FILE* f = std::tmpfile();
  {
    ProgressLine quiet(false, f);
    quiet.update(report(10, 0.5));
    ProgressLine line(true, f);
    line.update(report(1.9, 0.5));  // under the 2 s threshold
  }
  EXPECT_EQ(contents(f), "");
  std::fclose(f);
}

TEST(ProgressLine, ShowsSimulatedTimeRateAndEtaThenClears) {
  std::FILE* f = std::tmpfile();
  {
    ProgressLine line(true, f);
    line.update(report(3, 0.25));
    line.update(report(3.2, 0.3));  // within the refresh interval: not redrawn
    line.update(report(4, 0.5));
    line.clear();
  }
  const std::string out = contents(f);
  EXPECT_NE(out.find("2.00 M events/s | 25.0% | ETA 9 s"), std::string::npos) << out;
  EXPECT_EQ(out.find("30.0%"), std::string::npos) << out;
  EXPECT_NE(out.find("50.0% | ETA 4 s"), std::string::npos) << out;
  EXPECT_EQ(out.substr(out.size() - 4), "\r\033[K");
  std::fclose(f);
}
