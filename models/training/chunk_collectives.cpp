#include "models/training/chunk_collectives.hpp"

namespace mlsim::training {

ChunkCollectives::Entry& ChunkCollectives::at(std::uint32_t layer, std::uint32_t index,
                                              std::uint32_t copy) {
  if (layer >= by_layer_.size()) by_layer_.resize(std::size_t{layer} + 1);
  auto& entries = by_layer_[layer];
  const std::size_t i = std::size_t{index} * copies_ + copy;
  if (i >= entries.size()) entries.resize(i + 1);
  return entries[i];
}

void ChunkCollectives::drop(Entry& e) {
  if (!e.collective) return;
  const collectives::CollectiveResult r = e.collective->result();
  bytes_sent_ += r.bytes_sent.count;
  bytes_delivered_ += r.bytes_delivered.count;
  messages_ += r.transfers;
  failed_ += r.failed_transfers;
  e.collective.reset();
}

void ChunkCollectives::clear() {
  for (auto& layer : by_layer_)
    for (Entry& e : layer) drop(e);
  by_layer_.clear();
}

std::int64_t ChunkCollectives::bytes_sent() const {
  std::int64_t total = bytes_sent_;
  for_each_live([&](const collectives::CollectiveResult& r) { total += r.bytes_sent.count; });
  return total;
}

std::int64_t ChunkCollectives::bytes_delivered() const {
  std::int64_t total = bytes_delivered_;
  for_each_live([&](const collectives::CollectiveResult& r) { total += r.bytes_delivered.count; });
  return total;
}

std::uint64_t ChunkCollectives::messages() const {
  std::uint64_t total = messages_;
  for_each_live([&](const collectives::CollectiveResult& r) { total += r.transfers; });
  return total;
}

std::uint64_t ChunkCollectives::failed_transfers() const {
  std::uint64_t total = failed_;
  for_each_live([&](const collectives::CollectiveResult& r) { total += r.failed_transfers; });
  return total;
}

}  // namespace mlsim::training
