#pragma once
// An all-reduce over GPUs on several hosts as NCCL runs it, in closed form: the structure of
// NCCL's own tuning model for a multi-node communicator (NVIDIA/nccl src/graph/tuning.cc,
// ncclTopoTuneModel: per (algorithm, protocol) a latency of intra-node and inter-node steps and
// a bandwidth; ncclTopoGetAlgoTime: latency + bytes / bandwidth; the enqueue picks the pair of
// least time), with mlsim's fitted per-step costs (costs.hpp) and the bandwidths of the links.
//
// - Ring (NCCL_ALGO_RING across nodes): one ring through all n = g h GPUs, a host's g GPUs
//   consecutive (NVLink inside a host, one network hop out of it). 2(n-1) steps, of which
//   NCCL counts 2(h-1) as inter-node (tuning.cc, nInterSteps). NCCL runs the ring on several
//   channels and each channel leaves a host through a different NIC, so the ring's bus bytes
//   2(n-1)/n S cross a host boundary over all of the host's network bandwidth, not a GPU's
//   share of it; inside a host every GPU's link carries them once.
// - Tree (NCCL_ALGO_TREE): a chain through a host's g GPUs and a (double) binary tree over the
//   h hosts; reduce up, broadcast down. 2((g-1) + ceil(log2 h)) steps, the ceil(log2 h) ones
//   each way inter-node (tuning.cc: 2((nRanks/nNodes-1) intraLat + log2i(nNodes) interLat));
//   2S over the same narrowest bandwidth as the ring: tuning.cc gives both algorithms the
//   channels' bus bandwidth (on up to two nodes, the graph's intra-node speed; that the search
//   keeps it within what the NICs carry is [inferred]) and turns the tree's into algorithm
//   bandwidth by 0.5, the ring's by n / 2(n-1). (Link by link, a double binary tree over two nodes
//   puts only S per direction on the network, half the ring's, so it can beat the network
//   bottleneck when NVLink sustains 2S: NVIDIA/nccl-tests issue 196. NCCL's estimate does not count
//   that, and neither do the measured two-node all-reduces, docs/collectives.md "Across hosts":
//   with link loads instead the 16-GPU rows come out 26-28% off with one NIC per node, 42-48% too
//   fast with two.)
//
//   time = launch + steps x hop_latency(P) + intra_steps x intra_latency
//          + inter_steps x (inter_latency + inter_node_latency)
//          + bytes / (efficiency(P) x min(intra, inter))
//
// inter_node_latency (CostModel) is the time an inter-node step adds beyond the link's own
// latency (NCCL: hwLat[NCCL_HW_NET], the proxy thread and the NIC), fitted on the measured
// two-node all-reduces (docs/collectives.md, "Across hosts"). Not modelled: NCCL's per-size
// corrections (the tree correction factors, the ring's "plateau" factor), the tree's own
// per-step latencies (the ring's fitted ones are used for both), channels fewer than NICs.
#include <optional>

#include "sim_core/base/time.hpp"
#include "sim_core/base/units.hpp"
#include "sim_core/collectives/collective.hpp"
#include "sim_core/collectives/costs.hpp"

namespace mlsim::collectives {

// The GPUs of an all-reduce: `gpus_per_host` on each of `hosts` hosts.
struct HostGroup {
  int hosts = 1;          // h >= 1
  int gpus_per_host = 1;  // g >= 1
  Bandwidth intra;        // one GPU's link inside its host, per direction (> 0 when g > 1)
  Time intra_latency;     // one message from a GPU to another of its host
  Bandwidth inter;        // the route between two hosts: all the host's network bandwidth the
                          // group's channels share, per direction (> 0 when h > 1)
  Time inter_latency;     // one message over that route (its links' latency)
};

struct HierarchicalCost {
  Time time;
  Algorithm algorithm = Algorithm::kRing;  // kRing or kTree
  std::optional<Protocol> protocol;        // none when the model has no protocols
};

// Steps of one piece's critical path for the ring or tree (above), and how many cross hosts.
struct HierarchicalSteps {
  int total = 0;
  int inter = 0;
};
HierarchicalSteps hierarchical_steps(Algorithm a, const HostGroup& group);

// The bytes the algorithm's busiest link carries in one direction: 2(n-1)/n S (ring), 2S (tree);
// 0 for one GPU.
double hierarchical_bytes(Algorithm a, const HostGroup& group, Bytes bytes);

// The time of `a` (kRing or kTree) with protocol `p` (none: no hop latency, efficiency 1).
Time hierarchical_all_reduce_time(const CostModel& model, const HostGroup& group, Algorithm a,
                                  std::optional<Protocol> p, Bytes bytes);

// NCCL's choice: the (algorithm, protocol) of least time over ring and tree and every enabled
// protocol (ties: ring over tree, the later protocol over the earlier, as choose_protocol). One
// GPU: zero. A group on one host (h = 1) is the layer's flat ring, collective_cost over the intra
// link, so single-host figures are unchanged.
HierarchicalCost hierarchical_all_reduce_cost(const CostModel& model, const HostGroup& group,
                                              Bytes bytes);

}  // namespace mlsim::collectives
