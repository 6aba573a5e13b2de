#pragma once
// Everything a run can be assembled from, by name: models and network backends. One instance per
// program (the CLI fills it in cli/registry.cpp; tests fill their own), never a global.
#include "sim_core/network/network_factory.hpp"
#include "sim_core/run/model.hpp"

namespace mlsim {

struct Registries {
  ModelRegistry models;
  BackendRegistry backends;
};

}  // namespace mlsim
