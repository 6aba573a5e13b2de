#include "models/pipeline/rl_planner.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "models/pipeline/one_f_one_b.hpp"
#include "sim_core/base/error.hpp"

namespace mlsim::pipeline {
namespace {

using Features = Eigen::Matrix<double, RlPlanner::kFeatures, 1>;

struct Action {
  std::size_t last_layer = 0, replicas = 1;
  Features phi;
};

// The episode's world: the layers' compute on each host now (prefix sums), their sizes, and the
// actions open at a step.
class Episodes {
 public:
  Episodes(const std::vector<LayerCost>& layers, const Conditions& c, const PlannerOptions& o)
      : layers_(layers), c_(c), options_(o), memory_(layers, o.memory, o.schedule, c.host_count()) {
    memory_.set_straight(o.straight);
    if (!memory_.any_fits()) throw nothing_fits(layers.size(), c.host_count());
    const std::size_t n = layers.size();
    time_.assign(c.host_count(), std::vector<double>(n + 1, 0));
    params_.assign(n + 1, 0);
    for (std::size_t h = 0; h < c.host_count(); ++h)
      for (std::size_t l = 0; l < n; ++l)
        time_[h][l + 1] =
            time_[h][l] + (c.hosts[h].forward_s[l] + c.hosts[h].backward_s[l]) / c.hosts[h].speed;
    for (std::size_t l = 0; l < n; ++l) params_[l + 1] = params_[l] + layers[l].parameter_bytes;
  }

  // The stages that can come next when `g` hosts and `i` layers are taken (see the header).
  std::vector<Action> actions(std::size_t g, std::size_t i) const {
    const std::size_t n = layers_.size(), H = c_.host_count();
    double rest = 0;
    for (std::size_t x = g; x < H; ++x) rest += time_[x][n] - time_[x][i];
    const double hosts_left_now = static_cast<double>(H - g);
    double ideal = rest / hosts_left_now / hosts_left_now;
    if (!(ideal > 0)) ideal = 1;  // layers without compute: any scale will do
    const bool gpipe = options_.schedule.kind == training::PipelineSchedule::Kind::kGPipe;
    const double per_update = gpipe ? static_cast<double>(options_.schedule.group) : 1.0;
    std::vector<Action> out;
    const std::size_t max_r = options_.straight ? 1 : H - g;
    for (std::size_t r = 1; r <= max_r; ++r) {
      const std::size_t left = H - g - r;
      std::size_t j_lo = i + 1, j_hi = n - (options_.straight ? left : 1);
      if (left == 0) j_lo = j_hi = n;
      if (j_lo > j_hi || j_lo <= i) continue;
      for (std::size_t j = j_lo; j <= j_hi; ++j) {
        // The memory mask: a stage that does not fit, or after which the rest cannot, is no
        // action (every episode then ends in a configuration that fits).
        if (!(memory_.fits(i, j, g, r) && memory_.completable(j, g + r))) continue;
        double slowest = 0, narrowest = std::numeric_limits<double>::infinity();
        for (std::size_t x = g; x < g + r; ++x) {
          slowest = std::max(slowest, time_[x][j] - time_[x][i]);
          narrowest = std::min(narrowest, c_.bandwidth[x]);
        }
        const double rd = static_cast<double>(r);
        const double e = slowest / rd / ideal - 1;
        double comm = 0;
        if (j < n) {
          // With routes, the narrowest route from the stage's hosts to the next stage's first.
          double b = std::min(narrowest, c_.bandwidth[g + r]);
          if (c_.routed())
            for (std::size_t x = g; x < g + r; ++x) b = std::min(b, c_.bandwidth_between(x, g + r));
          comm = layers_[j - 1].cut_bytes() / b;
        }
        const double ar = ring_allreduce_seconds(params_[j] - params_[i], g, r, c_);
        Action a;
        a.last_layer = j;
        a.replicas = r;
        a.phi << e, e * e, comm / ideal, ar / (per_update * rd * ideal), r > 1 ? 1.0 : 0.0;
        a.phi = a.phi.cwiseMax(-100).cwiseMin(100);
        out.push_back(a);
      }
    }
    return out;
  }

  std::size_t hosts() const { return c_.host_count(); }

  // The configuration's time, timed once.
  double time(const Partition& p, std::uint64_t& timed) {
    std::vector<std::size_t> key = p.first;
    key.push_back(std::numeric_limits<std::size_t>::max());
    key.insert(key.end(), p.replicas.begin(), p.replicas.end());
    const auto [it, fresh] = cache_.try_emplace(std::move(key), 0.0);
    if (fresh) {
      it->second = steady_state_seconds(layers_, p, c_, options_.schedule);
      ++timed;
    }
    return it->second;
  }

