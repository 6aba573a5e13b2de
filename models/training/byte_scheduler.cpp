#include "models/training/byte_scheduler.hpp"

#include "sim_core/base/error.hpp"

namespace mlsim::training {

ByteScheduler::ByteScheduler(const SchedulerConfig& config, bool immediate)
    : immediate_(immediate) {
  set_config(config);
}

void ByteScheduler::set_config(const SchedulerConfig& config) {
  MLSIM_CHECK(config.credit >= 0 && config.partition >= 0, "negative credit or partition");
  config_ = config;
}

void ByteScheduler::ready(const Chunk& chunk) {
  queue_.push(Entry{chunk.layer, chunk.index, sequence_++, chunk});
}

std::optional<Chunk> ByteScheduler::next() {
  if (queue_.empty()) return std::nullopt;
  if (!immediate_ && config_.credit > 0 && credit_left() <= 0) return std::nullopt;
  const Chunk chunk = queue_.top().chunk;
  queue_.pop();
  in_flight_ += chunk.parameters;
  return chunk;
}

void ByteScheduler::completed(const Chunk& chunk) {
  MLSIM_CHECK(chunk.parameters <= in_flight_, "a chunk completed that was not in flight");
  in_flight_ -= chunk.parameters;
}

}  // namespace mlsim::training
