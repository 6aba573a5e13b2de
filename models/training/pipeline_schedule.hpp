#pragma once
// Pipeline schedules for the training core (op_schedule.hpp): the job's workers are the hosts of
// a pipeline's stages (stage s holds layers [first_layer[s], first_layer[s + 1]) and runs on
// replicas[s] consecutive workers; workers past the last stage's have no op), micro-batch m of a
// stage goes to its replica m mod r (PipeDream's round-robin, msr-fiddle/pipedream
// runtime/communication.py, get_messaging_index), and a worker counts its micro-batches in its
// own numbering (its k-th is the stage's replica + k x r). A forward of a stage after the first
// needs the previous stage's activation; a backward of a stage before the last the next stage's
// gradient (the last stage's backward follows its own forward).
//
//   - 1F1B (PipeDream, asynchronous): a worker of a stage whose first worker is h, out of W in
//     use, keeps at most (W - 1 - h) / r + 1 of its micro-batches in flight (forward done,
//     backward not): PipeDream's warm-up count (runtime/runtime.py, num_warmup_minibatches) plus
//     the steady state's one. It runs the forward of its next micro-batch while fewer are in flight
//     and micro-batches remain, else the backward of its oldest: warm-up, strict alternation, the
//     remaining backwards. Every backward hands its gradients over (a weight update per
//     micro-batch).
//   - GPipe (synchronous, with flush): micro-batches in groups of `group` per worker; all forwards
//     of a group, then all its backwards, the gradients handed over once, with the group's last
//     backward; the next group's forwards wait for them to come back (the flush).
//
// A worker waits for the input of the op the order names even when the other kind is ready.
// set_micro_batches() cuts the schedule (a segment ends early: the first stage stops admitting).
//
// Two flags for Megatron-LM's non-interleaved 1F1B (megatron/core/pipeline_parallel/schedules.py,
// forward_backward_pipelining_without_interleaving), whose op order is 1F1B's with one replica
// per stage: its warm-up of min(PP - s - 1, M) forwards followed by a forward before the first
// backward is the in-flight limit PP - s (Megatron's data-parallel copies are replicas taking
// micro-batches round-robin: limit (r (PP - s) - 1) / r + 1 = PP - s, and micro-batch m stays on
// replica m mod r through every stage, one pipeline per DP index).
//   - set_sync_after_last_backward(): a worker hands its gradients over only with its last
//     backward of the iteration (they accumulate over the micro-batches before), as Megatron
//     synchronises data-parallel gradients once after the last backward (finalize_model_grads),
//     overlapping nothing; the next iteration's forwards wait for them (the core's parameter
//     gate). GPipe always flushes by groups and ignores it.
//   - set_blocking_sends(): an op that sends its output (a forward of a stage before the last, a
//     backward of a stage after the first) ends only once the send is delivered
//     (ScheduledOp::ends_after_send), as Megatron's send_forward / send_forward_recv_backward /
//     send_backward_recv_forward wait for their batched isend before the stage goes on.
#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "models/training/op_schedule.hpp"

namespace mlsim::training {

enum class StageOp { kForward, kBackward, kNone };

// The next op of a worker allowed `limit` micro-batches in flight that has done `forwards`
// forwards and `backwards` backwards, out of its `micro_batches`; kNone when it is finished.
inline StageOp next_op_limited(std::size_t limit, std::size_t forwards, std::size_t backwards,
                               std::size_t micro_batches) {
  if (forwards < micro_batches && forwards - backwards < limit) return StageOp::kForward;
  if (backwards < forwards) return StageOp::kBackward;
  return StageOp::kNone;
}

// GPipe's order for a worker with `group` micro-batches per flush: every forward of the group its
// next backward belongs to, then that group's backwards; kNone when it is finished.
inline StageOp next_op_grouped(std::size_t group, std::size_t forwards, std::size_t backwards,
                               std::size_t micro_batches) {
  const std::size_t batch_end = std::min(micro_batches, (backwards / group + 1) * group);
  if (forwards < batch_end) return StageOp::kForward;
  if (backwards < forwards) return StageOp::kBackward;
  return StageOp::kNone;
}

// Whether a GPipe worker's backward number `backward` (from 0) ends its group: the one that hands
// the group's accumulated gradients over.
inline bool ends_group(std::size_t group, std::size_t backward, std::size_t micro_batches) {
  return (backward + 1) % group == 0 || backward + 1 == micro_batches;
}

// PipeDream's in-flight limit of a stage whose first worker is `first_worker`, run by `replicas`
// workers, out of `workers_used`.
inline std::size_t in_flight_limit(std::size_t first_worker, std::size_t replicas,
                                   std::size_t workers_used) {
  return (workers_used - 1 - first_worker) / replicas + 1;
}

// How many of `micro_batches` replica `replica` of `replicas` gets (round-robin).
inline std::size_t replica_minibatches(std::size_t replica, std::size_t replicas,
                                       std::size_t micro_batches) {
  return micro_batches > replica ? (micro_batches - replica + replicas - 1) / replicas : 0;
}

class PipelineSchedule final : public OpSchedule {
 public:
  enum class Kind { kOneFOneB, kGPipe };
  struct Worker {
    std::size_t stage = 0, replica = 0, replicas = 1;
    std::size_t first_layer = 0, end_layer = 0;
    std::size_t limit = 0;          // 1F1B's in-flight limit
    std::size_t micro_batches = 0;  // its share of the schedule's
  };

  // `first_layer`: per stage and one past the last; `replicas`: per stage; `workers`: the job's
  // (at least the sum of replicas); `group`: GPipe's micro-batches per flush (ignored by 1F1B).
  PipelineSchedule(Kind kind, std::vector<std::size_t> first_layer,
                   std::vector<std::size_t> replicas, std::size_t workers,
                   std::size_t micro_batches, std::size_t group = 1);

  std::optional<ScheduledOp> next(std::size_t worker, std::size_t forwards,
                                  std::size_t backwards) const override;

  // Megatron's two flags (above); both off by default (PipeDream's and GPipe's behaviour).
  void set_sync_after_last_backward(bool on) { sync_after_last_backward_ = on; }
  void set_blocking_sends(bool on) { blocking_sends_ = on; }
  bool sync_after_last_backward() const { return sync_after_last_backward_; }
  bool blocking_sends() const { return blocking_sends_; }

  // The schedule's micro-batches become `m` (the first m; a segment cut short).
  void set_micro_batches(std::size_t m);
  std::size_t micro_batches() const { return micro_batches_; }
  Kind kind() const { return kind_; }
  std::size_t stages() const { return replicas_.size(); }
  std::size_t workers_used() const { return first_worker_.back(); }
  std::size_t first_worker(std::size_t stage) const { return first_worker_[stage]; }
  std::size_t replication(std::size_t stage) const { return replicas_[stage]; }
  const Worker& worker(std::size_t w) const { return workers_[w]; }
  // The worker that runs micro-batch m of `stage`, and m's index among its micro-batches.
  std::pair<std::size_t, std::size_t> worker_of(std::size_t stage, std::size_t m) const;
  // How many times worker w hands its gradients over in the schedule (its weight updates).
  std::size_t updates(std::size_t w) const;

 private:
  void assign();

  Kind kind_;
  std::vector<std::size_t> first_layer_, replicas_, first_worker_;
  std::size_t micro_batches_, group_;
  bool sync_after_last_backward_ = false, blocking_sends_ = false;
  std::vector<Worker> workers_;
};

}  // namespace mlsim::training
