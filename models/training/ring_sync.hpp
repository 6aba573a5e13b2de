#pragma once
// Ring all-reduce synchronisation, Horovod style: a layer's chunks leave once every worker
// produced the layer (one scheduler for the job, Horovod's coordinator), and each chunk is one
// sim_core ring all-reduce over the workers: 2 (N - 1) steps of chunk / N bytes, each worker
// forwarding a step as soon as it received the previous one. The framework runs one tensor at a
// time (collectives in order on one stream).
#include <vector>

#include "models/training/collective_slots.hpp"
#include "models/training/sync_setup.hpp"
#include "sim_core/collectives/host_send_clock.hpp"

namespace mlsim::training {

class RingSync final : public GradientSync {
 public:
  explicit RingSync(SyncSetup setup);

  Entry entry() const override { return Entry::kAllWorkers; }
  bool one_tensor_at_a_time() const override { return true; }
  bool layout_matters() const override { return false; }
  void set_partition(std::int64_t) override {}
  void start(std::size_t owner, const Chunk& chunk) override;

  std::int64_t bytes_sent() const override { return slots_.bytes_sent(); }
  std::int64_t bytes_delivered() const override { return slots_.bytes_delivered(); }
  std::uint64_t messages() const override { return slots_.messages(); }

 private:
  void done(std::uint32_t slot);

  Engine& engine_;
  Network& network_;
  SyncEvents& events_;
  SyncOptions options_;
  collectives::HostSendClock clock_;
  CollectiveSlots slots_;
};

}  // namespace mlsim::training
