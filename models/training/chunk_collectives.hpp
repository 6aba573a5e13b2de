#pragma once
// The collectives of a synchronisation strategy, one per gradient chunk (layer, index) and kept
// from iteration to iteration: a finished one is rearmed for the chunk's next round
// (Collective::rearm) instead of being built again, so a job does not allocate per chunk.
// `copies` collectives per chunk are used in turn where rounds can overlap (ps: a worker may
// push round i+1 while another still pulls round i). Traffic of dropped collectives is kept in
// the totals.
#include <cstdint>
#include <memory>
#include <vector>

#include "models/training/chunk.hpp"
#include "sim_core/collectives/collective.hpp"

namespace mlsim::training {

class ChunkCollectives {
 public:
  struct Entry {
    std::unique_ptr<collectives::Collective> collective;
    Chunk chunk;
  };

  explicit ChunkCollectives(std::uint32_t copies = 1) : copies_(copies) {}

  // The entry of copy `copy` of chunk (layer, index); empty until the caller builds it.
  Entry& at(std::uint32_t layer, std::uint32_t index, std::uint32_t copy = 0);
  // Destroys the entry's collective (not from inside its own callbacks), keeping its traffic.
  void drop(Entry& e);
  void clear();

  std::int64_t bytes_sent() const;
  std::int64_t bytes_delivered() const;
  std::uint64_t messages() const;
  std::uint64_t failed_transfers() const;

 private:
  template <typename F>
  void for_each_live(F f) const {
    for (const auto& layer : by_layer_)
      for (const Entry& e : layer)
        if (e.collective) f(e.collective->result());
  }

  std::uint32_t copies_;
  std::vector<std::vector<Entry>> by_layer_;           // per layer: index x copies + copy
  std::int64_t bytes_sent_ = 0, bytes_delivered_ = 0;  // of the dropped collectives
  std::uint64_t messages_ = 0, failed_ = 0;
};

}  // namespace mlsim::training
