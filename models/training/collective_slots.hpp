#pragma once
// The collectives a synchronisation strategy has in flight, one per chunk (and round), in
// reusable slots. A collective's completion callback runs inside the collective, so a finished
// one is only retired there and destroyed at the next add(); its traffic is kept in the totals.
#include <cstdint>
#include <memory>
#include <vector>

#include "models/training/chunk.hpp"
#include "sim_core/collectives/collective.hpp"

namespace mlsim::training {

class CollectiveSlots {
 public:
  struct Slot {
    std::unique_ptr<collectives::Collective> collective;
    Chunk chunk;
  };

  // A free slot for `chunk` (its collective still to be built by the caller with emplace()).
  std::uint32_t reserve(const Chunk& chunk);
  Slot& operator[](std::uint32_t slot) { return slots_[slot]; }
  // The slot's collective finished (called from its completion callback): freed at the next
  // reserve().
  void retire(std::uint32_t slot) { retired_.push_back(slot); }

  std::int64_t bytes_sent() const;
  std::int64_t bytes_delivered() const;
  std::uint64_t messages() const;

 private:
  void reclaim();

  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_, retired_;
  // Traffic of the collectives destroyed so far.
  std::int64_t bytes_sent_ = 0, bytes_delivered_ = 0;
  std::uint64_t messages_ = 0;
};

}  // namespace mlsim::training
