#include "models/ina/job_plan.hpp"

#include <algorithm>

#include "sim_core/base/error.hpp"

namespace mlsim::ina {

std::int64_t JobPlan::elements() const {
  std::int64_t n = 0;
  for (const auto& l : layers) n += l.elements;
  return n;
}

std::uint64_t JobPlan::packets() const {
  std::uint64_t n = 0;
  for (auto p : unit_packets) n += p;
  return n;
}

Time JobPlan::compute() const {
  Time t;
  for (const auto& l : layers) t += l.forward + l.backward;
  return t;
}

JobPlan make_job_plan(const DnnProfile& profile, const PlanOptions& o) {
  MLSIM_CHECK(o.values_per_packet > 0 && o.burst_packets > 0 && o.burst_packets < 65536,
              "bad packet format");
  JobPlan plan;
  plan.model = profile.name;
  for (const auto& layer : profile.layers) {
    if (layer.is_input && !o.include_input_layers) continue;
    LayerPlan lp;
    lp.forward = Time::from_seconds(layer.forward_ms * 1e-3);
    lp.backward = Time::from_seconds(layer.backward_ms * 1e-3);
    lp.elements = (layer.parameters.count + 3) / 4;
    plan.layers.push_back(lp);
  }
  // Units are numbered in production order (backward: last layer first), so a job's chunk
  // sequence is the order its gradient leaves, which SwitchML's slot streaming relies on.
  for (std::size_t i = plan.layers.size(); i-- > 0;) {
    LayerPlan& lp = plan.layers[i];
    lp.first_unit = plan.units();
    std::int64_t packets = (lp.elements + o.values_per_packet - 1) / o.values_per_packet;
    std::int64_t left = lp.elements;
    while (packets > 0) {
      const std::int64_t k = std::min<std::int64_t>(packets, o.burst_packets);
      const std::int64_t values = std::min<std::int64_t>(left, k * o.values_per_packet);
      plan.unit_packets.push_back(static_cast<std::uint16_t>(k));
      plan.unit_elements.push_back(static_cast<std::uint32_t>(values));
      plan.unit_layer.push_back(static_cast<std::uint32_t>(i));
      packets -= k;
      left -= values;
    }
    lp.units = plan.units() - lp.first_unit;
  }
  return plan;
}

}  // namespace mlsim::ina
