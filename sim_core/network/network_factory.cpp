#include "sim_core/network/network_factory.hpp"

#include "sim_core/network/fluid_network.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim {
namespace {

// The analytic backend has no options; flow has `route_classes` (docs/network.md).
BackendInfo fluid_backend(std::string name, std::string description, Sharing sharing) {
  BackendInfo info;
  info.name = std::move(name);
  info.description = std::move(description);
  // Routes end at any node, switches included: a transfer to a switch is a flow like any other.
  info.hosts_switch_programs = true;
  info.configure = [sharing](JsonReader& options) {
    options.ignore("backend");
    // Read only when given: the resolved scenario of a run without it stays as it was.
    const bool route_classes = sharing == Sharing::kMaxMin && options.has("route_classes") &&
                               options.boolean("route_classes");
    options.finish();
    return std::function<std::unique_ptr<Network>(Engine&, const Topology&)>(
        [sharing, route_classes](Engine& engine,
                                 const Topology& topology) -> std::unique_ptr<Network> {
          return std::make_unique<FluidNetwork>(engine, topology, sharing, route_classes);
        });
  };
  return info;
}

}  // namespace

void register_core_backends(BackendRegistry& registry) {
  registry.add(fluid_backend(
      "analytic",
      "latency + bytes / bottleneck bandwidth, no sharing between transfers; closed form, one "
      "event per transfer (docs/network.md)",
      Sharing::kNone));
  registry.add(fluid_backend(
      "flow",
      "fluid flows with max-min fair sharing of link bandwidth, re-solved incrementally per "
      "connected component; one event per uncontended transfer (docs/network.md)",
      Sharing::kMaxMin));
}

}  // namespace mlsim
