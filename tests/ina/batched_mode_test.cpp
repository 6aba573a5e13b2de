// Batched mode (one event per burst of k packets) against packet-accurate mode on small cases:
// job completion times must agree within 2%.
#include <gtest/gtest.h>

#include <cmath>

#include "models/ina/ina_cluster.hpp"
#include "test_support.hpp"

using namespace mlsim;
using namespace mlsim::ina;
using namespace mlsim::ina::testing;

namespace {

struct RunOutcome {
  std::vector<double> jct_s;
  std::uint64_t events = 0;
  int burst = 0;
};

RunOutcome run(PolicyKind policy, int burst_values, Bytes memory) {
  ClusterParams p;
  p.policy = policy;
  p.burst_values = burst_values;
  p.aggregator_memory = memory;
  // Three jobs with different compute/communication ratios, overlapping in time.
  p.jobs.push_back(job(two_layers(400'000), 4, 3));
  p.jobs.push_back(job(one_layer(0.5, 1.0, 600'000), 3, 3, Time::us(300)));
  p.jobs.push_back(job(one_layer(2.0, 3.0, 150'000), 4, 3, Time::us(700)));
  Engine engine;
  InaCluster cluster(engine, p);
  cluster.start();
  engine.run();
  EXPECT_TRUE(cluster.all_finished());
  RunOutcome r;
  for (std::size_t j = 0; j < p.jobs.size(); ++j)
    r.jct_s.push_back((cluster.job(j).finished_at() - p.jobs[j].arrival).seconds());
  r.events = engine.events_processed();
  r.burst = cluster.burst_packets();
  return r;
}

}  // namespace

class InaBatchedMode : public ::testing::TestWithParam<std::tuple<PolicyKind, std::int64_t>> {};

TEST_P(InaBatchedMode, AgreesWithPacketAccurateWithinTwoPercent) {
  const auto [policy, memory] = GetParam();
  const RunOutcome exact = run(policy, 1, Bytes{memory});
  const RunOutcome batched = run(policy, 62 * 16, Bytes{memory});
  EXPECT_EQ(exact.burst, 1);
  EXPECT_GT(batched.burst, 1);
  EXPECT_LT(batched.events * 2, exact.events);  // it must actually save events
  for (std::size_t j = 0; j < exact.jct_s.size(); ++j) {
    const double rel = std::abs(batched.jct_s[j] - exact.jct_s[j]) / exact.jct_s[j];
    EXPECT_LT(rel, 0.02) << "job " << j << ": packet-accurate " << exact.jct_s[j] << " s, batched "
                         << batched.jct_s[j] << " s";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Policies, InaBatchedMode,
    ::testing::Combine(::testing::Values(PolicyKind::kSwitchMl, PolicyKind::kAtp, PolicyKind::kDsa),
                       // ATP's 20000 aggregators of 248 B, and a tenth of it
                       ::testing::Values(std::int64_t{20000 * 248}, std::int64_t{2000 * 248})),
    [](const auto& info) {
      return std::string(policy_name(std::get<0>(info.param))) + "_" +
             std::to_string(std::get<1>(info.param) / 248) + "aggregators";
    });
