#include "models/commsched/credit_scheduler.hpp"

#include "sim_core/base/error.hpp"

namespace mlsim::commsched {

std::vector<std::int64_t> partition_tensor(std::int64_t parameters, std::int64_t partition) {
  MLSIM_CHECK(parameters >= 0 && partition >= 0, "negative tensor or partition size");
  std::vector<std::int64_t> chunks;
  if (parameters == 0) return chunks;
  if (partition == 0 || partition >= parameters) return {parameters};
  for (std::int64_t left = parameters; left > 0; left -= partition)
    chunks.push_back(std::min(left, partition));
  return chunks;
}

CreditScheduler::CreditScheduler(Order order, std::int64_t credit) : order_(order) {
  set_credit(credit);
}

void CreditScheduler::set_credit(std::int64_t credit) {
  MLSIM_CHECK(credit >= 0, "negative credit");
  limit_ = credit;
}

void CreditScheduler::ready(const Chunk& chunk) {
  Entry e;
  e.sequence = sequence_++;
  if (order_ == Order::kLayer) {
    e.major = chunk.layer;
    e.minor = chunk.index;
  }
  e.chunk = chunk;
  queue_.push(e);
}

std::optional<Chunk> CreditScheduler::next() {
  if (queue_.empty()) return std::nullopt;
  if (limit_ > 0 && credit_left() <= 0) return std::nullopt;
  const Chunk chunk = queue_.top().chunk;
  queue_.pop();
  in_flight_ += chunk.parameters;
  return chunk;
}

void CreditScheduler::completed(const Chunk& chunk) {
  MLSIM_CHECK(chunk.parameters <= in_flight_, "a chunk completed that was not in flight");
  in_flight_ -= chunk.parameters;
}

}  // namespace mlsim::commsched
