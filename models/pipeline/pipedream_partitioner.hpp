#pragma once
// PipeDream's partitioner (Narayanan et al., SOSP 2019; msr-fiddle/pipedream
// optimizer/optimizer_graph_hierarchical.py), for a straight pipeline: one GPU per stage, no
// stage replication.
//
// Dynamic programming over contiguous layer ranges. With stage m on GPU m,
//   A[j][1] = T(0, j, gpu 0)
//   A[j][m] = min over i of max(A[i][m-1], 2 * act(i-1) / B(m-2), T(i, j, gpu m-1))
// where T(i, j, gpu) is the sum of forward and backward times of layers [i, j) on that stage's
// host as it is now (StageHost: the profile moved to the host's GPU type, divided by the host's
// speed; PipeDream's own profiler measures one GPU and uses its times for every stage), act(i-1)
// the activation of the layer before the cut and B the bandwidth of the link between the two
// stages. The objective is PipeDream's steady-state time per minibatch, the largest stage or
// transfer time: it ignores 1F1B's warm-up, how transfers and computation overlap, and that a
// host's link carries activations forward and gradients back at once. That simplification is
// what AutoPipe's exact model (estimate_1f1b) corrects.
#include <vector>

#include "models/pipeline/pipeline_costs.hpp"

namespace mlsim::pipeline {

// PipeDream's objective for a partition (seconds per minibatch).
double pipedream_objective(const std::vector<LayerCost>& layers, const Partition& p,
                           const Conditions& c);

// The partition minimising pipedream_objective into c.stages() non-empty stages; on ties each
// stage boundary, chosen from the last one back, is the earliest that attains the optimum.
// Needs at least as many layers as stages.
Partition pipedream_partition(const std::vector<LayerCost>& layers, const Conditions& c);

}  // namespace mlsim::pipeline
