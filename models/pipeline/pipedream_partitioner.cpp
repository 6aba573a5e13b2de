#include "models/pipeline/pipedream_partitioner.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

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
// With the activation option, a stage after the first (i > 0: the last stage of a split, where
// the code adds them) also takes its input and output (j < n) transfers, each over the narrowest
// link among its hosts and, for the input, the host before them. The first stage's output is
// only the second stage's input: compute_partitioning's single-stage cells carry no transfer.
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
  if (o.activation_compression_ratio && i > 0) {
    const double ratio = *o.activation_compression_ratio;
    const double b_in = std::min(bandwidth, c.bandwidth[h - 1]);
    t = std::max(t, 2 * layers[i - 1].cut_bytes() / (b_in * rd) / ratio);
    if (j < layers.size())
      t = std::max(t, 2 * layers[j - 1].cut_bytes() / (bandwidth * rd) / ratio);
  }
  return t;
}

// One level of the hierarchical solve (compute_partitioning with final_level as given): the best
// time of layers [i, j) on m machines of the level, for every start i (only i = 0 at the final
// level), with where its last stage starts (i: a single stage) and its machines.
class LevelTable {
 public:
  LevelTable(std::size_t n, std::size_t machines)
      : n_(n),
        m_(machines),
        time_((n + 1) * (n + 1) * (machines + 1), std::numeric_limits<double>::infinity()),
        split_(time_.size(), 0),
        last_(time_.size(), 0) {}
  std::size_t machines() const { return m_; }
  double time(std::size_t i, std::size_t j, std::size_t m) const { return time_[at(i, j, m)]; }
  std::size_t split(std::size_t i, std::size_t j, std::size_t m) const {
    return split_[at(i, j, m)];
  }
  std::size_t last(std::size_t i, std::size_t j, std::size_t m) const { return last_[at(i, j, m)]; }
  void set(std::size_t i, std::size_t j, std::size_t m, double t, std::size_t split,
           std::size_t last) {
    time_[at(i, j, m)] = t;
    split_[at(i, j, m)] = split;
    last_[at(i, j, m)] = last;
  }

 private:
  std::size_t at(std::size_t i, std::size_t j, std::size_t m) const {
    return (i * (n_ + 1) + j) * (m_ + 1) + m;
  }
  std::size_t n_, m_;
  std::vector<double> time_;
  std::vector<std::size_t> split_, last_;
};

// compute_partitioning for one level: `cost(i, j)` is the time of layers [i, j) on one machine of
// the level (infinite: none), `within` the machines of the level below (1 at the first level).
template <typename Cost>
LevelTable solve_level(const std::vector<LayerCost>& layers, const std::vector<double>& params,
                       const Cost& cost, const PipeDreamOptions::Level& level, double within,
                       bool final_level, const PipeDreamOptions& o) {
  const std::size_t n = layers.size(), M = level.machines;
  const double b = level.bandwidth;
  LevelTable t(n, M);
  // The single stage on m machines (the code's initialisation of every cell); with
  // --straight_pipeline only on one machine.
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j <= n; ++j) {
      const double c = cost(i, j);
      if (c == std::numeric_limits<double>::infinity()) continue;
      for (std::size_t m = 1; m <= (o.straight ? 1 : M); ++m) {
        const double md = static_cast<double>(m);
        const double sync = 4 * (md - 1) * (params[j] - params[i]) / (b * md) / within;
        t.set(i, j, m, (c + sync) / md, i, m);
      }
    }
  // Splits: the best of layers [i, s) on m - r machines and a last stage [s, j) on r.
  const std::size_t starts = final_level ? 1 : n;
  for (std::size_t i = 0; i < starts; ++i)
    for (std::size_t m = 2; m <= M; ++m)
      for (std::size_t j = i + 2; j <= n; ++j) {
        double best = t.time(i, j, m);
        std::size_t split = t.split(i, j, m), last = t.last(i, j, m);
        for (std::size_t s = i + 1; s < j; ++s) {
          const double c = cost(s, j);
          if (c == std::numeric_limits<double>::infinity()) continue;
          for (std::size_t r = 1; r < m; ++r) {
            if (o.straight && r > 1) break;
            const double before = t.time(i, s, m - r);
            if (before == std::numeric_limits<double>::infinity()) continue;
            const double rd = static_cast<double>(r);
            const double sync = 4 * (rd - 1) * (params[j] - params[s]) / (b * rd);
            double v = std::max(before, (c + sync) / rd);
            if (o.activation_compression_ratio) {
              const double ratio = *o.activation_compression_ratio;
              v = std::max(v, 2 * layers[s - 1].cut_bytes() / (b * rd) / ratio);
              // The code drops the output term only at the model's last layer.
              if (j < n) v = std::max(v, 2 * layers[j - 1].cut_bytes() / (b * rd) / ratio);
            }
            if (v < best) {
              best = v;
              split = s;
              last = r;
            }
          }
        }
        t.set(i, j, m, best, split, last);
      }
  return t;
}