 private:
  const std::vector<LayerCost>& layers_;
  const Conditions& c_;
  PlannerOptions options_;
  StageMemory memory_;
  std::vector<std::vector<double>> time_;
  std::vector<double> params_;
  std::map<std::vector<std::size_t>, double> cache_;
};

// The softmax over a step's actions under weights `w`.
std::vector<double> policy(const std::vector<Action>& actions, const Eigen::VectorXd& w) {
  std::vector<double> p(actions.size());
  double top = -std::numeric_limits<double>::infinity();
  for (std::size_t k = 0; k < actions.size(); ++k) {
    p[k] = w.dot(actions[k].phi);
    top = std::max(top, p[k]);
  }
  double sum = 0;
  for (double& x : p) sum += (x = std::exp(x - top));
  for (double& x : p) x /= sum;
  return p;
}

struct Rollout {
  Partition partition;
  Features score = Features::Zero();  // gradient of the log-probability of the episode's actions
};

}  // namespace

RlPlanner::RlPlanner(RlOptions options, RandomStream rng)
    : options_(options),
      rng_(rng),
      w_(Eigen::VectorXd::Zero(kFeatures)),
      adam_m_(Eigen::VectorXd::Zero(kFeatures)),
      adam_v_(Eigen::VectorXd::Zero(kFeatures)) {
  MLSIM_CHECK(options_.batch >= 2, "the RL planner's batch needs two episodes to rank");
}

namespace {

// One episode: sampled when `rng` is given, the policy's most likely action otherwise.
Rollout roll(const Episodes& env, const Eigen::VectorXd& w, RandomStream* rng) {
  Rollout out;
  out.partition.first = {0};
  std::size_t g = 0, i = 0;
  while (g < env.hosts()) {
    const std::vector<Action> acts = env.actions(g, i);
    MLSIM_CHECK(!acts.empty(), "the RL planner has no configuration to build (too few layers)");
    const std::vector<double> p = policy(acts, w);
    std::size_t k = 0;
    if (rng != nullptr) {
      double u = rng->uniform(), acc = 0;
      for (k = 0; k + 1 < acts.size(); ++k) {
        acc += p[k];
        if (u < acc) break;
      }
      Features mean = Features::Zero();
      for (std::size_t x = 0; x < acts.size(); ++x) mean += p[x] * acts[x].phi;
      out.score += acts[k].phi - mean;
    } else {
      // Ties go to the first action (the earliest boundary, fewest replicas).
      k = static_cast<std::size_t>(std::max_element(p.begin(), p.end()) - p.begin());
    }
    out.partition.first.push_back(acts[k].last_layer);
    out.partition.replicas.push_back(acts[k].replicas);
    g += acts[k].replicas;
    i = acts[k].last_layer;
  }
  return out;
}

}  // namespace

Partition RlPlanner::greedy(const std::vector<LayerCost>& layers, const Conditions& c,
                            const PlannerOptions& options) const {
  const Episodes env(layers, c, options);
  return roll(env, w_, nullptr).partition;
}

Plan RlPlanner::plan(const std::vector<LayerCost>& layers, const Conditions& c,
                     const PlannerOptions& options) {
  Episodes env(layers, c, options);
  Plan best;
  auto offer = [&](const Partition& p) {
    const double t = env.time(p, best.evaluated);
    if (best.partition.stages() == 0 || t < best.seconds_per_minibatch * (1 - 1e-12)) {
      best.partition = p;
      best.seconds_per_minibatch = t;
    }
    return t;
  };
  for (std::size_t done = 0; done < options_.episodes;) {
    const std::size_t n = std::min(options_.batch, options_.episodes - done);
    done += n;
    std::vector<Rollout> batch;
    std::vector<double> times;
    for (std::size_t k = 0; k < n; ++k) {
      batch.push_back(roll(env, w_, &rng_));
      times.push_back(offer(batch.back().partition));
    }
    if (n < 2) break;
    // Centred ranks: the fastest gets +1/2, the slowest -1/2, equal times the mean of their ranks.
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return times[a] < times[b]; });
    std::vector<double> advantage(n);
    for (std::size_t lo = 0; lo < n;) {
      std::size_t hi = lo;
      while (hi + 1 < n && times[order[hi + 1]] == times[order[lo]]) ++hi;
      const double rank = 0.5 * static_cast<double>(lo + hi);
      for (std::size_t x = lo; x <= hi; ++x)
        advantage[order[x]] = 0.5 - rank / static_cast<double>(n - 1);
      lo = hi + 1;
    }
    Eigen::VectorXd grad = Eigen::VectorXd::Zero(kFeatures);
    for (std::size_t k = 0; k < n; ++k) grad += advantage[k] * batch[k].score;
    grad /= static_cast<double>(n);
    // Adam, ascending (Kingma and Ba's defaults for the moments).
    constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8;
    ++adam_t_;
    adam_m_ = kBeta1 * adam_m_ + (1 - kBeta1) * grad;
    adam_v_ = kBeta2 * adam_v_ + (1 - kBeta2) * grad.cwiseProduct(grad);
    const double t = static_cast<double>(adam_t_);
    const Eigen::VectorXd m_hat = adam_m_ / (1 - std::pow(kBeta1, t));
    const Eigen::VectorXd v_hat = adam_v_ / (1 - std::pow(kBeta2, t));
    w_ += options_.learning_rate * m_hat.cwiseQuotient((v_hat.array().sqrt() + kEps).matrix());
  }
  offer(roll(env, w_, nullptr).partition);
  return best;
}

}  // namespace mlsim::pipeline
