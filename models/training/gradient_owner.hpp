#pragma once
// What a gradient path (gradient_path.hpp) needs of the workers whose gradients it moves: how
// many there are, each layer's gradient size, and where to report parameters back. The core's
// DataParallelJob is one; a model with its own compute can be another (pipeline: the replicas of
// one replicated stage, whose weight gradients the core's ring strategy all-reduces).
#include <cstddef>
#include <cstdint>

namespace mlsim::training {

class GradientOwner {
 public:
  virtual ~GradientOwner() = default;
  virtual std::size_t gradient_workers() const = 0;
  virtual std::size_t gradient_layers() const = 0;
  virtual std::int64_t layer_parameters(std::size_t layer) const = 0;
  // Layer `layer`'s updated parameters are on `worker`.
  virtual void parameters_back(std::size_t worker, std::size_t layer) = 0;
  // A fetched layer's next parameters are on `worker` (JobSpec::fetched_each_iteration).
  virtual void parameters_fetched(std::size_t worker, std::size_t layer) = 0;
  // Called after every chunk event: re-check holds and the end of the job.
  virtual void check_progress() = 0;
  // Updates applied so far to `layer` on `worker` (for traces).
  virtual std::size_t updates(std::size_t worker, std::size_t layer) const = 0;
};

}  // namespace mlsim::training
