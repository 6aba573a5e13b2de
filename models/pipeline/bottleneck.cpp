#include "models/pipeline/bottleneck.hpp"

#include <algorithm>

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
}

double Bottleneck::stage(std::size_t i, std::size_t j, std::size_t h, std::size_t r) const {
  const std::size_t n = layers_.size();
  double out_bytes = 0;
  if (i > 0) out_bytes += layers_[i - 1].cut_bytes();  // gradients back
  if (j < n) out_bytes += layers_[j - 1].cut_bytes();  // activations forward
  double worst = 0;
  for (std::size_t x = h; x < h + r; ++x)
    worst = std::max({worst, time_[x][j] - time_[x][i], out_bytes / c_.bandwidth[x]});
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
