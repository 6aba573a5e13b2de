#include "sim_core/hardware/profile_scaling.hpp"

#include <map>

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
  if (from.name == to.name) return {layer.forward_ms * 1e-3, layer.backward_ms * 1e-3};
  const LayerWork w = layer_work(layer, from);
  auto on_to = [&](const ProfiledWork& p) {
    return scale_profiled_time(p.seconds, p.bytes, p.dtype, from, to, from_where, to_where);
  };
  return {on_to(w.forward), on_to(w.backward)};
}

double profiled_time_factor(const GpuSpec& from, const GpuSpec& to, Dtype dtype,
                            const std::string& from_where, const std::string& to_where) {
  (void)from.peak_for(dtype, from_where);  // the measuring GPU must have the format too
  if (from.name == to.name) return 1.0;
  return scale_profiled_time(1.0, 0, dtype, from, to, from_where, to_where);
}

std::vector<std::shared_ptr<const ProfileSeconds>> profile_seconds_on_hosts(
    const DnnProfile& profile, bool include_input, const GpuSpec& profiled_on,
    const std::string& profiled_on_where, const NodeHardware& hardware,
    std::span<const NodeId> hosts, const std::function<std::string(std::size_t)>& host_where) {
  std::map<const GpuSpec*, std::shared_ptr<const ProfileSeconds>> by_gpu;
  std::vector<std::shared_ptr<const ProfileSeconds>> out;
  out.reserve(hosts.size());
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const std::string where = host_where(i);
    const GpuSpec& gpu = hardware.gpu(hosts[i], where);
    auto& table = by_gpu[&gpu];
    if (!table) {
      ProfileSeconds seconds;
      for (const LayerProfile& l : profile.layers) {
        if (l.is_input) {
          if (include_input) seconds.push_back({l.forward_ms * 1e-3, l.backward_ms * 1e-3});
          continue;
        }
        seconds.push_back(layer_seconds_on(l, profiled_on, gpu, profiled_on_where, where));
      }
      table = std::make_shared<const ProfileSeconds>(std::move(seconds));
    }
    out.push_back(table);
  }
  return out;
}

}  // namespace mlsim
