#pragma once
// Communication scheduling: the layer between "a layer's gradient is ready" and the
// synchronisation strategy (docs/training.md). The gradient path cuts each ready gradient into
// chunks of partition() parameters and hands them over with ready(); it starts every chunk
// next() returns, and tells the scheduler when a chunk gives its credit back (completed()). A
// scheduler is pure bookkeeping, no clock.
//
// Adding one: a class implementing this interface in its own file, and one add() line in
// models/training/policies.cpp that registers its factory under a name.
#include <cstdint>
#include <optional>

#include "models/training/chunk.hpp"

namespace mlsim::training {

class CommScheduler {
 public:
  virtual ~CommScheduler() = default;
  // Parameters per chunk for gradients cut from now on; 0 = whole tensors.
  virtual std::int64_t partition() const = 0;
  virtual void ready(const Chunk& chunk) = 0;
  // The chunk to start now (removed from the queue, its credit charged), or nothing.
  virtual std::optional<Chunk> next() = 0;
  virtual void completed(const Chunk& chunk) = 0;
  // The knobs in force, and a change of them: the credit applies at once (chunks in flight keep
  // what they hold), the partition to gradients cut afterwards. Schedulers without knobs report
  // what they stand for and ignore changes.
  virtual SchedulerConfig config() const = 0;
  virtual void set_config(const SchedulerConfig& config) = 0;
  // For traces: credit left after the last event (parameters; may be negative).
  virtual std::int64_t credit_left() const = 0;
};

// What a scheduler is built with.
struct SchedulerSetup {
  SchedulerConfig config;
  // The synchronisation strategy runs one tensor at a time (Horovod's collectives in order on
  // one stream): the framework's FIFO then starts a tensor only when the previous one is done.
  bool one_tensor_at_a_time = false;
  // The framework FIFO's engines: tensors in flight at once, in the order they became ready
  // (0 = no limit). Absent: 1 when the strategy runs one tensor at a time, else no limit.
  std::optional<int> fifo_engines;
  // This owner's chunks bypass the queue and the credit and start as soon as they are ready
  // (ByteScheduler's immediate tasks: in MXNet PS mode only rank 0 schedules, [code:
  // bytescheduler/mxnet/kvstore.py ScheduledKVStore.__init__, common/bytecore.py ByteCore.post]).
  bool immediate = false;
};

// Who orders and paces a kPerWorker strategy's chunks (GradientPath::set_ordering), as
// ByteScheduler is deployed [code: bytedance/byteps@bytescheduler, bytescheduler/]:
//   kEveryWorker: each worker's own scheduler (and credit) orders its own chunks.
//   kRankZero: worker 0's scheduler orders and paces; every other worker starts each chunk as
//     soon as it is ready (mxnet/kvstore.py ScheduledKVStore.__init__ makes every rank but 0
//     "immediate"; common/bytecore.py ByteCore.post starts an immediate task at once).
//   kJob: one order for the job, worker 0's scheduler's, as over a collective (mxnet/horovod.py
//     ScheduledOptimizer.__init__, "Let rank 0 decide the communication order"; the other ranks
//     post immediately and Horovod runs a collective once every rank posted it): a layer enters
//     the scheduler once every worker produced it, a chunk it releases starts on every worker at
//     once, and its credit returns when worker 0 has it back. Every worker then starts the
//     same chunks in the same order, which a strategy needs when a chunk completes only with
//     every worker's part and each worker's sender serves its chunks in order behind a bounded
//     window (in-network aggregation: docs/cluster.md, "ByteScheduler over ATP").
enum class Ordering { kEveryWorker, kRankZero, kJob };

}  // namespace mlsim::training
