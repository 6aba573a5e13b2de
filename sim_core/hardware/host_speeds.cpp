#include "sim_core/hardware/host_speeds.hpp"

#include <cmath>

#include "sim_core/base/error.hpp"

namespace mlsim {

HostSpeeds::HostSpeeds(std::size_t node_count) : speeds_(node_count, 1.0) {}

double HostSpeeds::speed(NodeId host) const {
  MLSIM_CHECK(host < speeds_.size(), "host speed asked for an unknown node");
  return speeds_[host];
}

void HostSpeeds::set_speed(NodeId host, double speed) {
  MLSIM_CHECK(host < speeds_.size(), "host speed set for an unknown node");
  MLSIM_CHECK(std::isfinite(speed) && speed > 0, "a host speed must be finite and > 0");
  const double old = speeds_[host];
  if (old == speed) return;
  speeds_[host] = speed;
  for (const auto& l : listeners_) l(host, old, speed);
}

void HostSpeeds::on_change(Listener listener) {
  listeners_.push_back(std::move(listener));
}

}  // namespace mlsim
