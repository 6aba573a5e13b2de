#pragma once
// Per-user GPU usage with exponential decay (Slurm's fair-share idea: recent use counts more).
// Usage is integrated exactly between changes of a user's allocated GPUs:
//   U(t + d) = U(t) e^(-k d) + r (1 - e^(-k d)) / k,  k = ln 2 / half-life,
// and without decay (half-life 0) U grows by r d.
#include <vector>

#include "sim_core/base/time.hpp"

namespace mlsim::cluster {

class FairShare {
 public:
  explicit FairShare(Time half_life) : half_life_(half_life) {}

  // Brings every user's usage to `now`.
  void advance(Time now);
  // Changes a user's allocated GPUs by `delta` at `now` (advance first).
  void add_rate(int user, int delta);
  // GPU-seconds, decayed; 0 for a user not seen yet.
  double usage(int user) const;
  int allocated(int user) const;

 private:
  void grow(int user);
  Time half_life_;
  Time last_ = Time::zero();
  std::vector<double> usage_;
  std::vector<int> rate_;
};

}  // namespace mlsim::cluster
