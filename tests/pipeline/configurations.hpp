#pragma once
// Every pipeline configuration of a job, enumerated independently of the planners, for the
// tests that compare a planner or a timing bound against all of them.
#include <cstddef>
#include <functional>

#include "models/pipeline/pipeline_costs.hpp"

namespace mlsim::pipeline::test_support {

// Every configuration of `n` layers on all `hosts` hosts (contiguous stages, each with at least
// one layer and one host; `straight`: one host each).
inline void each_configuration(std::size_t n, std::size_t hosts, bool straight,
                               const std::function<void(const Partition&)>& visit) {
  Partition p;
  p.first = {0};
  std::function<void(std::size_t)> grow = [&](std::size_t used) {
    const std::size_t i = p.first.back();
    if (i == n || used == hosts) {
      if (i == n && used == hosts) visit(p);
      return;
    }
    for (std::size_t j = i + 1; j <= n; ++j)
      for (std::size_t r = 1; r <= (straight ? 1 : hosts - used); ++r) {
        p.first.push_back(j);
        p.replicas.push_back(r);
        grow(used + r);
        p.first.pop_back();
        p.replicas.pop_back();
      }
  };
  grow(0);
}

}  // namespace mlsim::pipeline::test_support
