#include "sim_core/engine/random.hpp"

#include <cmath>

#include "sim_core/base/error.hpp"

namespace mlsim {

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t stable_hash(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return mix64(h);
}

RandomStream::RandomStream(std::uint64_t seed, std::string_view name)
    : RandomStream(mix64(seed) ^ stable_hash(name)) {}

RandomStream::RandomStream(std::uint64_t raw_seed) {
  std::uint64_t x = raw_seed;
  for (auto& s : s_) {
    x += 0x9e3779b97f4a7c15ULL;
    s = mix64(x);
  }
}

static inline std::uint64_t rotl(std::uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

std::uint64_t RandomStream::next_u64() {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double RandomStream::uniform() {
  return static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
}

std::uint64_t RandomStream::below(std::uint64_t n) {
  MLSIM_CHECK(n > 0, "below(0)");
  // Lemire's multiply-shift with rejection: unbiased.
  for (;;) {
    unsigned __int128 m = static_cast<unsigned __int128>(next_u64()) * n;
    auto low = static_cast<std::uint64_t>(m);
    if (low >= n || low >= (-n) % n) return static_cast<std::uint64_t>(m >> 64);
  }
}

double RandomStream::exponential(double rate) {
  MLSIM_CHECK(rate > 0, "exponential rate must be positive");
  return -std::log1p(-uniform()) / rate;
}

double RandomStream::normal(double mean, double stddev) {
  // Box-Muller, one value per call (keeps the stream stateless apart from the generator).
  double u1 = uniform();
  double u2 = uniform();
  if (u1 < 1e-300) u1 = 1e-300;
  return mean + stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

double RandomStream::gamma(double shape, double scale) {
  MLSIM_CHECK(shape > 0 && scale > 0, "gamma parameters must be positive");
  if (shape < 1) {
    double u = uniform();
    if (u < 1e-300) u = 1e-300;
    return gamma(shape + 1, scale) * std::pow(u, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x = normal(0, 1);
    double v = 1 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    double u = uniform();
    if (u < 1 - 0.0331 * x * x * x * x) return d * v * scale;
    if (std::log(u) < 0.5 * x * x + d * (1 - v + std::log(v))) return d * v * scale;
  }
}

double RandomStream::lognormal(double mu, double sigma) {
  return std::exp(normal(mu, sigma));
}

}  // namespace mlsim
