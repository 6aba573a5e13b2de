#pragma once
// Everything a run can be assembled from, by name: models and network backends. One instance per
// program (the CLI fills it in cli/registry.cpp; tests fill their own), never a global.
#include "sim_core/model.hpp"
#include "sim_core/network_factory.hpp"

namespace mlsim {

struct Registries {
  ModelRegistry models;
  BackendRegistry backends;
};

}  // namespace mlsim
