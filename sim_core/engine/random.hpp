#pragma once
// Named random streams. Each stream is seeded from (scenario seed, component name), so adding a
// component, or drawing more numbers in one, never shifts another component's draws.
// The generator and the distributions are implemented here (not std:: distributions, whose
// algorithms differ between standard libraries), so results are byte-identical everywhere.
#include <cstdint>
#include <string_view>

namespace mlsim {

class RandomStream {
 public:
  RandomStream(std::uint64_t seed, std::string_view name);
  explicit RandomStream(std::uint64_t raw_seed);

  std::uint64_t next_u64();
  // Uniform in [0, 1), 53 random bits.
  double uniform();
  // Uniform integer in [0, n); n > 0.
  std::uint64_t below(std::uint64_t n);
  double exponential(double rate);
  double normal(double mean, double stddev);
  // Gamma with shape k > 0 and scale theta > 0 (Marsaglia-Tsang).
  double gamma(double shape, double scale);
  double lognormal(double mu, double sigma);

 private:
  std::uint64_t s_[4];  // xoshiro256** state
};

// 64-bit hash of a name (FNV-1a followed by a SplitMix64 finaliser); stable across platforms.
std::uint64_t stable_hash(std::string_view s);
std::uint64_t mix64(std::uint64_t x);

}  // namespace mlsim
