#include "models/embcache/input_allocation.hpp"

namespace mlsim::embcache {

SampleAssignment sequential_allocation(std::size_t samples, std::size_t workers) {
  SampleAssignment out(workers);
  const std::size_t per = (samples + workers - 1) / workers;
  for (std::size_t j = 0; j < samples; ++j) out[j / per].push_back(j);
  return out;
}

}  // namespace mlsim::embcache
