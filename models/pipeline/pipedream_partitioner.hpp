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
// transfers of the last stage, 2 x activation / (B m' ratio) (no output at the model's last
// layer); the single-stage cells carry none, so the first stage's output counts only as the
// second stage's input, over the second stage's replicas (before 2026-12-07 mlsim also charged it
// over the first stage's own: a departure that mattered only when the first stage had fewer
// replicas than the second). Without the option, activations cost nothing in the objective (the
// default). `straight` (`--straight_pipeline`) forbids replication.
//
// Where mlsim departs from the released code:
//   - The cuts are those of one topological order of the layers, not every state of PipeDream's
//     antichain DAG (graph/graph.py, antichain_dag): a stage is a range of that order. A cut's
//     bytes are the code's, the augmented antichain's (LayerCost::cut_bytes: every activation
//     made before the cut and consumed after it, residual inputs included). On a chain the DAG
//     is the chain (no node is added by augment_antichain, each antichain has one successor), and
//     VGG-16's is one; on ResNet-50 a cut that puts a block's downsample branch on the other
//     side of its main branch is not reachable (docs/pipeline.md, "The antichain DAG").
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
//
// The hierarchical solve (`levels`, the code's `--all_num_machines` and `--network_bandwidths`,
// innermost level first; `main` calls compute_partitioning once per level): level 1 runs the
// program above within one "machine" of the next level (a server of M1 GPUs over its bandwidth
// B1), for every start layer i (final_level false: A[i][j][m] for all i), and the time of layers
// [i, j) on one such server, A1[i][j][M1], becomes the compute time of the next level, whose
// machines are servers over B2; and so on. At level l > 1 the single-stage start divides its
// synchronisation by the machines of the level below (`num_machines_within_machine`):
//   A[i][j][m] = (T_l(i, j) + 4 (m - 1) P(i, j) / (B_l m) / M_{l-1}) / m,
// the split's last stage does not: (T_l(s, j) + 4 (m' - 1) P(s, j) / (B_l m')) / m' (as the code).
// Activations (with the option) cost 2 x activation / (B_l m') at the level's bandwidth; the
// output term is dropped only at the model's last layer (`j < len(output_activation_sizes) - 1`),
// so a sub-range's last stage pays its output inside a server too. The configuration is read back
// as analyze_partitioning does, top level first: each top stage's layer range is split again on
// all M_{l-1} machines of the level below. mlsim runs the flattened configuration: a bottom-level
// stage replicated r_1 times inside a server whose stage is replicated r_2 times is one stage of
// r_1 r_2 hosts (hosts in order, round-robin, as every configuration here). One level with B the
// hosts' bandwidth is the program above. With levels, T of a machine of level 1 is the slowest
// job host's time for the layers (PipeDream profiles once, one GPU type; identical hosts: exact)
// and the memory constraint is not modelled (the scenario refuses the combination).
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
  // --all_num_machines / --network_bandwidths, innermost level first; empty: one level over the
  // hosts' own bandwidths (the program above). The machines' product must be the host count.
  struct Level {
    std::size_t machines = 1;
    double bandwidth = 0;  // bytes/s
  };
  std::vector<Level> levels = {};
};

// PipeDream's objective for a configuration (seconds per minibatch): the largest stage time
// (compute plus synchronisation, over its replicas) and, with the option, transfer time.
double pipedream_objective(const std::vector<LayerCost>& layers, const Partition& p,
                           const Conditions& c, const PipeDreamOptions& options = {});

// The configuration minimising pipedream_objective over all of c's hosts. Needs at least one
// layer and one host.
Partition pipedream_partition(const std::vector<LayerCost>& layers, const Conditions& c,
                              const PipeDreamOptions& options = {});

// The same with the program's value of it (A[0][n][all machines]; with levels, the top level's,
// which pipedream_objective, a one-level objective, does not give).
struct PipeDreamPlan {
  Partition partition;
  double objective_s = 0;
};
PipeDreamPlan pipedream_plan(const std::vector<LayerCost>& layers, const Conditions& c,
                             const PipeDreamOptions& options = {});

}  // namespace mlsim::pipeline
