#include "models/pipeline/one_f_one_b.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "sim_core/base/error.hpp"

namespace mlsim::pipeline {

double estimate_1f1b(const StageCosts& costs, const Conditions& c, std::size_t minibatches) {
  const std::size_t S = costs.forward_s.size(), M = minibatches;
  const double unknown = std::numeric_limits<double>::quiet_NaN();
  // Arrival of minibatch m's activation at stage s (from s - 1) and of its gradient (from s + 1).
  std::vector<std::vector<double>> act_in(S, std::vector<double>(M, unknown));
  std::vector<std::vector<double>> grad_in(S, std::vector<double>(M, unknown));
  for (std::size_t m = 0; m < M; ++m) act_in[0][m] = 0;  // the input stage reads its own data
  std::vector<std::size_t> fwd(S, 0), bwd(S, 0);
  std::vector<double> gpu_free(S, 0), nic_free(S, 0);
  double end = 0;
  // Arrival time of a transfer over `boundary` handed to `from`'s NIC at t.
  auto send = [&](std::size_t from, std::size_t boundary, double t) {
    const double start = std::max(t, nic_free[from]);
    nic_free[from] = start + costs.boundary_bytes[boundary] / c.link_bandwidth[boundary];
    return nic_free[from] + c.link_latency[boundary];
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (std::size_t s = 0; s < S; ++s) {
      for (;;) {
        const Op op = next_op(s, S, fwd[s], bwd[s], M);
        if (op == Op::kNone) break;
        if (op == Op::kForward) {
          const std::size_t m = fwd[s];
          if (std::isnan(act_in[s][m])) break;
          const double done = std::max(gpu_free[s], act_in[s][m]) + costs.forward_s[s];
          gpu_free[s] = done;
          ++fwd[s];
          if (s + 1 < S) {
            act_in[s + 1][m] = send(s, s, done);
          } else {
            grad_in[s][m] = done;  // the loss is computed where the forward ends
          }
        } else {
          const std::size_t m = bwd[s];
          if (std::isnan(grad_in[s][m])) break;
          const double done = std::max(gpu_free[s], grad_in[s][m]) + costs.backward_s[s];
          gpu_free[s] = done;
          ++bwd[s];
          if (s > 0) grad_in[s - 1][m] = send(s, s - 1, done);
          if (s == 0) end = std::max(end, done);
        }
        progress = true;
      }
    }
  }
  for (std::size_t s = 0; s < S; ++s) MLSIM_CHECK(bwd[s] == M, "1F1B estimate deadlocked");
  return end;
}

double steady_state_seconds(const std::vector<LayerCost>& layers, const Partition& p,
                            const Conditions& c) {
  const StageCosts costs = stage_costs(layers, p, c);
  const std::size_t S = p.stages(), lo = 2 * S, hi = 6 * S;
  return (estimate_1f1b(costs, c, hi) - estimate_1f1b(costs, c, lo)) / static_cast<double>(hi - lo);
}

}  // namespace mlsim::pipeline
