#pragma once
// The metrics every execution-graph run reports (llm_training, chakra_trace): iteration time,
// per-phase breakdown (mean per rank and on the rank that finished last), node counts, whether
// it completed, and which communication mode ran.
#include <string>

#include "sim_core/run/results.hpp"
#include "sim_core/workload/graph_executor.hpp"

namespace mlsim::llm_training {

// Fills `out` and returns the time per iteration (the last rank's finish / iterations).
double report_graph_run(const workload::GraphExecutor& executor,
                        const workload::GraphSource& source, double iterations, Results& out);

// One line for details.communication: which mode ran and what it means.
std::string communication_description(workload::CommunicationMode mode);

}  // namespace mlsim::llm_training
