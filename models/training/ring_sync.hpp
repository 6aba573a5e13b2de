#pragma once
// Ring all-reduce synchronisation, Horovod style: a layer's chunks leave once every worker
// produced the layer (one scheduler for the job, Horovod's coordinator), and each chunk is one
// sim_core ring all-reduce over the workers: 2 (N - 1) steps of chunk / N bytes, each worker
// forwarding a step as soon as it received the previous one. The framework runs one tensor at a
// time (collectives in order on one stream). A chunk's collective is kept and rearmed for its
// next round while the partition leaves its size unchanged.
#include <vector>

#include "models/training/collective_sync.hpp"

namespace mlsim::training {

class RingSync final : public CollectiveSync {
 public:
  explicit RingSync(SyncSetup setup);

  Entry entry() const override { return Entry::kAllWorkers; }
  bool one_tensor_at_a_time() const override { return true; }
  bool layout_matters() const override { return false; }
  void set_partition(std::int64_t) override {}
  void start(std::size_t owner, const Chunk& chunk) override;

 private:
  void done(std::uint32_t layer, std::uint32_t index);
};

}  // namespace mlsim::training
