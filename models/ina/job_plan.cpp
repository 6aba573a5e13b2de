#include "models/ina/job_plan.hpp"

#include <algorithm>

#include "models/training/chunk.hpp"
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
  MLSIM_CHECK(
      o.values_per_packet > 0 && o.burst_packets > 0 && o.burst_packets < 65536 && o.partition >= 0,
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
  // Units are numbered in production order (backward: last layer first; a layer's chunks in
  // child-index order), so a job's chunk sequence is the order its gradient leaves under the
  // framework's FIFO, which SwitchML's slot streaming relies on.
  plan.partition = o.partition;
  for (std::size_t i = plan.layers.size(); i-- > 0;) {
    LayerPlan& lp = plan.layers[i];
    lp.first_unit = plan.units();
    const std::vector<std::int64_t> cut = training::partition_tensor(lp.elements, o.partition);
    for (std::size_t c = 0; c < cut.size(); ++c) {
      ChunkPlan cp{static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(c), cut[c],
                   plan.units(), 0};
      const auto chunk = static_cast<std::uint32_t>(plan.chunks.size());
      if (c == 0) lp.first_chunk = chunk;
      std::int64_t packets = (cut[c] + o.values_per_packet - 1) / o.values_per_packet;
      std::int64_t left = cut[c];
      while (packets > 0) {
        const std::int64_t k = std::min<std::int64_t>(packets, o.burst_packets);
        const std::int64_t values = std::min<std::int64_t>(left, k * o.values_per_packet);
        plan.unit_packets.push_back(static_cast<std::uint16_t>(k));
        plan.unit_elements.push_back(static_cast<std::uint32_t>(values));
        plan.unit_layer.push_back(static_cast<std::uint32_t>(i));
        plan.unit_chunk.push_back(chunk);
        packets -= k;
        left -= values;
      }
      cp.units = plan.units() - cp.first_unit;
      plan.chunks.push_back(cp);
    }
    lp.units = plan.units() - lp.first_unit;
  }
  return plan;
}

}  // namespace mlsim::ina
