#include "models/training/fifo_scheduler.hpp"

#include "sim_core/base/error.hpp"

namespace mlsim::training {

std::optional<Chunk> FifoScheduler::next() {
  if (queue_.empty() || (one_at_a_time_ && in_flight_ > 0)) return std::nullopt;
  const Chunk chunk = queue_.front();
  queue_.pop_front();
  in_flight_ += chunk.parameters;
  return chunk;
}

void FifoScheduler::completed(const Chunk& chunk) {
  MLSIM_CHECK(chunk.parameters <= in_flight_, "a chunk completed that was not in flight");
  in_flight_ -= chunk.parameters;
}

}  // namespace mlsim::training
