#include "models/pipeline/autopipe_planner.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "models/pipeline/bottleneck.hpp"
#include "models/pipeline/dp_planner.hpp"
#include "models/pipeline/one_f_one_b.hpp"
#include "models/pipeline/pipedream_partitioner.hpp"
#include "sim_core/base/error.hpp"

namespace mlsim::pipeline {
namespace {

class Search {
 public:
  Search(const std::vector<LayerCost>& layers, const Conditions& c, const PlannerOptions& o,
         bool prune)
      : layers_(layers),
        c_(c),
        options_(o),
        prune_(prune),
        bound_(layers, c, o.schedule),
        memory_(layers, o.memory, o.schedule, c.host_count()) {
    memory_.set_straight(o.straight);
  }

  // Takes `p` as the best so far if it fits and beats it.
  void offer(const Partition& p) {
    if (!memory_.fits(p)) return;
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

  Plan result() const {
    if (best_.partition.stages() == 0 && memory_.active())
      throw nothing_fits(layers_.size(), c_.host_count());
    return best_;
  }

 private:
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
        // A stage that does not fit, or leaves a rest that cannot, ends no configuration that
        // fits (the exhaustive search too leaves those to offer(), which refuses them).
        if (prune_ && !(memory_.fits(i, j, host, r) && memory_.completable(j, host + r))) continue;
        const double b = std::max(bound, bound_.stage(i, j, host, r));
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
  Bottleneck bound_;  // the lower bound on a stage's time per minibatch (see the header)
  StageMemory memory_;
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
  // Under a memory limit PipeDream's configurations may not fit: the DP planner's does (it
  // throws when none does), and its moves too.
  if (options.memory.active()) {
    search.offer(dp_plan(layers, c, options).partition);
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
