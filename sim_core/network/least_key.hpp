#pragma once
// The first index of the least value in an array of doubles: the flow backend's scan filling
// (FluidNetwork::fill_by_scan) picks the next link to freeze with it, over the links' shares kept
// in a flat array (+infinity for a link with nothing left to freeze).
#include <cstddef>
#include <limits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace mlsim {

// The first index i of the least of keys[0, n), or n if every key is +infinity (or n is 0).
// Keys must hold no NaN. By blocks of four: each block's least value (two SSE2 lanes where
// available) against the least so far, strictly less, so the first block holding the least
// value is kept; then the first index in it holding that value. (-0 and +0 are equal here, as
// for operator<.)
inline std::size_t first_least(const double* keys, std::size_t n) {
  double least = std::numeric_limits<double>::infinity();
  std::size_t at = n;
  std::size_t i = 0;
#if defined(__SSE2__)
  for (; i + 4 <= n; i += 4) {
    __m128d m = _mm_min_pd(_mm_loadu_pd(keys + i), _mm_loadu_pd(keys + i + 2));
    m = _mm_min_sd(m, _mm_unpackhi_pd(m, m));
    if (const double v = _mm_cvtsd_f64(m); v < least) {
      least = v;
      at = i;
    }
  }
#endif
  for (; i < n; ++i) {
    if (keys[i] < least) {
      least = keys[i];
      at = i;
    }
  }
  if (at == n) return n;
  while (keys[at] != least) ++at;
  return at;
}

}  // namespace mlsim
