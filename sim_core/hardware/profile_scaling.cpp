#include "sim_core/hardware/profile_scaling.hpp"

#include "sim_core/hardware/cost_model.hpp"

namespace mlsim {

LayerSeconds layer_seconds_on(const LayerProfile& layer, const GpuSpec& from, const GpuSpec& to,
                              const std::string& from_where, const std::string& to_where) {
  const double forward_bytes =
      static_cast<double>(layer.parameters.count) + static_cast<double>(layer.activation.count);
  return {scale_profiled_time(layer.forward_ms * 1e-3, forward_bytes, Dtype::kFp32, from, to,
                              from_where, to_where),
          scale_profiled_time(layer.backward_ms * 1e-3, 2 * forward_bytes, Dtype::kFp32, from, to,
                              from_where, to_where)};
}

double profile_time_ratio(const DnnProfile& profile, const GpuSpec& from, const GpuSpec& to,
                          const std::string& from_where, const std::string& to_where) {
  double measured = 0, scaled = 0;
  for (const auto& l : profile.layers) {
    if (l.is_input) continue;
    const auto s = layer_seconds_on(l, from, to, from_where, to_where);
    measured += (l.forward_ms + l.backward_ms) * 1e-3;
    scaled += s.forward + s.backward;
  }
  return measured > 0 ? scaled / measured : 1.0;
}

}  // namespace mlsim
