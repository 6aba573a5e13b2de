#include "models/ina/training_job.hpp"

#include <algorithm>

#include "sim_core/base/error.hpp"

namespace mlsim::ina {

Worker::Worker(TrainingJob& job, std::uint16_t index, Compute* compute, NodeId node,
               std::shared_ptr<const LayerTimes> times)
    : job_(job),
      index_(index),
      compute_(compute),
      node_(node),
      times_(std::move(times)),
      layer_ready_(job.plan().layers.size(), -1),
      received_(job.plan().layers.size(), 0),
      unit_iteration_(job.plan().units(), -1),
      unit_state_(job.plan().units(), UnitState::kIdle),
      unit_direct_(job.plan().units(), false),
      unit_direct_next_(job.plan().units(), false),
      unit_sent_(job.plan().units()),
      window_(job.sender_.initial_window_packets) {}

void Worker::start() {
  forward(0);
}

void Worker::run_op(Time t, Engine::Callback done) {
  if (compute_) {
    compute_->run(node_, FixedWork{t}, std::move(done));
  } else {
    job_.engine_.schedule_in(t, std::move(done));
  }
}

void Worker::forward(std::uint32_t layer) {
  const LayerPlan& l = job_.plan().layers[layer];
  if (iteration_ > 0 && l.units > 0 && layer_ready_[layer] < iteration_ - 1) {
    waiting_layer_ = layer;  // resumed by on_result
    return;
  }
  waiting_layer_ = kNone;
  if (layer == 0 && index_ == 0) job_.marks_.push_back(job_.engine_.now());
  run_op(times_ ? (*times_)[layer].forward : l.forward, [this, layer] {
    if (job_.failed_) return;
    job_.last_progress_ = job_.engine_.now();
    if (layer + 1 < job_.plan().layers.size())
      forward(layer + 1);
    else
      backward(layer);
  });
}

void Worker::backward(std::uint32_t layer) {
  run_op(times_ ? (*times_)[layer].backward : job_.plan().layers[layer].backward, [this, layer] {
    if (job_.failed_) return;
    job_.last_progress_ = job_.engine_.now();
    produce(layer);
    if (layer > 0) {
      backward(layer - 1);
    } else if (++iteration_ < job_.iterations()) {
      forward(0);
    }
  });
}

void Worker::produce(std::uint32_t layer) {
  const LayerPlan& l = job_.plan().layers[layer];
  for (std::uint32_t u = l.first_unit; u < l.first_unit + l.units; ++u) {
    MLSIM_CHECK(unit_iteration_[u] == iteration_ - 1,
                "units are produced once per iteration, in order");
    unit_iteration_[u] = iteration_;
    unit_direct_[u] = unit_direct_next_[u];
    unit_direct_next_[u] = false;
    unit_state_[u] = UnitState::kQueued;
    queue_.push_back(u);
  }
  try_send();
}

bool Worker::may_send(std::uint32_t u) const {
  const SenderConfig& c = job_.sender_;
  if (c.slot_window > 0) {
    // SwitchML: the chunk's slot is free once the result of chunk seq - slots came back.
    const std::uint64_t seq = job_.seq_of(u, unit_iteration_[u]);
    if (seq < c.slot_window) return true;
    const std::uint64_t prev = seq - c.slot_window;
    const auto prev_iteration = static_cast<int>(prev / job_.plan().units());
    const auto prev_unit = static_cast<std::uint32_t>(prev % job_.plan().units());
    return prev_iteration < unit_iteration_[u] || unit_state_[prev_unit] == UnitState::kDone;
  }
  const double packets = job_.plan().unit_packets[u];
  return in_flight_ == 0 || in_flight_ + packets <= window_;
}

void Worker::try_send() {
  while (!queue_.empty() && may_send(queue_.front())) {
    const std::uint32_t u = queue_.front();
    queue_.pop_front();
    // A resend request may have arrived before the chunk was sent: then it goes to the PS.
    transmit(u, unit_direct_[u]);
  }
}

void Worker::transmit(std::uint32_t u, bool resend) {
  const auto packets = job_.plan().unit_packets[u];
  const bool first = unit_state_[u] != UnitState::kInFlight;
  if (first) {
    unit_state_[u] = UnitState::kInFlight;
    in_flight_ += packets;
    job_.counters_.gradient_packets += packets;
  } else {
    job_.counters_.retransmitted_packets += packets;
  }
  const Time now = job_.engine_.now();
  unit_sent_[u] = now;
  sent_log_.push_back({u, unit_iteration_[u], now});
  Packet p;
  p.kind = PacketKind::kGradient;
  p.job = job_.id_;
  p.worker = index_;
  p.seq = job_.seq_of(u, unit_iteration_[u]);
  p.sum = std::uint64_t{1} << index_;
  p.bitmap = 1u << index_;
  p.packets = packets;
  p.priority = job_.priority_;
  p.resend = resend;
  job_.send_(p);
  arm_timer();
}

void Worker::arm_timer() {
  if (sent_log_.empty() || job_.engine_.is_pending(timer_)) return;
  const Time at =
      std::max(job_.engine_.now(), sent_log_.front().at + job_.sender_.retransmission_timeout);
  timer_ = job_.engine_.schedule_at(at, [this] { on_timer(); });
}

void Worker::on_timer() {
  const Time now = job_.engine_.now();
  while (!sent_log_.empty()) {
    const Sent s = sent_log_.front();
    const bool live = unit_iteration_[s.unit] == s.iteration &&
                      unit_state_[s.unit] == UnitState::kInFlight && unit_sent_[s.unit] == s.at;
    if (!live) {
      sent_log_.pop_front();
      continue;
    }
    if (s.at + job_.sender_.retransmission_timeout > now) break;
    sent_log_.pop_front();
    ++job_.counters_.timeouts;
    transmit(s.unit, /*resend=*/true);
  }
  arm_timer();
}

void Worker::on_result(const Packet& p) {
  const auto units = job_.plan().units();
  const auto u = static_cast<std::uint32_t>(p.seq % units);
  const auto it = static_cast<int>(p.seq / units);
  auto& c = job_.counters_;
  if (unit_iteration_[u] != it || unit_state_[u] != UnitState::kInFlight) {
    // A re-answer to a retransmission (the switch's shadow copy, a PS) may trail the original
    // result when the retransmission was spurious; any other second result is a protocol bug.
    ++(p.resend ? c.late_results : c.duplicate_results);
    return;
  }
  const std::uint32_t full = full_bitmap(job_.workers());
  if (p.bitmap != full || p.sum != full) ++c.wrong_sums;
  ++c.results_received;
  c.elements_delivered += job_.plan().unit_elements[u];
  job_.elements_delivered_ += job_.plan().unit_elements[u];
  job_.last_progress_ = job_.engine_.now();
  unit_state_[u] = UnitState::kDone;
  const double packets = job_.plan().unit_packets[u];
  in_flight_ -= packets;
  if (in_flight_ == 0) {
    // Nothing left to time out: drop the timer so an idle worker leaves no event behind.
    job_.engine_.cancel(timer_);
    sent_log_.clear();
  }

  const SenderConfig& cfg = job_.sender_;
  if (cfg.slot_window == 0) {
    if (p.ecn && unit_sent_[u] > last_decrease_) {
      window_ = std::max(1.0, window_ / 2);  // once per round trip: later sends only
      last_decrease_ = job_.engine_.now();
    } else if (!p.ecn) {
      window_ = std::min(cfg.max_window_packets,
                         window_ + cfg.increase_bytes_per_ack * packets / cfg.packet_bytes);
    }
  }

  const std::uint32_t layer = job_.plan().unit_layer[u];
  if (++received_[layer] == job_.plan().layers[layer].units) {
    received_[layer] = 0;
    layer_ready_[layer] = it;
    if (it == job_.iterations() - 1 &&
        ++layers_done_last_iteration_ == job_.layers_with_gradient_) {
      finished_ = true;
      job_.worker_finished();
    }
    if (waiting_layer_ == layer) forward(layer);
  }
  try_send();
}

void Worker::abort() {
  job_.engine_.cancel(timer_);
  sent_log_.clear();
  queue_.clear();
}

void Worker::on_resend_request(const Packet& p) {
  ++resend_requests_;
  const auto units = job_.plan().units();
  const auto u = static_cast<std::uint32_t>(p.seq % units);
  const auto it = static_cast<int>(p.seq / units);
  if (unit_iteration_[u] > it) return;  // long finished
  if (unit_iteration_[u] < it) {
    // Not produced yet: send it straight to the PS when backward gets there. (The unit may still
    // wait for the previous iteration's result, if that was lost: its timer still runs.)
    MLSIM_CHECK(it == unit_iteration_[u] + 1, "a resend request two iterations ahead");
    unit_direct_next_[u] = true;
    return;
  }
  switch (unit_state_[u]) {
    case UnitState::kDone:
      return;
    case UnitState::kInFlight:
      transmit(u, /*resend=*/true);
      return;
    case UnitState::kIdle:
    case UnitState::kQueued:
      unit_direct_[u] = true;
      return;
  }
}

TrainingJob::TrainingJob(Engine& engine, std::uint16_t id, std::shared_ptr<const JobPlan> plan,
                         int workers, int iterations, std::uint8_t priority, SenderConfig sender,
                         InaCounters& counters, Send send, Finished finished, Compute* compute,
                         std::vector<NodeId> worker_nodes,
                         std::vector<std::shared_ptr<const LayerTimes>> worker_times)
    : engine_(engine),
      id_(id),
      plan_(std::move(plan)),
      iterations_(iterations),
      priority_(priority),
      sender_(sender),
      counters_(counters),
      send_(std::move(send)),
      on_finished_(std::move(finished)) {
  MLSIM_CHECK(workers >= 1 && workers <= 32, "a job needs 1..32 workers");
  MLSIM_CHECK(iterations >= 1, "a job needs at least one iteration");
  for (const auto& l : plan_->layers)
    if (l.units > 0) ++layers_with_gradient_;
  MLSIM_CHECK(layers_with_gradient_ > 0, "a job without gradients");
  MLSIM_CHECK(!compute || static_cast<int>(worker_nodes.size()) == workers, "one host per worker");
  MLSIM_CHECK(worker_times.empty() || static_cast<int>(worker_times.size()) == workers,
              "one layer-time table per worker");
  for (const auto& t : worker_times)
    MLSIM_CHECK(t && t->size() == plan_->layers.size(), "a time per layer of the plan");
  for (int w = 0; w < workers; ++w) {
    const auto i = static_cast<std::size_t>(w);
    workers_.push_back(std::make_unique<Worker>(*this, static_cast<std::uint16_t>(w), compute,
                                                compute ? worker_nodes[i] : NodeId{0},
                                                worker_times.empty() ? nullptr : worker_times[i]));
  }
}

void TrainingJob::start() {
  started_ = engine_.now();
  last_progress_ = started_;
  arm_watchdog();
  for (auto& w : workers_) w->start();
}

void TrainingJob::arm_watchdog() {
  if (sender_.stall_timeout <= Time::zero()) return;
  watchdog_ =
      engine_.schedule_at(last_progress_ + sender_.stall_timeout, [this] { on_watchdog(); });
}

// Fires at the earliest time the job can have stalled for the whole timeout; if something
// happened since, it looks again from the last progress (one event per timeout per job).
void TrainingJob::on_watchdog() {
  if (engine_.now() - last_progress_ < sender_.stall_timeout) {
    arm_watchdog();
    return;
  }
  failed_ = true;
  finished_at_ = engine_.now();
  for (auto& w : workers_) w->abort();
  on_finished_(*this);
}

void TrainingJob::worker_finished() {
  if (++done_workers_ < workers()) return;
  engine_.cancel(watchdog_);
  finished_at_ = engine_.now();
  marks_.push_back(finished_at_);
  on_finished_(*this);
}

}  // namespace mlsim::ina
