#include "models/pipeline/pipedream_partitioner.hpp"

#include <algorithm>
#include <limits>

#include "sim_core/base/error.hpp"

namespace mlsim::pipeline {

double pipedream_objective(const std::vector<LayerCost>& layers, const Partition& p,
                           const Conditions& c) {
  const StageCosts s = stage_costs(layers, p, c);
  double worst = 0;
  for (std::size_t st = 0; st < p.stages(); ++st) {
    worst = std::max(worst, s.forward_s[st] + s.backward_s[st]);
    if (st + 1 < p.stages())
      worst = std::max(worst, 2 * s.boundary_bytes[st] / c.link_bandwidth[st]);
  }
  return worst;
}

Partition pipedream_partition(const std::vector<LayerCost>& layers, const Conditions& c) {
  const std::size_t n = layers.size(), stages = c.stages();
  MLSIM_CHECK(stages >= 1 && n >= stages, "fewer layers than pipeline stages");
  // prefix[m][j]: forward + backward of layers [0, j) on stage m's host now.
  std::vector<std::vector<double>> prefix(stages, std::vector<double>(n + 1, 0));
  for (std::size_t m = 0; m < stages; ++m) {
    const StageHost& h = c.hosts[m];
    MLSIM_CHECK(h.forward_s.size() == n && h.backward_s.size() == n,
                "a stage host without a time for every layer");
    for (std::size_t l = 0; l < n; ++l)
      prefix[m][l + 1] = prefix[m][l] + (h.forward_s[l] + h.backward_s[l]) / h.speed;
  }
  const double inf = std::numeric_limits<double>::infinity();
  // best[m][j]: layers [0, j) on stages 0..m-1; cut[m][j]: where stage m-1 starts.
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<std::size_t>> cut(stages + 1, std::vector<std::size_t>(n + 1, 0));
  for (std::size_t j = 1; j <= n; ++j) best[1][j] = prefix[0][j];
  for (std::size_t m = 2; m <= stages; ++m) {
    for (std::size_t j = m; j <= n; ++j) {
      for (std::size_t i = m - 1; i < j; ++i) {
        const double comm = 2 * layers[i - 1].activation_bytes / c.link_bandwidth[m - 2];
        const double last = prefix[m - 1][j] - prefix[m - 1][i];
        const double v = std::max({best[m - 1][i], comm, last});
        if (v < best[m][j]) {
          best[m][j] = v;
          cut[m][j] = i;
        }
      }
    }
  }
  Partition p;
  p.first.assign(stages + 1, 0);
  p.first[stages] = n;
  for (std::size_t m = stages, j = n; m >= 2; --m) {
    j = cut[m][j];
    p.first[m - 1] = j;
  }
  return p;
}

}  // namespace mlsim::pipeline
