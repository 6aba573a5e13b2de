#pragma once
// The distributed optimizer's data-parallel synchronisation (Megatron-LM's
// --use-distributed-optimizer; ZeRO stage 1): each worker's gradients are reduce-scattered over
// the workers, so each holds the sum of its 1/N shard, it updates that shard of the parameters,
// and the updated parameters are all-gathered back. As AllReduceSync, a layer's chunks leave once
// every worker produced the layer (kAllWorkers) and one tensor at a time; each chunk is a ring
// reduce-scatter (N - 1 steps of chunk / N bytes) and then, once it ended, a ring all-gather of
// the same bytes (N - 1 steps), two sim_core collectives each paying the collective layer's
// launch cost (where an all-reduce pays it once). The chunk arrives (and gives its credit back)
// when its all-gather ended. The optimizer step between the two is not priced, as the execution
// graph does not price it (docs/llm_training.md).
//
// Per chunk the reduce-scatter of chunk c is followed by its all-gather before the next chunk's
// reduce-scatter; Megatron-LM reduce-scatters every bucket, steps, then all-gathers every bucket.
// On one stream of collectives the two orders take the same time [assumed: nothing else shares
// the links meanwhile]; with a stage as one tensor (MegatronCoreJob's default) there is one chunk.
#include <vector>

#include "models/training/collective_sync.hpp"

namespace mlsim::training {

class ReduceScatterAllGatherSync final : public CollectiveSync {
 public:
  explicit ReduceScatterAllGatherSync(SyncSetup setup);

  Entry entry() const override { return Entry::kAllWorkers; }
  bool one_tensor_at_a_time() const override { return true; }
  bool layout_matters() const override { return false; }
  void set_partition(std::int64_t) override {}
  void start(std::size_t owner, const Chunk& chunk) override;

 private:
  // Starts phase `phase` (0: reduce-scatter, 1: all-gather) of chunk c, its collective built
  // once per chunk and rearmed for later rounds while the chunk's size is unchanged.
  void run(const Chunk& c, std::uint32_t phase);
  void done(std::uint32_t layer, std::uint32_t index, std::uint32_t phase);
};

}  // namespace mlsim::training
