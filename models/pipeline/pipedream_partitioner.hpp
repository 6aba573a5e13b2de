#pragma once
// PipeDream's partitioner (Narayanan et al., SOSP 2019) as its released optimizer runs it:
// msr-fiddle/pipedream optimizer/optimizer_graph_hierarchical.py, compute_partitioning (the
// dynamic program) and main (its command-line defaults), one level (one network bandwidth).
//
// Dynamic program over contiguous layer ranges and machine counts. For layers [0, j) on the
// first m hosts:
//   single stage, replicated m times:  A[j][m] = (T(0, j) + 4 (m - 1) P(0, j) / (B m)) / m
//   split:  A[j][m] = min over i < j, m' < m of max(A[i][m - m'], T_last)
//           T_last = (T(i, j) + 4 (m' - 1) P(i, j) / (B m')) / m'
// T is the forward plus backward time of the layers, P their parameter bytes, B the bandwidth;
// 4 (m - 1) P / (B m) is PipeDream's data-parallel synchronisation of a stage replicated m times,
// and dividing by m counts that its replicas take turns (round-robin). Every host is used
// (`--use_fewer_machines` off by default). With `activation_compression_ratio` given (the
// optimizer's option; absent by default) the split also takes the max with the input and output
// transfers of the last stage, 2 x activation / (B m' ratio); without it, activations cost
// nothing in the objective (the default). `straight` (`--straight_pipeline`) forbids replication.
//
// Where mlsim departs from the released code:
//   - The profile is a chain of layers in topological order, not PipeDream's antichain DAG: a
//     stage boundary carries the last layer's activation (skip connections across it are not
//     counted).
//   - Hosts may differ (GPU type, speed, bandwidth; PipeDream assumes one GPU and one bandwidth).
//     The last stage of A[j][m] runs on hosts [m - m', m), so T is the slowest of those hosts'
//     times for the layers, B for the synchronisation is the narrowest of their links, and B for
//     an activation the narrower of the two hosts' on either side of the boundary (their
//     narrowest). On identical hosts this is PipeDream's program.
//   - Ties: candidates are tried in increasing i, then increasing m', and replace the best only
//     when strictly better; the single replicated stage is tried first (PipeDream initialises A
//     with it, then iterates predecessors in set order).
//   - The memory constraint (`--use_memory_constraint`, off by default; `memory_size` below) is
//     the released check (stage_memory.hpp, MemoryRule::kPipeDream): a stage with M machines
//     after it and m' of its own is skipped when ceil(M / m') (activations + parameters of its
//     layers) exceeds --memory_size, in the single-stage start as in the split, so an entry no
//     stage fits stays empty, as the code's (None, None, None). With different GPUs each host is
//     checked against its own memory (PipeDream has one --memory_size). Where the code would
//     fail on an empty answer, this throws an InputError at "system.memory".
#include <optional>
#include <vector>

#include "models/pipeline/pipeline_costs.hpp"

namespace mlsim::pipeline {

struct PipeDreamOptions {
  bool straight = false;                               // --straight_pipeline
  std::optional<double> activation_compression_ratio;  // --activation_compression_ratio
  // --use_memory_constraint with --memory_size per host, bytes (the job's hosts in order);
  // empty: the option off (the default).
  std::vector<double> memory_size = {};
};

// PipeDream's objective for a configuration (seconds per minibatch): the largest stage time
// (compute plus synchronisation, over its replicas) and, with the option, transfer time.
double pipedream_objective(const std::vector<LayerCost>& layers, const Partition& p,
                           const Conditions& c, const PipeDreamOptions& options = {});

// The configuration minimising pipedream_objective over all of c's hosts. Needs at least one
// layer and one host.
Partition pipedream_partition(const std::vector<LayerCost>& layers, const Conditions& c,
                              const PipeDreamOptions& options = {});

}  // namespace mlsim::pipeline
