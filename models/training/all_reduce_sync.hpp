#pragma once
// All-reduce synchronisation, Horovod / NCCL style: a layer's chunks leave once every worker
// produced the layer (one scheduler for the job, Horovod's coordinator), and each chunk is one
// sim_core all-reduce over the workers with the algorithm the strategy was registered with:
//   - ring: 2 (N - 1) steps of chunk / N bytes, each worker forwarding a step as soon as it
//     received the previous one;
//   - tree: reduce up a binary tree rooted at the first worker, then broadcast down
//     (sim_core/collectives/tree.cpp; each chunk in one piece);
//   - rat: RAT's per-rack aggregators joined by the widest tree of racks over the links as they
//     are when the chunk starts (sim_core/collectives/rat_plan.hpp); needs SyncOptions::links.
// The framework runs one tensor at a time (collectives in order on one stream). A chunk's
// collective is kept and rearmed for its next round while the partition leaves its size
// unchanged.
#include <vector>

#include "models/training/collective_sync.hpp"

namespace mlsim::training {

class AllReduceSync final : public CollectiveSync {
 public:
  AllReduceSync(SyncSetup setup, collectives::Algorithm algorithm);

  Entry entry() const override { return Entry::kAllWorkers; }
  bool one_tensor_at_a_time() const override { return true; }
  bool layout_matters() const override { return false; }
  void set_partition(std::int64_t) override {}
  void start(std::size_t owner, const Chunk& chunk) override;

 private:
  void done(std::uint32_t layer, std::uint32_t index);

  collectives::Algorithm algorithm_;
};

}  // namespace mlsim::training
