#pragma once
// Reads a collective's costs from a scenario object (strict: unknown keys are errors), the keys
// every model that runs collectives accepts (docs/collectives.md, "Costs"):
//
//   "costs": {"launch": "5us",
//             "protocols": {"LL":     {"hop_latency": "0.6us", "efficiency": 0.5},
//                           "LL128":  {"hop_latency": "1.2us", "efficiency": 0.9375},
//                           "Simple": {"hop_latency": "4us",   "efficiency": 1}}}
//   "host":  {"message_overhead": "10us", "message_latency": "30us", "per_byte_ns": 0.1,
//             "ps_aggregation": "12GB/s"}
//
// A protocol that is listed is enabled; none listed: no protocol costs. Absent keys cost nothing.
#include <string_view>

#include "sim_core/collectives/costs.hpp"
#include "sim_core/collectives/point_to_point.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim::collectives {

CostModel read_cost_model(JsonReader& costs);
HostCosts read_host_costs(JsonReader& host);

// The optional "costs" and "host" objects of `section` for a model whose messages go through
// PointToPoint. A model without a parameter server's summing cost says why in
// `why_no_ps_aggregation`: `host.ps_aggregation` is then an InputError with that text.
PointToPoint::Options read_message_costs(JsonReader& section,
                                         std::string_view why_no_ps_aggregation);

}  // namespace mlsim::collectives
