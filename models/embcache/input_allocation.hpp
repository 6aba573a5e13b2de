#pragma once
// Splitting a global batch of samples among workers.
//   - sequential: worker w takes samples [w b, (w + 1) b) (the HET baseline's data loader).
//   - location-aware (Herald's LAIA, HKUST-SING/herald laia_scheduler.cc get_dist): samples in
//     order, each to the worker whose cache holds the most of its rows up to date, among workers
//     still below b samples; ties go to the first in the rotation starting at
//     (sample index + batch number) mod n.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "models/embcache/lru_cache.hpp"
#include "models/embcache/sample_source.hpp"

namespace mlsim::embcache {

// For each worker, the indices of its samples.
using SampleAssignment = std::vector<std::vector<std::size_t>>;

SampleAssignment sequential_allocation(std::size_t samples, std::size_t workers);

// `fresh_mask(key)`: bit w set when worker w holds the row up to date (at most 64 workers).
template <typename FreshMask>
SampleAssignment location_aware_allocation(const std::vector<Sample>& batch, std::size_t workers,
                                           std::uint64_t batch_number, FreshMask fresh_mask) {
  const std::size_t cap = (batch.size() + workers - 1) / workers;
  const std::uint64_t all = workers >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << workers) - 1;
  SampleAssignment out(workers);
  std::vector<std::size_t> score(workers);
  for (std::size_t j = 0; j < batch.size(); ++j) {
    std::fill(score.begin(), score.end(), 0);
    for (Key k : batch[j]) {
      const std::uint64_t mask = fresh_mask(k) & all;
      for (std::uint64_t m = mask; m != 0; m &= m - 1)
        ++score[static_cast<std::size_t>(__builtin_ctzll(m))];
    }
    std::size_t best = workers;
    for (std::size_t t = 0; t < workers; ++t) {
      const std::size_t w = (j + batch_number + t) % workers;
      if (out[w].size() >= cap) continue;
      if (best == workers || score[w] > score[best]) best = w;
    }
    out[best].push_back(j);
  }
  return out;
}

}  // namespace mlsim::embcache
