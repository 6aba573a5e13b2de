#pragma once
// An execution graph: per rank (one GPU, or several identical GPUs standing in for one another),
// a program of nodes with dependencies, as ASTRA-sim's and Chakra's execution traces describe a
// training step. A node is
//   compute     a kernel sequence (platform Work: an operator priced by the scenario's cost
//               providers, a profiled time, a fixed time) run on the rank's GPU;
//   collective  an operation over a group of ranks (all-reduce, reduce-scatter, all-gather,
//               all-to-all): the k-th collective a member reaches on a group meets every other
//               member's k-th, and starts when all of them have reached it;
//   send / recv a message between two ranks: the k-th send from A to B meets B's k-th receive
//               from A, and the bytes move once both are reached (a rendezvous, as NCCL's
//               point-to-point calls), both nodes ending when they arrived.
// Dependencies name earlier nodes of the same rank by their index in its program (the order a
// source emits them, from 0). Cross-rank order comes only from collectives and messages.
//
// A GraphSource emits each rank's program a piece at a time (GraphExecutor asks for more when a
// rank runs low), so a graph of 8192 ranks x 10^5 nodes is never held at once: only what is in
// flight (graph_executor.hpp).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sim_core/base/small_vector.hpp"
#include "sim_core/base/units.hpp"
#include "sim_core/collectives/collective.hpp"
#include "sim_core/hardware/compute_work.hpp"

namespace mlsim::workload {

using RankId = std::int32_t;
using GroupId = std::int32_t;
using KernelId = std::int32_t;
using NodeIndex = std::uint64_t;  // position in its rank's program, from 0

enum class NodeKind : std::uint8_t { kCompute, kCollective, kSend, kRecv };

struct Node {
  NodeKind kind = NodeKind::kCompute;
  // What the time waiting for this node counts as (an index into GraphSource::phases(), e.g.
  // "tp", "pp", "dp"): a rank's idle time between kernels is charged to the phase of the node
  // whose completion let its next kernel start.
  std::uint8_t phase = 0;
  collectives::Operation operation = collectives::Operation::kAllReduce;  // collective
  // compute: the KernelId; collective: the GroupId; send: the receiver; recv: the sender.
  std::int32_t target = 0;
  Bytes bytes;  // collective: S (as collectives::CollectiveSpec::bytes); send/recv: the message
  SmallVector<NodeIndex, 2> deps;  // earlier nodes of the same rank
};

// A collective's group: `members` are ranks, each contributing `gpus_per_member` GPUs of its
// own (1, or a rank's whole width when the rank stands for a tensor-parallel group whose
// collective it runs internally). The operation runs among members x gpus_per_member GPUs.
struct Group {
  std::vector<RankId> members;
  int gpus_per_member = 1;
};

class GraphSource {
 public:
  virtual ~GraphSource() = default;
  virtual RankId ranks() const = 0;
  // The first GPU of rank r (GPUs are numbered over the topology's hosts in order, each host
  // holding topology.hardware's gpus_per_host) and how many identical GPUs the rank stands for
  // (consecutive from the first, on one host). A rank of width w stands for w GPUs doing the same
  // work in lock-step: its messages and the collectives of groups it joins with
  // gpus_per_member < w run w times at once (w / gpus_per_member copies), which is how the
  // executor charges their bytes.
  virtual std::int64_t first_gpu(RankId r) const = 0;
  virtual int width(RankId r) const = 0;
  virtual const std::vector<Group>& groups() const = 0;
  // Kernel sequences compute nodes name; each runs as one piece of work (the sum of its parts'
  // nominal times) on the rank's GPU.
  virtual const std::vector<std::vector<Work>>& kernels() const = 0;
  // Names of the phases nodes are charged to; phase 0 is the rank's own compute.
  virtual const std::vector<std::string>& phases() const = 0;
  // Appends the next nodes of rank r's program to `out` (at least one), or returns false when
  // the program has ended. Called in order for each rank, interleaved across ranks.
  virtual bool next(RankId r, std::vector<Node>& out) = 0;
  // Nodes in the whole graph when known (progress and budgets), else 0.
  virtual double expected_nodes() const { return 0; }
};

}  // namespace mlsim::workload
