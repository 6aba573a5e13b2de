// graph_report.hpp's exposure figures: exposure_names lists exposure_of's figure names, in its
// order, without a run (the cluster model records every name even when no Megatron job finished).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "models/llm_training/graph_report.hpp"
#include "models/llm_training/megatron_source.hpp"

namespace mlsim::llm_training {
namespace {

std::vector<std::string> figure_names(const Exposure& e) {
  std::vector<std::string> out;
  for (const auto& [name, seconds] : e.figures) out.push_back(name);
  return out;
}

// By hand, for Megatron's phases (compute, tp, pp, dp): the mean compute and each phase after
// compute's exposure, then the same on the critical rank.
TEST(GraphReport, ExposureNamesAreExposureOfsFigureNamesInOrder) {
  const auto& phases = MegatronSource::phase_names();
  const std::vector<std::string> all = {"compute_s",
                                        "exposed_tp_s",
                                        "exposed_pp_s",
                                        "exposed_dp_s",
                                        "critical_rank_compute_s",
                                        "critical_rank_exposed_tp_s",
                                        "critical_rank_exposed_pp_s",
                                        "critical_rank_exposed_dp_s"};
  EXPECT_EQ(exposure_names(phases), all);
  // Two ranks, the second finishing last: exposure_of gives every name above, in that order.
  std::vector<workload::RankReport> reports(2);
  for (auto& r : reports) r.exposed_s.assign(phases.size(), 0.0);
  reports[1].finished = Time::ms(1);
  EXPECT_EQ(figure_names(exposure_of(reports, phases, 1)), all);
  // Without reports, no critical rank: the mean figures only, on both.
  const std::vector<std::string> means(all.begin(), all.begin() + 4);
  EXPECT_EQ(exposure_names(phases, false), means);
  EXPECT_EQ(figure_names(exposure_of({}, phases, 1)), means);
}

}  // namespace
}  // namespace mlsim::llm_training
