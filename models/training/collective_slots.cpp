#include "models/training/collective_slots.hpp"

namespace mlsim::training {

std::uint32_t CollectiveSlots::reserve(const Chunk& chunk) {
  reclaim();
  std::uint32_t slot = 0;
  if (free_.empty()) {
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  } else {
    slot = free_.back();
    free_.pop_back();
  }
  slots_[slot].chunk = chunk;
  return slot;
}

void CollectiveSlots::reclaim() {
  for (std::uint32_t slot : retired_) {
    const collectives::CollectiveResult r = slots_[slot].collective->result();
    bytes_sent_ += r.bytes_sent.count;
    bytes_delivered_ += r.bytes_delivered.count;
    messages_ += r.transfers;
    slots_[slot].collective.reset();
    free_.push_back(slot);
  }
  retired_.clear();
}

std::int64_t CollectiveSlots::bytes_sent() const {
  std::int64_t total = bytes_sent_;
  for (const Slot& s : slots_)
    if (s.collective) total += s.collective->result().bytes_sent.count;
  return total;
}

std::int64_t CollectiveSlots::bytes_delivered() const {
  std::int64_t total = bytes_delivered_;
  for (const Slot& s : slots_)
    if (s.collective) total += s.collective->result().bytes_delivered.count;
  return total;
}

std::uint64_t CollectiveSlots::messages() const {
  std::uint64_t total = messages_;
  for (const Slot& s : slots_)
    if (s.collective) total += s.collective->result().transfers;
  return total;
}

}  // namespace mlsim::training
