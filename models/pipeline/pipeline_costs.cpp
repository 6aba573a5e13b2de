#include "models/pipeline/pipeline_costs.hpp"

#include "sim_core/base/error.hpp"

namespace mlsim::pipeline {

std::vector<LayerCost> layer_costs(const DnnProfile& profile) {
  std::vector<LayerCost> out;
  for (const LayerProfile& l : profile.layers) {
    if (l.is_input) continue;
    out.push_back({l.forward_ms / 1e3, l.backward_ms / 1e3, static_cast<double>(l.activation.count),
                   static_cast<double>(l.parameters.count)});
  }
  return out;
}

StageHost profiled_host(const std::vector<LayerCost>& layers, double speed) {
  StageHost h;
  for (const LayerCost& l : layers) {
    h.forward_s.push_back(l.forward_s);
    h.backward_s.push_back(l.backward_s);
  }
  h.speed = speed;
  return h;
}

StageCosts stage_costs(const std::vector<LayerCost>& layers, const Partition& p,
                       const Conditions& c) {
  MLSIM_CHECK(p.stages() == c.stages() && p.first.back() == layers.size(),
              "partition does not match the layers and stages");
  StageCosts s;
  for (std::size_t st = 0; st < p.stages(); ++st) {
    const StageHost& h = c.hosts[st];
    MLSIM_CHECK(h.forward_s.size() == layers.size() && h.backward_s.size() == layers.size(),
                "a stage host without a time for every layer");
    double f = 0, b = 0;
    for (std::size_t l = p.first[st]; l < p.first[st + 1]; ++l) {
      f += h.forward_s[l];
      b += h.backward_s[l];
    }
    s.forward_s.push_back(f / h.speed);
    s.backward_s.push_back(b / h.speed);
    if (st + 1 < p.stages())
      s.boundary_bytes.push_back(layers[p.first[st + 1] - 1].activation_bytes);
  }
  return s;
}

double moved_parameter_bytes(const std::vector<LayerCost>& layers, const Partition& from,
                             const Partition& to) {
  double moved = 0;
  std::size_t a = 0, b = 0;  // stage owning layer l in `from` and in `to`
  for (std::size_t l = 0; l < layers.size(); ++l) {
    while (from.first[a + 1] <= l) ++a;
    while (to.first[b + 1] <= l) ++b;
    if (a != b) moved += layers[l].parameter_bytes;
  }
  return moved;
}

}  // namespace mlsim::pipeline
