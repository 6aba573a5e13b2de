#pragma once
// The scenario-facing collectives model: reads the "system" section, runs one all-reduce on the
// scenario's network among its first hosts, and reports completion time and bandwidths.
//
//   "system": {"model": "collectives", "algorithm": "ring" | "ps" | "tree" | "rat",
//              "bytes": "64MiB", "chunks": 1, "window": 1, "participants": 0,
//              "servers": 1, "placement": "dedicated" | "colocated" | "spread",   (ps only)
//              "arity": 2,                                                         (tree only)
//              "link_changes": [{"at": "0s", "between": ["leaf0", "spine0"],
//                                "bandwidth": "10Gbps"} or {..., "up": false}]}
// participants: how many hosts take part (the first ones), 0 = all. link_changes: changes of
// both directions of the cables between two named neighbours, at a time (default 0: before the
// collective starts), for every algorithm; rat plans with them. See collective.hpp for the
// meaning of the others.
#include <cstddef>
#include <memory>
#include <vector>

#include "sim_core/collectives/collective.hpp"
#include "sim_core/collectives/link_conditions.hpp"
#include "sim_core/run/model.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim::collectives {

struct CollectivesParams {
  CollectiveSpec spec;
  int participants = 0;  // resolved: never 0 after reading
  std::vector<LinkChange> link_changes;
};

// Reads and validates the "system" object (strict: unknown keys are errors); node names in
// link_changes are looked up in `topology`.
CollectivesParams read_collectives_params(JsonReader& system, const Topology& topology);

std::unique_ptr<Model> make_collectives_model(const CollectivesParams& params);

}  // namespace mlsim::collectives
