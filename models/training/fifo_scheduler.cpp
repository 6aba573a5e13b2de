#include "models/training/fifo_scheduler.hpp"

#include "sim_core/base/error.hpp"

namespace mlsim::training {

FifoScheduler::FifoScheduler(int engines) : engines_(engines) {
  MLSIM_CHECK(engines >= 0, "a negative number of FIFO engines");
}

std::optional<Chunk> FifoScheduler::next() {
  if (queue_.empty() || (engines_ > 0 && busy_ >= engines_)) return std::nullopt;
  const Chunk chunk = queue_.front();
  queue_.pop_front();
  in_flight_ += chunk.parameters;
  ++busy_;
  return chunk;
}

void FifoScheduler::completed(const Chunk& chunk) {
  MLSIM_CHECK(chunk.parameters <= in_flight_, "a chunk completed that was not in flight");
  MLSIM_CHECK(busy_ > 0, "a chunk completed on no busy engine");
  in_flight_ -= chunk.parameters;
  --busy_;
}

}  // namespace mlsim::training
