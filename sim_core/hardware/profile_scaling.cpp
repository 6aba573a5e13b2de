#include "sim_core/hardware/profile_scaling.hpp"

#include "sim_core/hardware/cost_model.hpp"

namespace mlsim {

LayerWork layer_work(double forward_s, double backward_s, double parameter_bytes,
                     double activation_bytes, const GpuSpec& measured_on) {
  const double forward_bytes = parameter_bytes + activation_bytes;
  return {ProfiledWork{forward_s, &measured_on, Dtype::kFp32, forward_bytes},
          ProfiledWork{backward_s, &measured_on, Dtype::kFp32, 2 * forward_bytes}};
}

LayerWork layer_work(const LayerProfile& layer, const GpuSpec& measured_on) {
  return layer_work(layer.forward_ms * 1e-3, layer.backward_ms * 1e-3,
                    static_cast<double>(layer.parameters.count),
                    static_cast<double>(layer.activation.count), measured_on);
}

LayerSeconds layer_seconds_on(const LayerProfile& layer, const GpuSpec& from, const GpuSpec& to,
                              const std::string& from_where, const std::string& to_where) {
  const LayerWork w = layer_work(layer, from);
  auto on_to = [&](const ProfiledWork& p) {
    return scale_profiled_time(p.seconds, p.bytes, p.dtype, from, to, from_where, to_where);
  };
  return {on_to(w.forward), on_to(w.backward)};
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
