#pragma once
// Link changes at a given simulated time: a bandwidth change, a failure, a repair. The network
// applies changes "now"; these helpers schedule them on the engine, for scenarios and tests.
#include "sim_core/engine/engine.hpp"
#include "sim_core/network/network.hpp"

namespace mlsim {

// `net` must outlive the scheduled events. Each returns the event's handle (cancellable).
inline EventHandle schedule_link_bandwidth(Engine& engine, Network& net, Time at, LinkId link,
                                           Bandwidth bw) {
  return engine.schedule_at(at, [&net, link, bw] { net.set_link_bandwidth(link, bw); });
}

inline EventHandle schedule_link_failure(Engine& engine, Network& net, Time at, LinkId link) {
  return engine.schedule_at(at, [&net, link] { net.set_link_up(link, false); });
}

inline EventHandle schedule_link_repair(Engine& engine, Network& net, Time at, LinkId link) {
  return engine.schedule_at(at, [&net, link] { net.set_link_up(link, true); });
}

}  // namespace mlsim
