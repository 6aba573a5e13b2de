#pragma once
// Parameter-server synchronisation, MXNet kvstore style: each worker pushes a chunk as soon as
// its scheduler releases it, without waiting for the other workers; a server answers a slice's
// pulls once every worker pushed it. A chunk larger than `bigarray_bound` values is sliced
// evenly over all servers, otherwise it goes whole to server (key mod servers), keys numbered
// over (layer, chunk). Each (chunk, round) is one sim_core parameter-server collective whose
// workers join as they push (Collective::join); its kSent event gives the worker's credit back
// (or its kHolds event, with credit_until_pull), its kHolds event is the chunk's arrival.
#include <vector>

#include "models/training/collective_sync.hpp"

namespace mlsim::training {

class PsSync final : public CollectiveSync {
 public:
  explicit PsSync(SyncSetup setup);

  Entry entry() const override { return Entry::kPerWorker; }
  bool one_tensor_at_a_time() const override { return false; }
  bool layout_matters() const override { return true; }
  void set_partition(std::int64_t partition) override;
  void start(std::size_t worker, const Chunk& chunk) override;

 private:
  static constexpr std::uint32_t kNone = ~std::uint32_t{0};
  struct Round {
    std::uint32_t slot = kNone;  // the collective workers join now
    std::uint32_t joined = 0;
  };
  std::uint32_t open(const Chunk& chunk);
  void on_participant(std::uint32_t slot, std::uint32_t worker, collectives::ParticipantEvent e);

  std::vector<std::size_t> first_key_;    // per layer: key of its chunk 0
  std::vector<std::vector<Round>> open_;  // per layer and chunk
};

}  // namespace mlsim::training
