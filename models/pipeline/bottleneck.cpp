#include "models/pipeline/bottleneck.hpp"

#include <algorithm>
#include <limits>

#include "sim_core/base/error.hpp"

namespace mlsim::pipeline {

Bottleneck::Bottleneck(const std::vector<LayerCost>& layers, const Conditions& c,
                       const ScheduleTiming& schedule)
    : layers_(layers), c_(c) {
  const bool gpipe = schedule.kind == training::PipelineSchedule::Kind::kGPipe;
  per_update_ = gpipe ? static_cast<double>(schedule.group) : 1.0;
  const std::size_t n = layers.size();
  time_.assign(c.host_count(), std::vector<double>(n + 1, 0));
  params_.assign(n + 1, 0);
  for (std::size_t h = 0; h < c.host_count(); ++h) {
    const StageHost& host = c.hosts[h];
    MLSIM_CHECK(host.forward_s.size() == n && host.backward_s.size() == n,
                "a host without a time for every layer");
    for (std::size_t l = 0; l < n; ++l)
      time_[h][l + 1] = time_[h][l] + (host.forward_s[l] + host.backward_s[l]) / host.speed;
  }
  for (std::size_t l = 0; l < n; ++l) params_[l + 1] = params_[l] + layers[l].parameter_bytes;
  if (c.routed()) bound_route_bandwidths();
}

// For every stage placement [h, h + r) and replica x: the fastest any of x's activations
// (forward, to a host after the stage) or gradients (back, to a host before it) can leave
// under any configuration with that stage. A shared link that every such route of a replica
// crosses carries that replica's sends in every such configuration, so it is divided at least
// among those replicas (transfer_bandwidths divides it among at least as many).
void Bottleneck::bound_route_bandwidths() {
  const std::size_t H = c_.host_count();
  const auto& R = c_.routes;
  const double inf = std::numeric_limits<double>::infinity();
  for (auto* t : {&forward_bw_, &backward_bw_, &backward_only_bw_}) t->assign(H * H * H, inf);
  // Whether every route from x to a host in [lo, hi) crosses shared link l (false when empty).
  auto always = [&](std::size_t x, std::size_t lo, std::size_t hi, std::size_t l) {
    if (lo >= hi) return false;
    for (std::size_t d = lo; d < hi; ++d) {
      const auto& on = R.shared[x * H + d];
      if (std::find(on.begin(), on.end(), l) == on.end()) return false;
    }
    return true;
  };
  auto fastest = [&](std::size_t x, std::size_t lo, std::size_t hi,
                     const std::vector<double>& users) {
    double best = lo < hi ? 0 : inf;
    for (std::size_t d = lo; d < hi; ++d) {
      double b = R.bandwidth[x * H + d];
      for (std::size_t l : R.shared[x * H + d])
        if (users[l] > 0) b = std::min(b, R.shared_bandwidth[l] / users[l]);
      best = std::max(best, b);
    }
    return best;
  };
  const std::size_t L = R.shared_bandwidth.size();
  for (std::size_t h = 0; h < H; ++h)
    for (std::size_t r = 1; h + r <= H; ++r)
      for (const bool forward : {true, false}) {
        std::vector<double> users(L, 0);
        for (std::size_t l = 0; l < L; ++l)
          for (std::size_t x = h; x < h + r; ++x)
            if ((forward && always(x, h + r, H, l)) || always(x, 0, h, l)) users[l] += 1;
        for (std::size_t x = h; x < h + r; ++x) {
          const std::size_t k = (h * H + r - 1) * H + x;
          if (forward) {
            forward_bw_[k] = fastest(x, h + r, H, users);
            backward_bw_[k] = fastest(x, 0, h, users);
          } else {
            backward_only_bw_[k] = fastest(x, 0, h, users);
          }
        }
      }
}

double Bottleneck::stage(std::size_t i, std::size_t j, std::size_t h, std::size_t r) const {
  const std::size_t n = layers_.size();
  double out_bytes = 0;
  if (i > 0) out_bytes += layers_[i - 1].cut_bytes();  // gradients back
  if (j < n) out_bytes += layers_[j - 1].cut_bytes();  // activations forward
  double worst = 0;
  for (std::size_t x = h; x < h + r; ++x) {
    double nic = out_bytes / c_.bandwidth[x];
    if (c_.routed()) {
      const std::size_t H = c_.host_count(), k = (h * H + r - 1) * H + x;
      nic = 0;
      if (i > 0)
        nic += layers_[i - 1].cut_bytes() / (j < n ? backward_bw_[k] : backward_only_bw_[k]);
      if (j < n) nic += layers_[j - 1].cut_bytes() / forward_bw_[k];
    }
    worst = std::max({worst, time_[x][j] - time_[x][i], nic});
  }
  const double ar = ring_allreduce_seconds(params_[j] - params_[i], h, r, c_);
  return (worst + ar / per_update_) / static_cast<double>(r);
}

double Bottleneck::of(const Partition& p) const {
  MLSIM_CHECK(
      p.stages() >= 1 && p.first.back() == layers_.size() && p.hosts_used() <= c_.host_count(),
      "partition does not match the layers and hosts");
  double worst = 0;
  for (std::size_t s = 0; s < p.stages(); ++s)
    worst = std::max(worst, stage(p.first[s], p.first[s + 1], p.first_host(s), p.replication(s)));
  return worst;
}

}  // namespace mlsim::pipeline
