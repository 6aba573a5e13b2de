#pragma once
// The Model of most models: one simulation object, built by the factory against the run's engine,
// network and topology (so its constructor's input checks run at prepare time), started by
// start(), reporting at the end. The simulation type provides start(), progress() (fraction
// done) and report(Results&).
#include <functional>
#include <memory>

#include "sim_core/base/error.hpp"
#include "sim_core/run/model.hpp"

namespace mlsim {

template <typename Simulation>
class SimulationModel final : public Model {
 public:
  using Build = std::function<std::unique_ptr<Simulation>(ModelEnv&)>;
  // Builds the simulation now. The build function is kept for the model's lifetime: what it
  // captures (the parsed parameters) may be referred to by the simulation.
  SimulationModel(ModelEnv& env, Build build) : build_(std::move(build)), simulation_(build_(env)) {
    MLSIM_CHECK(simulation_ != nullptr, "a simulation model built nothing");
  }

  void start(ModelEnv&) override { simulation_->start(); }
  void finish(ModelEnv&, Results& out) override { simulation_->report(out); }
  double progress(const ModelEnv&) const override { return simulation_->progress(); }

 private:
  Build build_;
  std::unique_ptr<Simulation> simulation_;
};

}  // namespace mlsim
