#pragma once
// The ECMP flow labels of an execution graph's network operations (GraphExecutor, network mode),
// and of anything that must route its bytes exactly as the graph does (the training core's
// Megatron job, models/llm_training/megatron_core_job.hpp, which uses these functions with its
// workers numbered as the graph's ranks).
//
// A label is a function of what the operation is, never of the executor's state:
//   - the k-th message from rank A to rank B (k counted from 0 per ordered pair, as the graph
//     matches sends and receives): its own label, so the messages between a pair of ranks (and
//     so of hosts) spread over the equal-cost paths, one path per message;
//   - a collective of a group: the group's label, from its members in order, the same for all
//     of the group's collectives: a group is one NCCL communicator, whose ring connections are
//     set up once and kept, so its collectives take the same paths every time [assumed: the ECMP
//     hash of a connection is fixed for its life]. Inside a collective, each (sender, receiver)
//     transfer mixes its participants into the label (collectives::transfer_label).
// The router then hashes (label, src, dst, node) at every equal-cost choice (routing.hpp).
//
// Neither rule models how NCCL spreads one message over its channels (several connections per
// peer, each with its own path): a message here is one flow on one path. Until 2026-12-07 the
// graph labelled an operation by the index of the executor slot it happened to occupy, which
// depended on what else was in flight; no other simulator could give the same labels.
#include <cstdint>
#include <span>

#include "sim_core/engine/random.hpp"
#include "sim_core/workload/execution_graph.hpp"

namespace mlsim::workload {

// The k-th message from rank `from` to rank `to`.
inline std::uint64_t message_label(RankId from, RankId to, std::uint64_t k) {
  const std::uint64_t pair =
      (std::uint64_t{static_cast<std::uint32_t>(from)} << 32) | static_cast<std::uint32_t>(to);
  return mix64(mix64(pair) ^ k);
}

// Every collective of the group whose members are `members`, in the group's order. A distinct
// seed from message_label's, so that a group of two is not routed as the pair's first message.
inline std::uint64_t group_label(std::span<const RankId> members) {
  std::uint64_t h = 0x67726F7570ull;  // "group"
  for (RankId r : members) h = mix64(h ^ static_cast<std::uint32_t>(r));
  return h;
}

}  // namespace mlsim::workload
