#pragma once
// The scenario-facing collectives model: reads the "system" section, runs one all-reduce on the
// scenario's network among its first hosts, and reports completion time and bandwidths.
//
//   "system": {"model": "collectives", "algorithm": "ring" | "ps" | "tree", "bytes": "64MiB",
//              "chunks": 1, "window": 1, "participants": 0,
//              "servers": 1, "placement": "dedicated" | "colocated",   (ps only)
//              "arity": 2}                                              (tree only)
// participants: how many hosts take part (the first ones), 0 = all. See collective.hpp for the
// meaning of the others.
#include <cstddef>
#include <memory>

#include "models/collectives/collective.hpp"
#include "sim_core/json_reader.hpp"
#include "sim_core/model.hpp"

namespace mlsim::collectives {

struct CollectivesParams {
  CollectiveSpec spec;
  int participants = 0;  // resolved: never 0 after reading
};

// Reads and validates the "system" object (strict: unknown keys are errors).
CollectivesParams read_collectives_params(JsonReader& system, std::size_t hosts);

std::unique_ptr<Model> make_collectives_model(const CollectivesParams& params);

}  // namespace mlsim::collectives
