#pragma once
// The framework's own order (no scheduler): whole tensors in the order they become ready, served
// by `engines` communication engines, each one tensor at a time (0 = no limit: every ready tensor
// at once). One engine is the baseline ByteScheduler describes (the framework engine hands its
// communication ops to a FIFO stack one after another; Horovod runs its collectives in order on
// one stream); what a tensor holds its engine for is the strategy's release (a PS push until the
// servers received it, or until the pull is back with credit_scope push_pull). No tensor fusion.
#include <cstdint>
#include <deque>
#include <optional>

#include "models/training/comm_scheduler.hpp"

namespace mlsim::training {

class FifoScheduler final : public CommScheduler {
 public:
  // engines: tensors in flight at once (0 = no limit).
  explicit FifoScheduler(int engines);

  std::int64_t partition() const override { return 0; }
  void ready(const Chunk& chunk) override { queue_.push_back(chunk); }
  std::optional<Chunk> next() override;
  void completed(const Chunk& chunk) override;
  // What FIFO stands for in ByteScheduler's terms: whole tensors (partition 0) and no credit
  // limit (0), or a credit of 1 parameter (one engine: one tensor at a time). Several engines
  // have no credit equivalent and report no limit.
  SchedulerConfig config() const override { return {0, engines_ == 1 ? 1 : 0}; }
  void set_config(const SchedulerConfig&) override {}  // nothing to tune
  std::int64_t credit_left() const override { return config().credit - in_flight_; }
  int engines() const { return engines_; }

 private:
  int engines_;
  int busy_ = 0;                // engines with a tensor in flight
  std::int64_t in_flight_ = 0;  // parameters
  std::deque<Chunk> queue_;
};

}  // namespace mlsim::training
