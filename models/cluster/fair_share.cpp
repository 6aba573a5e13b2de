#include "models/cluster/fair_share.hpp"

#include <cmath>

#include "sim_core/base/error.hpp"

namespace mlsim::cluster {

void FairShare::grow(int user) {
  if (static_cast<std::size_t>(user) >= usage_.size()) {
    usage_.resize(static_cast<std::size_t>(user) + 1, 0.0);
    rate_.resize(static_cast<std::size_t>(user) + 1, 0);
  }
}

void FairShare::advance(Time now) {
  MLSIM_CHECK(now >= last_, "fair-share time goes backwards");
  const double d = (now - last_).seconds();
  last_ = now;
  if (d == 0) return;
  if (half_life_ == Time::zero()) {
    for (std::size_t u = 0; u < usage_.size(); ++u) usage_[u] += rate_[u] * d;
    return;
  }
  const double k = std::log(2.0) / half_life_.seconds();
  const double keep = std::exp(-k * d);
  for (std::size_t u = 0; u < usage_.size(); ++u)
    usage_[u] = usage_[u] * keep + rate_[u] * (1 - keep) / k;
}

void FairShare::add_rate(int user, int delta) {
  grow(user);
  rate_[static_cast<std::size_t>(user)] += delta;
  MLSIM_CHECK(rate_[static_cast<std::size_t>(user)] >= 0, "negative GPUs for a user");
}

double FairShare::usage(int user) const {
  return static_cast<std::size_t>(user) < usage_.size() ? usage_[static_cast<std::size_t>(user)]
                                                        : 0.0;
}

int FairShare::allocated(int user) const {
  return static_cast<std::size_t>(user) < rate_.size() ? rate_[static_cast<std::size_t>(user)] : 0;
}

}  // namespace mlsim::cluster
