#pragma once
// Parameter-server synchronisation, MXNet kvstore style: each worker pushes a chunk as soon as
// its scheduler releases it, without waiting for the other workers; a server answers a slice's
// pulls once every worker pushed it. A chunk larger than `bigarray_bound` values is sliced
// evenly over all servers, otherwise it goes whole to server (key mod servers), keys numbered
// over (layer, chunk). Each round of a chunk is one sim_core parameter-server collective whose
// workers join as they push (Collective::join); two collectives per chunk take the rounds in
// turn (round i+1 can start before round i's last pull arrived, never before round i-1 ended); its
// kSent event gives the worker's credit back (or its kHolds event, with credit_until_pull), its
// kHolds event is the chunk's arrival.
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
  struct Round {
    std::uint32_t round = 0;   // of this chunk; its collective is copy round % 2
    std::uint32_t joined = 0;  // workers that joined it
  };
  ChunkCollectives::Entry& open(const Chunk& chunk, std::uint32_t copy);
  void on_participant(std::uint32_t layer, std::uint32_t index, std::uint32_t worker,
                      collectives::ParticipantEvent e);

  std::vector<std::size_t> first_key_;             // per layer: key of its chunk 0
  std::vector<std::vector<Round>> rounds_;         // per layer and chunk
  std::vector<std::vector<std::int64_t>> chunks_;  // per layer: the chunks' parameters
};

}  // namespace mlsim::training
