#pragma once
// In-network aggregation as a gradient-synchronisation strategy of the training core
// (models/training/gradient_sync.hpp, docs/training.md): each chunk the core's communication
// scheduler releases on a worker leaves as the job plan's units (bursts of packets) to the switch
// program (SwitchML, ATP or DSA over its aggregator pool, policy.hpp), and the chunk is back on
// the worker when every unit's aggregated result arrived. Entry kPerWorker: a worker's packets
// need no other worker to leave.
//
// Each worker's sender is either window-based (ATP/DSA: the window halves on ECN, at most once
// per round trip, and grows by 1500 bytes per acknowledged packet up to a cap) or slot-bound
// (SwitchML: chunk c waits for the result of chunk c - slots). Unanswered units are resent after
// a timeout; a PS's resend request (DSA) is answered at once, or the unit is sent straight to the
// PS when it is produced. A chunk gives its scheduler credit back when its result is in.
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <vector>

#include "models/ina/counters.hpp"
#include "models/ina/dsa_priority.hpp"
#include "models/ina/job_plan.hpp"
#include "models/ina/packet.hpp"
#include "models/training/gradient_sync.hpp"
#include "sim_core/engine/engine.hpp"

namespace mlsim::ina {

struct SenderConfig {
  double packet_bytes = 308;             // wire bytes of one packet
  double initial_window_packets = 1200;  // window-based senders
  double max_window_packets = 1200;
  double increase_bytes_per_ack = 1500;
  std::uint32_t slot_window = 0;  // > 0: slot-bound sender (SwitchML), in units
  Time retransmission_timeout = Time::ms(1);
  // The job's watchdog (ina_job.hpp): nothing happening for this long aborts the job; zero =
  // never.
  Time stall_timeout = Time::zero();
};

class InaSync;

// One worker's sender: its units' states, queue, window or slots, and retransmission timer.
class InaSender {
 public:
  InaSender(InaSync& sync, std::uint16_t index);
  // The units of plan chunk `chunk` are ready (the scheduler released it): queue and send.
  void start_chunk(std::uint32_t chunk);
  void on_result(const Packet& p);
  void on_resend_request(const Packet& p);
  // The job was aborted: stop sending and retransmitting.
  void abort();
  double window_packets() const { return window_; }
  int resend_requests_received() const { return resend_requests_; }

 private:
  enum class UnitState : std::uint8_t { kIdle, kQueued, kInFlight, kDone };
  bool may_send(std::uint32_t unit) const;
  void try_send();
  void transmit(std::uint32_t unit, bool resend);
  void arm_timer();
  void on_timer();

  InaSync& sync_;
  std::uint16_t index_;
  std::vector<int> unit_iteration_;  // the iteration of the unit's last start (-1: none)
  std::vector<UnitState> unit_state_;
  std::vector<std::uint32_t> chunk_units_left_;  // per plan chunk: results still missing
  // A PS asked for the unit (resend request) before it was sent: send it straight to the PS.
  // For the unit's current iteration, and for the next one (not produced yet; a request is never
  // further ahead: other workers reach iteration i of a chunk only after this worker's
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

class InaSync final : public training::GradientSync {
 public:
  using Send = InlineFunction<void(const Packet&), 16>;
  // `plan` cut at the scheduler's partition (set_partition must agree); `send` carries a
  // worker's packet to the switch program; `events` hears each chunk back (the gradient path).
  InaSync(Engine& engine, training::SyncEvents& events, std::uint16_t job,
          std::shared_ptr<const JobPlan> plan, int workers, JobPriority priority,
          SenderConfig config, InaCounters& counters, Send send);

  Entry entry() const override { return Entry::kPerWorker; }
  bool one_tensor_at_a_time() const override { return false; }
  bool layout_matters() const override { return true; }  // units and seqs follow the partition
  void set_partition(std::int64_t partition) override;
  void start(std::size_t owner, const training::Chunk& chunk) override;
  std::int64_t bytes_sent() const override { return bytes_sent_; }
  std::int64_t bytes_delivered() const override { return 4 * elements_delivered_; }
  std::uint64_t messages() const override { return messages_; }

  // What reached worker `w` from the switch: a result, or a PS's resend request.
  void on_result(std::uint16_t w, const Packet& p) { senders_[w].on_result(p); }
  void on_resend_request(std::uint16_t w, const Packet& p) { senders_[w].on_resend_request(p); }
  InaSender& sender(std::uint16_t w) { return senders_.at(w); }
  void abort();
  // A packet of the job found no route (a failed link or node): the job cannot finish. Reports
  // it once through GradientSync::set_on_failed (the cluster's detailed mode then requeues or
  // drops the job). The ina model's own runs do not call it: their senders recover by timeouts
  // and their stall watchdog gives a hung job up.
  void transfer_failed() {
    ++failed_transfers_;
    report_failure();
  }
  std::uint64_t failed_transfers() const override { return failed_transfers_; }
  std::uint64_t timeouts() const override { return timeouts_; }

  const JobPlan& plan() const { return *plan_; }
  int workers() const { return static_cast<int>(senders_.size()); }
  // Gradient values the workers received in results (every worker, every iteration).
  std::int64_t elements_delivered() const { return elements_delivered_; }
  // When a worker last received a new result (the job's start before any).
  Time last_result() const { return last_result_; }
  void set_started(Time t) { last_result_ = t; }

 private:
  friend class InaSender;
  std::uint64_t seq_of(std::uint32_t unit, int iteration) const {
    return static_cast<std::uint64_t>(iteration) * plan_->units() + unit;
  }

  Engine& engine_;
  training::SyncEvents& events_;
  std::uint16_t job_;
  std::shared_ptr<const JobPlan> plan_;
  JobPriority priority_;  // DSA's, per layer of the plan
  SenderConfig config_;
  InaCounters& counters_;
  Send send_;
  std::vector<InaSender> senders_;
  std::int64_t elements_delivered_ = 0, bytes_sent_ = 0;
  std::uint64_t messages_ = 0, failed_transfers_ = 0, timeouts_ = 0;
  Time last_result_;
};

}  // namespace mlsim::ina
