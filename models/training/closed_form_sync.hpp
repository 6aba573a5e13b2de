#pragma once
// Data-parallel synchronisation in closed form, with no traffic: each chunk's collectives over the
// workers take the time collectives::InterHostClosedForm gives (collective_cost by the
// operation's first algorithm, the ring, over the narrowest route between consecutive workers'
// hosts, that bandwidth split among SyncOptions::host_link_sharers GPUs), one after the other, as
// the execution graph's closed form (CommunicationMode::kClosedForm) prices a collective node:
// ASTRA-sim's analytical network mode. Registered twice (policies.cpp):
//   - ring_closed_form: one all-reduce per chunk (AllReduceSync's ring, priced);
//   - reduce_scatter_all_gather_closed_form: a reduce-scatter, then an all-gather of the same
//     bytes (ReduceScatterAllGatherSync's two rings, priced).
// As those strategies, a layer's chunks leave once every worker produced the layer (kAllWorkers),
// one tensor at a time, and a chunk arrives on every worker when its last collective ended.
// Nothing crosses the network (bytes_sent, bytes_delivered and messages stay 0), so contention and
// link events do not apply, and the host costs, window and flow label of SyncOptions are not used
// (the graph's closed form has none of them). Needs SyncOptions::links. With
// SyncOptions::hardware set, workers all on one host are priced over its intra_node link instead
// (intra_host.hpp, `workers` GPUs; the link sharers do not apply), as the graph prices a
// collective whose ranks share a host.
#include <memory>
#include <vector>

#include "models/training/sync_setup.hpp"
#include "sim_core/collectives/collective.hpp"
#include "sim_core/collectives/inter_host.hpp"

namespace mlsim::training {

class ClosedFormSync final : public GradientSync {
 public:
  // `operations`: each chunk's collectives, in order (kAllReduce; or kReduceScatter, kAllGather).
  ClosedFormSync(SyncSetup setup, std::vector<collectives::Operation> operations);

  Entry entry() const override { return Entry::kAllWorkers; }
  bool one_tensor_at_a_time() const override { return true; }
  bool layout_matters() const override { return false; }
  void set_partition(std::int64_t) override {}
  void start(std::size_t owner, const Chunk& chunk) override;

  std::int64_t bytes_sent() const override { return 0; }
  std::int64_t bytes_delivered() const override { return 0; }
  std::uint64_t messages() const override { return 0; }

 private:
  // Runs collective `step` of chunk c, then the next, then reports the chunk.
  void run(const Chunk& c, std::size_t step);

  Engine& engine_;
  SyncEvents& events_;
  SyncOptions options_;
  std::vector<collectives::Operation> operations_;
  std::unique_ptr<collectives::InterHostClosedForm> closed_form_;
};

}  // namespace mlsim::training
