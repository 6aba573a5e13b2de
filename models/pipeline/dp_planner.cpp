#include "models/pipeline/dp_planner.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "models/pipeline/bottleneck.hpp"
#include "models/pipeline/stage_memory.hpp"
#include "sim_core/base/error.hpp"

namespace mlsim::pipeline {

Plan dp_plan(const std::vector<LayerCost>& layers, const Conditions& c,
             const PlannerOptions& options) {
  const std::size_t n = layers.size(), H = c.host_count();
  MLSIM_CHECK(n >= 1 && H >= 1, "the DP planner needs a layer and a host");
  MLSIM_CHECK(!options.straight || n >= H, "a straight pipeline needs a layer per host");
  const Bottleneck cost(layers, c, options.schedule);
  // Under a memory limit a stage that does not fit is no candidate: feasibility is per stage, so
  // the program stays exact for the bottleneck time over the configurations that fit.
  const StageMemory memory(layers, options.memory, options.schedule, H);
  const double inf = std::numeric_limits<double>::infinity();
  // best[j][m] = D[j][m]; start[j][m] where its last stage starts (0: one stage), reps[j][m]
  // that stage's hosts.
  std::vector<std::vector<double>> best(n + 1, std::vector<double>(H + 1, inf));
  std::vector<std::vector<std::size_t>> start(n + 1, std::vector<std::size_t>(H + 1, 0));
  std::vector<std::vector<std::size_t>> reps(n + 1, std::vector<std::size_t>(H + 1, 0));
  for (std::size_t m = 1; m <= H; ++m) {
    for (std::size_t j = 1; j <= n; ++j) {
      if ((!options.straight || m == 1) && memory.fits(0, j, 0, m)) {
        best[j][m] = cost.stage(0, j, 0, m);
        reps[j][m] = m;
      }
      for (std::size_t i = 1; i < j; ++i) {
        for (std::size_t r = 1; r < m; ++r) {
          if (options.straight && r > 1) break;
          if (best[i][m - r] == inf) continue;
          // max(prefix, stage) cannot beat the best when the prefix alone does not.
          if (best[i][m - r] >= best[j][m]) continue;
          if (!memory.fits(i, j, m - r, r)) continue;
          const double v = std::max(best[i][m - r], cost.stage(i, j, m - r, r));
          if (v < best[j][m]) {
            best[j][m] = v;
            start[j][m] = i;
            reps[j][m] = r;
          }
        }
      }
    }
  }
  if (best[n][H] == inf && memory.active()) throw nothing_fits(n, H);
  MLSIM_CHECK(best[n][H] < inf, "the DP planner found no configuration");
  Partition p;
  p.first = {n};
  for (std::size_t j = n, m = H; j > 0;) {
    const std::size_t i = start[j][m], r = reps[j][m];
    p.first.push_back(i);
    p.replicas.push_back(r);
    j = i;
    m -= r;
  }
  std::reverse(p.first.begin(), p.first.end());
  std::reverse(p.replicas.begin(), p.replicas.end());
  Plan plan;
  plan.partition = p;
  plan.bottleneck_seconds = best[n][H];
  plan.seconds_per_minibatch = steady_state_seconds(layers, p, c, options.schedule);
  plan.evaluated = 1;
  return plan;
}

}  // namespace mlsim::pipeline
