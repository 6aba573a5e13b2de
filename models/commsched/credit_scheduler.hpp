#pragma once
// ByteScheduler's core [code: bytedance/byteps@bytescheduler, bytescheduler/common/bytecore.py,
// bytetask.py]: tensors cut into chunks, one priority queue of ready chunks, and a credit window
// of parameters in flight. Pure bookkeeping, no clock: the training job asks for the next chunk
// whenever a gradient becomes ready or a chunk completes.
//
// Credit follows bytecore.py: a chunk is popped while the credit left is positive, and its size
// is charged even when that takes the credit below zero (by less than one chunk); a completed
// chunk gives its size back. So the parameters in flight never exceed credit + one chunk - 1, and
// a chunk larger than the whole window still goes, alone.
#include <compare>
#include <cstdint>
#include <optional>
#include <queue>
#include <tuple>
#include <vector>

namespace mlsim::commsched {

struct SchedulerConfig {
  std::int64_t partition = 0;  // parameters per chunk; 0 = whole tensors
  std::int64_t credit = 0;     // parameters in flight; 0 = unlimited
  auto operator<=>(const SchedulerConfig&) const = default;
};

// A tensor of `parameters` cut into chunks of `partition` (the last one smaller); one chunk when
// `partition` is 0 or not smaller than the tensor. An empty tensor has no chunk.
std::vector<std::int64_t> partition_tensor(std::int64_t parameters, std::int64_t partition);

struct Chunk {
  std::uint32_t layer = 0;  // forward order: 0 is next to the input
  std::uint32_t index = 0;  // child index within the layer's tensor
  std::int64_t parameters = 0;
};

enum class Order {
  kReady,  // FIFO: the order chunks become ready (the framework's own order)
  kLayer,  // ByteScheduler: layer index first (input side first), then child index
};

class CreditScheduler {
 public:
  CreditScheduler(Order order, std::int64_t credit);

  // Changes the window; chunks in flight keep the credit they hold.
  void set_credit(std::int64_t credit);
  void ready(const Chunk& chunk);
  // The chunk to start now (removed from the queue, its credit charged), or nothing when the
  // queue is empty or no credit is left.
  std::optional<Chunk> next();
  void completed(const Chunk& chunk);

  std::int64_t credit_limit() const { return limit_; }  // 0 = unlimited
  std::int64_t credit_left() const { return limit_ - in_flight_; }
  std::int64_t in_flight() const { return in_flight_; }
  std::size_t queued() const { return queue_.size(); }

 private:
  struct Entry {
    std::uint64_t major = 0, minor = 0, sequence = 0;
    Chunk chunk;
    bool operator>(const Entry& o) const {
      return std::tie(major, minor, sequence) > std::tie(o.major, o.minor, o.sequence);
    }
  };

  Order order_;
  std::int64_t limit_ = 0;
  std::int64_t in_flight_ = 0;
  std::uint64_t sequence_ = 0;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue_;
};

}  // namespace mlsim::commsched
