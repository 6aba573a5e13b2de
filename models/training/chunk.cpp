#include "models/training/chunk.hpp"

#include <algorithm>

#include "sim_core/base/error.hpp"

namespace mlsim::training {

std::vector<std::int64_t> partition_tensor(std::int64_t parameters, std::int64_t partition) {
  MLSIM_CHECK(parameters >= 0 && partition >= 0, "negative tensor or partition size");
  std::vector<std::int64_t> chunks;
  if (parameters == 0) return chunks;
  if (partition == 0 || partition >= parameters) return {parameters};
  for (std::int64_t left = parameters; left > 0; left -= partition)
    chunks.push_back(std::min(left, partition));
  return chunks;
}

}  // namespace mlsim::training
