#include "sim_core/network/simgrid/simgrid_backend.hpp"

#include "sim_core/network/simgrid/simgrid_network.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim {

void register_simgrid_backend(BackendRegistry& registry) {
  registry.add(BackendInfo{
      "simgrid",
      "SimGrid 3.32 flow models (CM02: max-min sharing; LV08: calibrated TCP sharing), same "
      "routes as mlsim; one simgrid run per process at a time, one model per process",
      [](JsonReader& r) {
        r.ignore("backend");
        SimGridOptions o;
        o.model = r.choice_or("model", {"CM02", "LV08"}, "CM02") == "CM02"
                      ? SimGridOptions::Model::kCM02
                      : SimGridOptions::Model::kLV08;
        // LV08 is calibrated with latency inside its sharing; CM02 defaults to plain max-min.
        const std::string latency_default =
            o.model == SimGridOptions::Model::kLV08 ? "simgrid" : "after_sending";
        o.latency =
            r.choice_or("latency", {"after_sending", "simgrid"}, latency_default) == "after_sending"
                ? SimGridOptions::Latency::kAfterSending
                : SimGridOptions::Latency::kInSimGrid;
        o.spare_routes = static_cast<int>(r.integer_or("spare_routes", 4, 0, 1024));
        r.finish();
        return std::function<std::unique_ptr<Network>(Engine&, const Topology&)>(
            [o](Engine& engine, const Topology& topology) -> std::unique_ptr<Network> {
              return std::make_unique<SimGridNetwork>(engine, topology, o);
            });
      },
      // A switch node is a SimGrid host of its own (simgrid_network.cpp), so transfers can end
      // and start there.
      /*hosts_switch_programs=*/true});
}

}  // namespace mlsim
