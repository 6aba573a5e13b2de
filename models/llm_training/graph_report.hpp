#pragma once
// The metrics every execution-graph run reports (llm_training, chakra_trace): iteration time,
// per-phase breakdown (mean per rank and on the rank that finished last), node counts, whether
// it completed, and which communication mode ran.
#include <string>
#include <utility>
#include <vector>

#include "sim_core/run/results.hpp"
#include "sim_core/workload/graph_executor.hpp"

namespace mlsim::llm_training {

// The per-phase breakdown of per-rank reports (the graph's, or the training core's
// MegatronCoreJob::rank_reports(), computed the same way): compute_s, exposed_<phase>_s for
// every phase after the first (mean per rank, per iteration) and critical_rank_compute_s,
// critical_rank_exposed_<phase>_s on the rank that finished last (the first of them on a tie),
// as (metric name, seconds) in that order; the critical figures only when there are reports.
// The one definition of these figures: report_exposure writes them as a run's metrics, the
// cluster model as each Megatron job's record (models/cluster/communication_mode.hpp).
struct Exposure {
  std::size_t critical_rank = 0;
  std::vector<std::pair<std::string, double>> figures;
};
Exposure exposure_of(const std::vector<workload::RankReport>& reports,
                     const std::vector<std::string>& phases, double iterations);

// The names of exposure_of's figures, in its order, without a run: with `critical_rank`, the
// critical rank's too (exposure_of gives them when there are reports). For a record of every
// figure even when no run finished (the cluster model's megatron_*_mean_s metrics).
std::vector<std::string> exposure_names(const std::vector<std::string>& phases,
                                        bool critical_rank = true);

// exposure_of's figures as metrics of `out`, and details.critical_rank. Returns that rank.
std::size_t report_exposure(const std::vector<workload::RankReport>& reports,
                            const std::vector<std::string>& phases, double iterations,
                            Results& out);

// Fills `out` and returns the time per iteration (the last rank's finish / iterations).
double report_graph_run(const workload::GraphExecutor& executor,
                        const workload::GraphSource& source, double iterations, Results& out);

// One line for details.communication: which mode ran and what it means.
std::string communication_description(workload::CommunicationMode mode);

}  // namespace mlsim::llm_training
