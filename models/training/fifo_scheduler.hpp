#pragma once
// The framework's own order (no scheduler): whole tensors in the order they become ready, all
// at once (MXNet pushes each gradient as it is produced), or one at a time when the
// synchronisation strategy runs tensors in order on one stream (Horovod) [inferred]. No tensor
// fusion.
#include <cstdint>
#include <deque>
#include <optional>

#include "models/training/comm_scheduler.hpp"

namespace mlsim::training {

class FifoScheduler final : public CommScheduler {
 public:
  explicit FifoScheduler(bool one_at_a_time) : one_at_a_time_(one_at_a_time) {}

  std::int64_t partition() const override { return 0; }
  void ready(const Chunk& chunk) override { queue_.push_back(chunk); }
  std::optional<Chunk> next() override;
  void completed(const Chunk& chunk) override;
  // What FIFO stands for in ByteScheduler's terms: whole tensors (partition 0) and no credit
  // limit (0), or a credit of 1 parameter (one tensor at a time).
  SchedulerConfig config() const override { return {0, one_at_a_time_ ? 1 : 0}; }
  void set_config(const SchedulerConfig&) override {}  // nothing to tune
  std::int64_t credit_left() const override { return config().credit - in_flight_; }

 private:
  bool one_at_a_time_;
  std::int64_t in_flight_ = 0;  // parameters
  std::deque<Chunk> queue_;
};

}  // namespace mlsim::training
