#pragma once
// A data-parallel training job: `workers` replicas that each run forward and backward layer by
// layer (times from the job's plan), hand every layer's gradient to the network as soon as its
// backward pass ends, and start the next iteration's forward of a layer only once that layer's
// aggregated gradient came back (so communication overlaps the rest of the backward pass and the
// early layers of the next forward).
//
// Each worker's sender is either window-based (ATP/DSA: the window halves on ECN, at most once
// per round trip, and grows by 1500 bytes per acknowledged packet up to a cap) or slot-bound
// (SwitchML: chunk c waits for the result of chunk c - slots). Unanswered chunks are resent after
// a timeout; a PS's resend request (DSA) is answered at once, or the chunk is sent straight to the
// PS when it is produced.
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <vector>

#include "models/ina/counters.hpp"
#include "models/ina/job_plan.hpp"
#include "models/ina/packet.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/hardware/compute.hpp"

namespace mlsim::ina {

struct SenderConfig {
  double packet_bytes = 308;             // wire bytes of one packet
  double initial_window_packets = 1200;  // window-based senders
  double max_window_packets = 1200;
  double increase_bytes_per_ack = 1500;
  std::uint32_t slot_window = 0;  // > 0: slot-bound sender (SwitchML), in chunks
  Time retransmission_timeout = Time::ms(1);
  // The job's watchdog (cluster_params.hpp): nothing happening for this long aborts the job;
  // zero = never.
  Time stall_timeout = Time::zero();
};

class TrainingJob;

class Worker {
 public:
  // Every forward and backward of this worker runs on `compute` on its host `node` (null: on the
  // engine), taking `times` (on its host's GPU; null: the plan's times, as profiled).
  Worker(TrainingJob& job, std::uint16_t index, Compute* compute, NodeId node,
         std::shared_ptr<const LayerTimes> times);
  void start();
  // The job was aborted: stop sending and retransmitting (compute ops already scheduled end
  // without effect).
  void abort();
  void on_result(const Packet& p);
  void on_resend_request(const Packet& p);
  bool finished() const { return finished_; }
  double window_packets() const { return window_; }
  int resend_requests_received() const { return resend_requests_; }

 private:
  enum class UnitState : std::uint8_t { kIdle, kQueued, kInFlight, kDone };
  static constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
  // Runs an op of `t` (at speed 1) on the worker's GPU, then `done`.
  void run_op(Time t, Engine::Callback done);
  void forward(std::uint32_t layer);
  void backward(std::uint32_t layer);
  void produce(std::uint32_t layer);
  void try_send();
  bool may_send(std::uint32_t unit) const;
  void transmit(std::uint32_t unit, bool resend);
  void arm_timer();
  void on_timer();

  TrainingJob& job_;
  std::uint16_t index_;
  Compute* compute_;
  NodeId node_;
  std::shared_ptr<const LayerTimes> times_;
  int iteration_ = 0;  // the iteration being computed
  std::uint32_t waiting_layer_ = kNone;
  bool finished_ = false;
  std::uint32_t layers_done_last_iteration_ = 0;
  std::vector<int> layer_ready_;  // last iteration whose aggregated gradient arrived, per layer
  std::vector<std::uint32_t> received_;  // units of the layer's pending iteration received
  std::vector<int> unit_iteration_;
  std::vector<UnitState> unit_state_;
  // A PS asked for the unit (resend request) before it was sent: send it straight to the PS.
  // For the unit's current iteration, and for the next one (not produced yet; a request is never
  // further ahead: other workers reach iteration i of a layer only after this worker's
  // contribution to iteration i - 1). Bits, not iteration numbers: there are ~10^6 units.
  std::vector<bool> unit_direct_, unit_direct_next_;
  std::vector<Time> unit_sent_;
  std::deque<std::uint32_t> queue_;
  struct Sent {
    std::uint32_t unit;
    int iteration;
    Time at;
  };
  std::deque<Sent> sent_log_;  // send order, for the retransmission timer
  double window_;
  double in_flight_ = 0;  // packets
  Time last_decrease_ = Time::zero();
  EventHandle timer_;
  int resend_requests_ = 0;
};

class TrainingJob {
 public:
  using Send = InlineFunction<void(const Packet&), 16>;
  using Finished = InlineFunction<void(TrainingJob&), 16>;

  TrainingJob(Engine& engine, std::uint16_t id, std::shared_ptr<const JobPlan> plan, int workers,
              int iterations, std::uint8_t priority, SenderConfig sender, InaCounters& counters,
              Send send, Finished finished, Compute* compute = nullptr,
              std::vector<NodeId> worker_nodes = {},
              std::vector<std::shared_ptr<const LayerTimes>> worker_times = {});
  TrainingJob(const TrainingJob&) = delete;
  TrainingJob& operator=(const TrainingJob&) = delete;

  void start();
  Worker& worker(std::uint16_t w) { return *workers_.at(w); }

  std::uint16_t id() const { return id_; }
  const JobPlan& plan() const { return *plan_; }
  int workers() const { return static_cast<int>(workers_.size()); }
  int iterations() const { return iterations_; }
  std::uint8_t priority() const { return priority_; }
  Time started_at() const { return started_; }
  // When the job finished, or was aborted (failed()).
  Time finished_at() const { return finished_at_; }
  bool finished() const { return done_workers_ == workers(); }
  // Aborted by its watchdog (SenderConfig::stall_timeout): it will not finish.
  bool failed() const { return failed_; }
  // Gradient values its workers received in results (every worker, every iteration).
  std::int64_t elements_delivered() const { return elements_delivered_; }
  // Start of each iteration's first forward layer on worker 0; the last entry is the finish.
  const std::vector<Time>& iteration_marks() const { return marks_; }

 private:
  friend class Worker;
  std::uint64_t seq_of(std::uint32_t unit, int iteration) const {
    return static_cast<std::uint64_t>(iteration) * plan_->units() + unit;
  }
  void worker_finished();
  void arm_watchdog();
  void on_watchdog();

  Engine& engine_;
  std::uint16_t id_;
  std::shared_ptr<const JobPlan> plan_;
  int iterations_;
  std::uint8_t priority_;
  SenderConfig sender_;
  InaCounters& counters_;
  Send send_;
  Finished on_finished_;
  std::vector<std::unique_ptr<Worker>> workers_;
  int done_workers_ = 0;
  Time started_, finished_at_;
  std::vector<Time> marks_;
  std::uint32_t layers_with_gradient_ = 0;
  bool failed_ = false;
  Time last_progress_;  // a compute op ended or a worker received a new result
  EventHandle watchdog_;
  std::int64_t elements_delivered_ = 0;
};

}  // namespace mlsim::ina
