#include "models/pipeline/pipedream_partitioner.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "models/pipeline/stage_memory.hpp"
#include "sim_core/base/error.hpp"

namespace mlsim::pipeline {
namespace {

// Prefix sums the program needs: per host, forward + backward of layers [0, j) at the host's
// speed now; parameter bytes of layers [0, j).
struct Prefix {
  std::vector<std::vector<double>> time;
  std::vector<double> params;
};

Prefix prefix_sums(const std::vector<LayerCost>& layers, const Conditions& c) {
  const std::size_t n = layers.size();
  Prefix p;
  p.time.assign(c.host_count(), std::vector<double>(n + 1, 0));
  p.params.assign(n + 1, 0);
  for (std::size_t h = 0; h < c.host_count(); ++h) {
    const StageHost& host = c.hosts[h];
    MLSIM_CHECK(host.forward_s.size() == n && host.backward_s.size() == n,
                "a host without a time for every layer");
    for (std::size_t l = 0; l < n; ++l)
      p.time[h][l + 1] = p.time[h][l] + (host.forward_s[l] + host.backward_s[l]) / host.speed;
  }
  for (std::size_t l = 0; l < n; ++l) p.params[l + 1] = p.params[l] + layers[l].parameter_bytes;
  return p;
}

// PipeDream's time of a stage with layers [i, j) on hosts [h, h + r): its compute on the slowest
// replica plus its data-parallel synchronisation over the narrowest link, shared by r replicas.
// With the activation option, also its input (i > 0) and output (j < n) transfers, each over the
// narrowest link among its hosts and, for the input, the host before them.
double stage_time(const std::vector<LayerCost>& layers, const Prefix& pre, const Conditions& c,
                  const PipeDreamOptions& o, std::size_t i, std::size_t j, std::size_t h,
                  std::size_t r) {
  double compute = 0, bandwidth = std::numeric_limits<double>::infinity();
  for (std::size_t x = h; x < h + r; ++x) {
    compute = std::max(compute, pre.time[x][j] - pre.time[x][i]);
    bandwidth = std::min(bandwidth, c.bandwidth[x]);
  }
  const double rd = static_cast<double>(r);
  const double sync = 4 * (rd - 1) * (pre.params[j] - pre.params[i]) / (bandwidth * rd);
  double t = (compute + sync) / rd;
  if (o.activation_compression_ratio) {
    const double ratio = *o.activation_compression_ratio;
    if (i > 0) {
      const double b_in = std::min(bandwidth, c.bandwidth[h - 1]);
      t = std::max(t, 2 * layers[i - 1].activation_bytes / (b_in * rd) / ratio);
    }
    if (j < layers.size())
      t = std::max(t, 2 * layers[j - 1].activation_bytes / (bandwidth * rd) / ratio);
  }
  return t;
}

}  // namespace

double pipedream_objective(const std::vector<LayerCost>& layers, const Partition& p,
                           const Conditions& c, const PipeDreamOptions& options) {
  MLSIM_CHECK(p.first.back() == layers.size() && p.hosts_used() <= c.host_count(),
              "partition does not match the layers and hosts");
  const Prefix pre = prefix_sums(layers, c);
  double worst = 0;
  for (std::size_t s = 0; s < p.stages(); ++s)
    worst = std::max(worst, stage_time(layers, pre, c, options, p.first[s], p.first[s + 1],
                                       p.first_host(s), p.replication(s)));
  return worst;
}

Partition pipedream_partition(const std::vector<LayerCost>& layers, const Conditions& c,
                              const PipeDreamOptions& options) {
  const std::size_t n = layers.size(), H = c.host_count();
  MLSIM_CHECK(n >= 1 && H >= 1, "PipeDream's partitioner needs a layer and a host");
  MLSIM_CHECK(!options.straight || n >= H, "a straight pipeline needs a layer per host");
  const Prefix pre = prefix_sums(layers, c);
  const StageMemory memory(layers, MemoryLimit{options.memory_size, 0}, {}, H,
                           MemoryRule::kPipeDream);
  const double inf = std::numeric_limits<double>::infinity();
  // best[j][m]: layers [0, j) on hosts [0, m). split[j][m]: where the last stage starts (0: one
  // stage) and last[j][m] how many hosts it has.
  std::vector<std::vector<double>> best(n + 1, std::vector<double>(H + 1, inf));
  std::vector<std::vector<std::size_t>> split(n + 1, std::vector<std::size_t>(H + 1, 0));
  std::vector<std::vector<std::size_t>> last(n + 1, std::vector<std::size_t>(H + 1, 0));
  for (std::size_t m = 1; m <= H; ++m) {
    for (std::size_t j = 1; j <= n; ++j) {
      if ((!options.straight || m == 1) && memory.fits(0, j, 0, m)) {
        best[j][m] = stage_time(layers, pre, c, options, 0, j, 0, m);
        last[j][m] = m;
      }
      for (std::size_t i = 1; i < j; ++i) {
        for (std::size_t r = 1; r < m; ++r) {
          if (options.straight && r > 1) break;
          if (best[i][m - r] == inf || !memory.fits(i, j, m - r, r)) continue;
          const double v =
              std::max(best[i][m - r], stage_time(layers, pre, c, options, i, j, m - r, r));
          if (v < best[j][m]) {
            best[j][m] = v;
            split[j][m] = i;
            last[j][m] = r;
          }
        }
      }
    }
  }
  if (best[n][H] == inf && memory.active())
    throw InputError("system.memory",
                     "PipeDream's optimizer (--use_memory_constraint) finds no configuration of "
                     "the " +
                         std::to_string(n) + " layers on " + std::to_string(H) +
                         " hosts whose stages fit in the GPUs' memory");
  // Walk back from all layers on all hosts.
  std::vector<std::size_t> first{n}, replicas;
  for (std::size_t j = n, m = H; j > 0;) {
    MLSIM_CHECK(best[j][m] < inf, "PipeDream's program found no configuration");
    const std::size_t i = split[j][m], r = last[j][m];
    first.push_back(i);
    replicas.push_back(r);
    j = i;
    m -= r;
  }
  std::reverse(first.begin(), first.end());
  std::reverse(replicas.begin(), replicas.end());
  return Partition{first, replicas};
}

}  // namespace mlsim::pipeline