// The hierarchical solve and its reading back (optimizer_graph_hierarchical.py, main and
// analyze_partitioning), flattened into one configuration of the job's hosts.
PipeDreamPlan hierarchical_partition(const std::vector<LayerCost>& layers, const Conditions& c,
                                     const PipeDreamOptions& o) {
  const std::size_t n = layers.size(), H = c.host_count();
  std::size_t product = 1;
  for (const PipeDreamOptions::Level& l : o.levels) {
    MLSIM_CHECK(l.machines >= 1 && l.bandwidth > 0,
                "a PipeDream level needs machines and a bandwidth");
    product *= l.machines;
  }
  MLSIM_CHECK(product == H, "PipeDream's levels must multiply to the job's hosts");
  MLSIM_CHECK(o.memory_size.empty(), "PipeDream's memory check is not modelled with levels");
  const Prefix pre = prefix_sums(layers, c);
  const double inf = std::numeric_limits<double>::infinity();
  // Level 1's machine is a GPU: the slowest job host's time for the layers.
  std::vector<double> cost((n + 1) * (n + 1), inf);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j <= n; ++j) {
      double worst = 0;
      for (std::size_t h = 0; h < H; ++h) worst = std::max(worst, pre.time[h][j] - pre.time[h][i]);
      cost[i * (n + 1) + j] = worst;
    }
  std::vector<LevelTable> tables;
  double within = 1;
  for (std::size_t l = 0; l < o.levels.size(); ++l) {
    const bool final_level = l + 1 == o.levels.size();
    tables.push_back(solve_level(
        layers, pre.params, [&](std::size_t i, std::size_t j) { return cost[i * (n + 1) + j]; },
        o.levels[l], within, final_level, o));
    // The next level's machine is a whole machine of this one: A[i][j][M].
    if (!final_level)
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = i + 1; j <= n; ++j)
          cost[i * (n + 1) + j] = tables.back().time(i, j, o.levels[l].machines);
    within = static_cast<double>(o.levels[l].machines);
  }
  if (tables.back().time(0, n, tables.back().machines()) == inf)
    throw InputError("system.pipedream_levels",
                     "PipeDream's optimizer finds no configuration of the " + std::to_string(n) +
                         " layers on these levels (a straight pipeline needs a layer per GPU of "
                         "every stage's servers)");
  // Read back top level first: each stage's range is split again on all machines of the level
  // below; replicas multiply.
  struct Range {
    std::size_t first, end, replicas;
  };
  std::vector<Range> ranges{{0, n, 1}};
  for (std::size_t l = tables.size(); l-- > 0;) {
    const LevelTable& t = tables[l];
    std::vector<Range> next;
    for (const Range& r : ranges) {
      std::vector<Range> stages;
      for (std::size_t j = r.end, m = t.machines();;) {
        MLSIM_CHECK(t.time(r.first, j, m) < inf, "PipeDream's program found no configuration");
        const std::size_t s = t.split(r.first, j, m), k = t.last(r.first, j, m);
        stages.push_back({s, j, r.replicas * k});
        if (s == r.first) break;
        j = s;
        m -= k;
      }
      next.insert(next.end(), stages.rbegin(), stages.rend());
    }
    ranges = std::move(next);
  }
  PipeDreamPlan plan{{{0}, {}}, tables.back().time(0, n, tables.back().machines())};
  for (const Range& r : ranges) {
    plan.partition.first.push_back(r.end);
    plan.partition.replicas.push_back(r.replicas);
  }
  return plan;
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
  return pipedream_plan(layers, c, options).partition;
}

PipeDreamPlan pipedream_plan(const std::vector<LayerCost>& layers, const Conditions& c,
                             const PipeDreamOptions& options) {
  const std::size_t n = layers.size(), H = c.host_count();
  MLSIM_CHECK(n >= 1 && H >= 1, "PipeDream's partitioner needs a layer and a host");
  MLSIM_CHECK(!options.straight || n >= H, "a straight pipeline needs a layer per host");
  if (!options.levels.empty()) return hierarchical_partition(layers, c, options);
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
  return {Partition{first, replicas}, best[n][H]};
}

}  // namespace mlsim::pipeline
