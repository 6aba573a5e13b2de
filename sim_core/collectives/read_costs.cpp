#include "sim_core/collectives/read_costs.hpp"

#include <optional>
#include <string>

#include "sim_core/base/error.hpp"

namespace mlsim::collectives {

CostModel read_cost_model(JsonReader& costs) {
  CostModel m;
  m.launch = costs.duration_or("launch", "0s");
  // Not written back when absent, so scenarios without it resolve as before.
  if (costs.has("inter_node_latency")) m.inter_node_latency = costs.duration("inter_node_latency");
  if (std::optional<JsonReader> protocols = costs.optional_object("protocols")) {
    for (Protocol p : kProtocols) {
      std::optional<JsonReader> entry = protocols->optional_object(to_string(p));
      if (!entry) continue;
      ProtocolCost& c = m.of(p);
      c.enabled = true;
      c.hop_latency = entry->duration_or("hop_latency", "0s");
      c.efficiency = entry->number_or("efficiency", 1.0, 1e-3, 1.0);
      entry->finish();
    }
    protocols->finish();
  }
  costs.finish();
  return m;
}

HostCosts read_host_costs(JsonReader& host) {
  HostCosts h;
  h.message_overhead = host.duration_or("message_overhead", "0s");
  if (host.has("message_latency")) h.message_latency = host.duration("message_latency");
  // Not written back when absent, so scenarios without it resolve as before. At most 1 us per
  // byte (1 MB/s), far beyond any host's copy rate: a larger value is a unit mistake.
  if (host.has("per_byte_ns")) h.per_byte_ns = host.number("per_byte_ns", 0, 1000);
  if (host.has("ps_aggregation")) h.ps_aggregation = host.bandwidth("ps_aggregation");
  host.finish();
  return h;
}

PointToPoint::Options read_message_costs(JsonReader& section,
                                         std::string_view why_no_ps_aggregation) {
  PointToPoint::Options options;
  if (std::optional<JsonReader> costs = section.optional_object("costs"))
    options.costs = read_cost_model(*costs);
  if (std::optional<JsonReader> host = section.optional_object("host")) {
    const std::string where = host->path();
    options.host = read_host_costs(*host);
    if (options.host.ps_aggregation.bytes_per_s > 0)
      throw InputError(where + ".ps_aggregation", std::string(why_no_ps_aggregation));
  }
  return options;
}

}  // namespace mlsim::collectives
