#pragma once
// ByteScheduler's core [code: bytedance/byteps@bytescheduler, bytescheduler/common/bytecore.py,
// bytetask.py]: tensors cut into chunks of `partition` parameters, one priority queue of ready
// chunks ordered by layer (input side first), then child index, and a credit window of
// parameters in flight.
//
// Credit follows bytecore.py: a chunk is popped while the credit left is positive, and its size
// is charged even when that takes the credit below zero (by less than one chunk); a completed
// chunk gives its size back. So the parameters in flight never exceed credit + one chunk - 1, and
// a chunk larger than the whole window still goes, alone. A newly ready chunk of a lower layer
// overtakes queued chunks, never one in flight: preemption happens at chunk boundaries.
#include <cstdint>
#include <optional>
#include <queue>
#include <tuple>
#include <vector>

#include "models/training/comm_scheduler.hpp"

namespace mlsim::training {

class ByteScheduler final : public CommScheduler {
 public:
  // immediate: every ready chunk starts at once, whatever the credit (an immediate task of
  // bytecore.py's ByteCore.post, partitioned but never queued).
  explicit ByteScheduler(const SchedulerConfig& config, bool immediate = false);

  std::int64_t partition() const override { return config_.partition; }
  void ready(const Chunk& chunk) override;
  std::optional<Chunk> next() override;
  void completed(const Chunk& chunk) override;
  SchedulerConfig config() const override { return config_; }
  void set_config(const SchedulerConfig& config) override;
  std::int64_t credit_left() const override { return config_.credit - in_flight_; }

  std::int64_t in_flight() const { return in_flight_; }
  std::size_t queued() const { return queue_.size(); }

 private:
  struct Entry {
    std::uint64_t layer = 0, index = 0, sequence = 0;
    Chunk chunk;
    bool operator>(const Entry& o) const {
      return std::tie(layer, index, sequence) > std::tie(o.layer, o.index, o.sequence);
    }
  };

  SchedulerConfig config_;  // credit 0 = unlimited
  bool immediate_ = false;
  std::int64_t in_flight_ = 0;
  std::uint64_t sequence_ = 0;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue_;
};

}  // namespace mlsim::training
