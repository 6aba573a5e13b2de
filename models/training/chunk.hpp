#pragma once
// A piece of one layer's gradient, the unit the communication schedulers order and the
// synchronisation strategies move (docs/training.md).
#include <compare>
#include <cstdint>
#include <vector>

namespace mlsim::training {

struct Chunk {
  std::uint32_t layer = 0;  // forward order: 0 is next to the input
  std::uint32_t index = 0;  // child index within the layer's tensor
  std::int64_t parameters = 0;
};

// A scheduler's two knobs (ByteScheduler's partition and credit sizes), in parameters.
struct SchedulerConfig {
  std::int64_t partition = 0;  // parameters per chunk; 0 = whole tensors
  std::int64_t credit = 0;     // parameters in flight; 0 = unlimited
  auto operator<=>(const SchedulerConfig&) const = default;
};

// A tensor of `parameters` cut into chunks of `partition` (the last one smaller); one chunk when
// `partition` is 0 or not smaller than the tensor. An empty tensor has no chunk.
std::vector<std::int64_t> partition_tensor(std::int64_t parameters, std::int64_t partition);

}  // namespace mlsim::training
