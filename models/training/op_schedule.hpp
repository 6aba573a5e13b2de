#pragma once
// The order of a worker's compute ops in the training core (data_parallel_job.hpp). An op is the
// forward or the backward of one micro-batch over a range of layers; the schedule names a
// worker's next op from how many forward and backward ops it has done in the current iteration
// (a segment, for a pipeline: pipeline_schedule.hpp), or none when its iteration is over.
// The core runs the op once its inputs are there: its layers' parameters are back (every gradient
// of those layers handed over before is back), and, for an op that needs one, the input message
// (an activation from the previous stage for a forward, a gradient from the next for a backward:
// DataParallelJob::input_arrived).
#include <cstddef>
#include <optional>

namespace mlsim::training {

struct ScheduledOp {
  bool forward = true;
  std::size_t micro_batch = 0;                 // the worker's own numbering in the iteration
  std::size_t first_layer = 0, end_layer = 0;  // [first, end), forward order
  bool needs_input = false;  // waits for input_arrived(worker, micro_batch, forward)
  // A backward hands its layers' gradients to the gradient sink when it ends (false: they are
  // accumulated into a later backward's, GPipe's flush).
  bool hands_gradients = true;
  // The op ends only once the output it sends (its activation or gradient) is delivered
  // (DataParallelJob::output_sent): the worker starts nothing else meanwhile, as Megatron's
  // blocking send_forward / send_forward_recv_backward hold the stage until the transfer is done.
  // Its gradients, if it hands them over, go out then.
  bool ends_after_send = false;
  friend bool operator==(const ScheduledOp&, const ScheduledOp&) = default;
};

class OpSchedule {
 public:
  virtual ~OpSchedule() = default;
  // Worker `worker`'s op after `forwards` forward and `backwards` backward ops in the current
  // iteration; nullopt once its iteration is over.
  virtual std::optional<ScheduledOp> next(std::size_t worker, std::size_t forwards,
                                          std::size_t backwards) const = 0;
};

// Data parallelism (the core's default): every worker runs one micro-batch, forward layer by
// layer from the input, then backward layer by layer from the output, each backward handing its
// layer's gradient over.
class LayerByLayer final : public OpSchedule {
 public:
  explicit LayerByLayer(std::size_t layers) : layers_(layers) {}
  std::optional<ScheduledOp> next(std::size_t, std::size_t forwards,
                                  std::size_t backwards) const override {
    if (forwards < layers_)
      return ScheduledOp{true, 0, forwards, forwards + 1, false, false, false};
    if (backwards < layers_) {
      const std::size_t l = layers_ - 1 - backwards;
      return ScheduledOp{false, 0, l, l + 1, false, true, false};
    }
    return std::nullopt;
  }

 private:
  std::size_t layers_;
};

}  // namespace mlsim::training
