#pragma once
// The scenario-facing collectives model: reads the "system" section, runs one all-reduce on the
// scenario's network among its first hosts, and reports completion time and bandwidths.
//
//   "system": {"model": "collectives", "algorithm": "ring" | "ps" | "tree" | "rat",
//              "bytes": "64MiB", "chunks": 1, "window": 1, "participants": 0,
//              "servers": 1, "placement": "dedicated" | "colocated" | "spread",   (ps only)
//              "arity": 2}                                                         (tree only)
// participants: how many hosts take part (the first ones), 0 = all. See collective.hpp for the
// meaning of the others. Link changes and failures come from the scenario's `events` section
// (the platform applies them; rat plans with the links' current state). The old
// "system.link_changes" is rejected with a pointer to it.
#include <cstddef>
#include <memory>
#include <vector>

#include "sim_core/collectives/collective.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "sim_core/run/model.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim::collectives {

struct CollectivesParams {
  CollectiveSpec spec;
  int participants = 0;  // resolved: never 0 after reading
};

// Reads and validates the "system" object (strict: unknown keys are errors).
CollectivesParams read_collectives_params(JsonReader& system, const Topology& topology);

// Builds the collective now, on `env` (prepare time); it starts with the run.
std::unique_ptr<Model> make_collectives_model(ModelEnv& env, const CollectivesParams& params);

}  // namespace mlsim::collectives
