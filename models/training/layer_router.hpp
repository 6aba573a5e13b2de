#pragma once
// Hands each layer's gradients to the gradient path that synchronises that layer, so one job can
// run different strategies for different layers (embcache: Herald/HET for the embedding layer,
// ps or ring for the dense ones), each with its own scheduler. A job has one GradientSink: set
// this one, and one path per strategy over the same job.
#include <cstddef>
#include <vector>

#include "models/training/data_parallel_job.hpp"
#include "sim_core/base/error.hpp"

namespace mlsim::training {

class LayerRouter final : public GradientSink {
 public:
  // `sinks[layer]` receives that layer's gradients; every sink must outlive the router.
  explicit LayerRouter(std::vector<GradientSink*> sinks) : sinks_(std::move(sinks)) {}
  void gradient_ready(std::size_t worker, std::size_t layer) override {
    MLSIM_CHECK(layer < sinks_.size() && sinks_[layer] != nullptr,
                "a layer without a gradient path");
    sinks_[layer]->gradient_ready(worker, layer);
  }

 private:
  std::vector<GradientSink*> sinks_;
};

}  // namespace mlsim::training
