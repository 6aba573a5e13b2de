#pragma once
// The Model of most models: build one simulation object when the run starts (it needs the
// engine, network and topology of ModelEnv), start it, and let it report at the end. The
// simulation type provides start(), progress() (fraction done) and report(Results&).
#include <functional>
#include <memory>

#include "sim_core/run/model.hpp"

namespace mlsim {

template <typename Simulation>
class SimulationModel final : public Model {
 public:
  using Build = std::function<std::unique_ptr<Simulation>(ModelEnv&)>;
  explicit SimulationModel(Build build) : build_(std::move(build)) {}

  void start(ModelEnv& env) override {
    simulation_ = build_(env);
    simulation_->start();
  }
  void finish(ModelEnv&, Results& out) override { simulation_->report(out); }
  double progress(const ModelEnv&) const override {
    return simulation_ ? simulation_->progress() : 0;
  }

 private:
  Build build_;
  std::unique_ptr<Simulation> simulation_;
};

}  // namespace mlsim
