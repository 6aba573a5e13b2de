#pragma once
// AutoPipe's reference planner as a dynamic program (system.planner "dp"): the configuration
// (contiguous layer ranges, and per stage its replica count, using every host) with the smallest
// bottleneck time (bottleneck.hpp): the largest, over stages, of the stage's GPU or NIC work per
// round (whichever is larger on its slowest replica) plus its ring all-reduce, shared by its
// replicas. That objective is a maximum of terms each of which depends only on its stage's
// layers [i, j) and hosts [h, h + r), so the program is exact for it:
//   D[j][m] = smallest bottleneck time of layers [0, j) on hosts [0, m), all used
//           = min( stage(0, j, 0, m),                                 (one stage)
//                  min over 0 < i < j, 1 <= r < m of max(D[i][m - r], stage(i, j, m - r, r)) )
// (the last stage [i, j) runs on hosts [m - r, m); any optimum's prefix is a configuration of
// [0, i) on m - r hosts, and replacing it by an optimal one does not raise the maximum). The
// answer is D[n][H]; `straight` keeps r = 1 and one stage per host. Ties go to the first found
// (i, then r, increasing). O(n^2 H^3) time: n^2 H^2 cells-by-predecessors, H for a stage term.
//
// The shape is PipeDream's optimizer (msr-fiddle/pipedream optimizer/
// optimizer_graph_hierarchical.py, compute_partitioning: A[i][j][m] = min over the split k and
// the last stage's machines m' of max(A[i][k][m - m'], last_stage_time)); the stage term is
// mlsim's 1F1B timing model's instead of PipeDream's (which charges 4 (m - 1) P / (B m) for the
// synchronisation and, by default, nothing for activations: pipedream_partitioner.hpp).
//
// What it is not: the 1F1B steady-state time (steady_state_seconds, one_f_one_b.hpp), the
// objective the branch and bound (autopipe_plan, the "exact" planner) minimises, also couples
// stages (the in-flight limit, latencies, the all-reduce waiting for the slowest replica, GPipe's
// fill and drain), so it does not decompose. The bottleneck time is a lower bound on it: the
// program's optimum bounds every configuration's steady-state time from below, and its
// configuration is optimal for the full objective whenever its own steady-state time equals that
// bound. The branch and bound stays the exact check of the full objective.
#include <vector>

#include "models/pipeline/autopipe_planner.hpp"

namespace mlsim::pipeline {

// The program's configuration. seconds_per_minibatch is its steady-state time under
// options.schedule (the full objective, what the run compares), bottleneck_seconds the
// program's optimum; evaluated is 1 (one configuration timed with the schedule's model).
Plan dp_plan(const std::vector<LayerCost>& layers, const Conditions& c,
             const PlannerOptions& options = {});

}  // namespace mlsim::pipeline
