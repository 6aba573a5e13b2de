#include "models/pipeline/autopipe_planner.hpp"

#include <algorithm>
#include <limits>

#include "models/pipeline/one_f_one_b.hpp"
#include "models/pipeline/pipedream_partitioner.hpp"
#include "sim_core/base/error.hpp"

namespace mlsim::pipeline {
namespace {

class Search {
 public:
  Search(const std::vector<LayerCost>& layers, const Conditions& c, const PlannerOptions& o,
         bool prune)
      : layers_(layers), c_(c), options_(o), prune_(prune) {
    const std::size_t n = layers.size();
    time_.assign(c.host_count(), std::vector<double>(n + 1, 0));
    params_.assign(n + 1, 0);
    for (std::size_t h = 0; h < c.host_count(); ++h)
      for (std::size_t l = 0; l < n; ++l)
        time_[h][l + 1] =
            time_[h][l] + (c.hosts[h].forward_s[l] + c.hosts[h].backward_s[l]) / c.hosts[h].speed;
    for (std::size_t l = 0; l < n; ++l) params_[l + 1] = params_[l] + layers[l].parameter_bytes;
  }

  // Takes `p` as the best so far if it beats it.
  void offer(const Partition& p) {
    const double t = steady_state_seconds(layers_, p, c_, options_.schedule);
    ++best_.evaluated;
    if (best_.partition.stages() == 0 || t < best_.seconds_per_minibatch * (1 - 1e-12)) {
      best_.partition = p;
      best_.seconds_per_minibatch = t;
    }
  }

  // Best single-layer boundary moves from the best so far until none improves.
  void climb() {
    for (bool improved = true; improved;) {
      improved = false;
      const Partition start = best_.partition;
      for (std::size_t b = 1; b < start.stages(); ++b) {
        for (int dir : {-1, +1}) {
          Partition cand = start;
          const std::size_t moved = cand.first[b] + static_cast<std::size_t>(dir);
          if (moved <= cand.first[b - 1] || moved >= cand.first[b + 1]) continue;
          cand.first[b] = moved;
          const double before = best_.seconds_per_minibatch;
          offer(cand);
          improved = improved || best_.seconds_per_minibatch < before;
        }
      }
    }
  }

  void run() {
    Partition p;
    p.first = {0};
    descend(p, 0);
  }

  Plan result() const { return best_; }

 private:
  // Lower bound on the time per minibatch of stage [i, j) on hosts [h, h + r) (see the header).
  double stage_bound(std::size_t i, std::size_t j, std::size_t h, std::size_t r) const {
    const std::size_t n = layers_.size();
    double out_bytes = 0;
    if (i > 0) out_bytes += layers_[i - 1].activation_bytes;  // gradients back
    if (j < n) out_bytes += layers_[j - 1].activation_bytes;  // activations forward
    double worst = 0;
    for (std::size_t x = h; x < h + r; ++x)
      worst = std::max({worst, time_[x][j] - time_[x][i], out_bytes / c_.bandwidth[x]});
    const double ar = ring_allreduce_seconds(params_[j] - params_[i], h, r, c_);
    const bool gpipe = options_.schedule.kind == training::PipelineSchedule::Kind::kGPipe;
    const double per_update = gpipe ? static_cast<double>(options_.schedule.group) : 1.0;
    return (worst + ar / per_update) / static_cast<double>(r);
  }

  // Stages of `p` are fixed up to layer p.first.back() on `host` hosts; `bound` holds for them.
  void descend(Partition& p, std::size_t host, double bound = 0) {
    const std::size_t n = layers_.size(), H = c_.host_count(), i = p.first.back();
    if (host == H) {
      if (i == n) offer(p);
      return;
    }
    const std::size_t max_r = options_.straight ? 1 : H - host;
    for (std::size_t r = 1; r <= max_r; ++r) {
      const std::size_t hosts_left = H - host - r;
      // Straight pipelines need a layer per remaining host; otherwise a layer per stage.
      const std::size_t j_min = i + 1;
      const std::size_t j_max = hosts_left == 0 ? n : n - (options_.straight ? hosts_left : 1);
      if (hosts_left == 0 && j_min > n) continue;
      for (std::size_t j = hosts_left == 0 ? n : j_min; j <= j_max; ++j) {
        const double b = std::max(bound, stage_bound(i, j, host, r));
        if (prune_ && best_.partition.stages() > 0 &&
            b >= best_.seconds_per_minibatch * (1 - 1e-12))
          continue;
        p.first.push_back(j);
        p.replicas.push_back(r);
        descend(p, host + r, b);
        p.first.pop_back();
        p.replicas.pop_back();
      }
    }
  }

  const std::vector<LayerCost>& layers_;
  const Conditions& c_;
  PlannerOptions options_;
  bool prune_;
  std::vector<std::vector<double>> time_;
  std::vector<double> params_;
  Plan best_;
};

}  // namespace

Plan autopipe_plan(const std::vector<LayerCost>& layers, const Conditions& c,
                   const PlannerOptions& options) {
  Search search(layers, c, options, /*prune=*/true);
  // A good first bound: PipeDream's configurations under both of its objectives, then the
  // boundary moves that improve them under the exact model.
  for (std::optional<double> ratio : {std::optional<double>{}, std::optional<double>{1.0}}) {
    search.offer(pipedream_partition(layers, c, {options.straight, ratio}));
    search.climb();
  }
  search.run();
  return search.result();
}

Plan exhaustive_plan(const std::vector<LayerCost>& layers, const Conditions& c,
                     const PlannerOptions& options) {
  Search search(layers, c, options, /*prune=*/false);
  search.run();
  return search.result();
}

}  // namespace mlsim::pipeline
