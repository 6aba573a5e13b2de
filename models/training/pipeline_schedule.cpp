#include "models/training/pipeline_schedule.hpp"

#include <algorithm>

#include "sim_core/base/error.hpp"

namespace mlsim::training {

PipelineSchedule::PipelineSchedule(Kind kind, std::vector<std::size_t> first_layer,
                                   std::vector<std::size_t> replicas, std::size_t workers,
                                   std::size_t micro_batches, std::size_t group)
    : kind_(kind),
      first_layer_(std::move(first_layer)),
      replicas_(std::move(replicas)),
      micro_batches_(micro_batches),
      group_(group) {
  MLSIM_CHECK(!replicas_.empty() && first_layer_.size() == replicas_.size() + 1,
              "a pipeline schedule needs one first layer per stage and one past the last");
  MLSIM_CHECK(group_ > 0, "GPipe needs at least one micro-batch per flush");
  first_worker_.push_back(0);
  for (std::size_t s = 0; s < replicas_.size(); ++s) {
    MLSIM_CHECK(replicas_[s] >= 1 && first_layer_[s] < first_layer_[s + 1],
                "a stage without a worker or a layer");
    first_worker_.push_back(first_worker_.back() + replicas_[s]);
  }
  MLSIM_CHECK(first_worker_.back() <= workers, "the stages need more workers than the job has");
  workers_.assign(workers, Worker{});
  for (std::size_t s = 0; s < replicas_.size(); ++s) {
    for (std::size_t q = 0; q < replicas_[s]; ++q) {
      Worker& w = workers_[first_worker_[s] + q];
      w.stage = s;
      w.replica = q;
      w.replicas = replicas_[s];
      w.first_layer = first_layer_[s];
      w.end_layer = first_layer_[s + 1];
      w.limit = in_flight_limit(first_worker_[s], replicas_[s], workers_used());
    }
  }
  assign();
}

void PipelineSchedule::assign() {
  for (std::size_t w = 0; w < workers_used(); ++w)
    workers_[w].micro_batches =
        replica_minibatches(workers_[w].replica, workers_[w].replicas, micro_batches_);
}

void PipelineSchedule::set_micro_batches(std::size_t m) {
  micro_batches_ = m;
  assign();
}

std::optional<ScheduledOp> PipelineSchedule::next(std::size_t w, std::size_t forwards,
                                                  std::size_t backwards) const {
  const Worker& wk = workers_[w];
  if (wk.end_layer == 0) return std::nullopt;  // a worker no stage uses
  const std::size_t n = wk.micro_batches;
  StageOp op = StageOp::kNone;
  bool hands = true;
  if (kind_ == Kind::kOneFOneB) {
    op = next_op_limited(wk.limit, forwards, backwards, n);
    hands = !sync_after_last_backward_ || backwards + 1 == n;
  } else {
    // The group's last backward hands the accumulated gradients over.
    op = next_op_grouped(group_, forwards, backwards, n);
    hands = op == StageOp::kBackward && ends_group(group_, backwards, n);
  }
  if (op == StageOp::kNone) return std::nullopt;
  const bool forward = op == StageOp::kForward;
  ScheduledOp out;
  out.forward = forward;
  out.micro_batch = forward ? forwards : backwards;
  out.first_layer = wk.first_layer;
  out.end_layer = wk.end_layer;
  out.needs_input = forward ? wk.stage > 0 : wk.stage + 1 < stages();
  out.hands_gradients = !forward && hands;
  out.ends_after_send = blocking_sends_ && (forward ? wk.stage + 1 < stages() : wk.stage > 0);
  return out;
}

std::pair<std::size_t, std::size_t> PipelineSchedule::worker_of(std::size_t stage,
                                                                std::size_t m) const {
  const std::size_t r = replicas_[stage];
  return {first_worker_[stage] + m % r, m / r};
}

std::size_t PipelineSchedule::updates(std::size_t w) const {
  const std::size_t n = workers_[w].micro_batches;
  if (kind_ == Kind::kGPipe) return (n + group_ - 1) / group_;
  return sync_after_last_backward_ ? std::min<std::size_t>(n, 1) : n;
}

}  // namespace mlsim::training
