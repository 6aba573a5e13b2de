#include "models/ina/ina_sync.hpp"

#include <algorithm>

#include "sim_core/base/error.hpp"

namespace mlsim::ina {

InaSender::InaSender(InaSync& sync, std::uint16_t index)
    : sync_(sync),
      index_(index),
      unit_iteration_(sync.plan().units(), -1),
      unit_state_(sync.plan().units(), UnitState::kIdle),
      chunk_units_left_(sync.plan().chunks.size(), 0),
      unit_direct_(sync.plan().units(), false),
      unit_direct_next_(sync.plan().units(), false),
      unit_sent_(sync.plan().units()),
      window_(sync.config_.initial_window_packets) {}

void InaSender::start_chunk(std::uint32_t chunk) {
  const ChunkPlan& c = sync_.plan().chunks[chunk];
  MLSIM_CHECK(chunk_units_left_[chunk] == 0, "a chunk started again before its result came back");
  chunk_units_left_[chunk] = c.units;
  for (std::uint32_t u = c.first_unit; u < c.first_unit + c.units; ++u) {
    ++unit_iteration_[u];
    unit_direct_[u] = unit_direct_next_[u];
    unit_direct_next_[u] = false;
    unit_state_[u] = UnitState::kQueued;
    queue_.push_back(u);
  }
  try_send();
}

bool InaSender::may_send(std::uint32_t u) const {
  const SenderConfig& c = sync_.config_;
  if (c.slot_window > 0) {
    // SwitchML: the unit's slot is free once the result of unit seq - slots came back.
    const std::uint64_t seq = sync_.seq_of(u, unit_iteration_[u]);
    if (seq < c.slot_window) return true;
    const std::uint64_t prev = seq - c.slot_window;
    const auto prev_iteration = static_cast<int>(prev / sync_.plan().units());
    const auto prev_unit = static_cast<std::uint32_t>(prev % sync_.plan().units());
    return prev_iteration < unit_iteration_[u] || unit_state_[prev_unit] == UnitState::kDone;
  }
  const double packets = sync_.plan().unit_packets[u];
  return in_flight_ == 0 || in_flight_ + packets <= window_;
}

void InaSender::try_send() {
  while (!queue_.empty() && may_send(queue_.front())) {
    const std::uint32_t u = queue_.front();
    queue_.pop_front();
    // A resend request may have arrived before the unit was sent: then it goes to the PS.
    transmit(u, unit_direct_[u]);
  }
}

void InaSender::transmit(std::uint32_t u, bool resend) {
  const auto packets = sync_.plan().unit_packets[u];
  const bool first = unit_state_[u] != UnitState::kInFlight;
  if (first) {
    unit_state_[u] = UnitState::kInFlight;
    in_flight_ += packets;
    sync_.counters_.gradient_packets += packets;
  } else {
    sync_.counters_.retransmitted_packets += packets;
  }
  sync_.bytes_sent_ += 4 * static_cast<std::int64_t>(sync_.plan().unit_elements[u]);
  ++sync_.messages_;
  const Time now = sync_.engine_.now();
  unit_sent_[u] = now;
  sent_log_.push_back({u, unit_iteration_[u], now});
  Packet p;
  p.kind = PacketKind::kGradient;
  p.job = sync_.job_;
  p.worker = index_;
  p.seq = sync_.seq_of(u, unit_iteration_[u]);
  p.sum = std::uint64_t{1} << index_;
  p.bitmap = 1u << index_;
  p.packets = packets;
  p.priority = sync_.priority_.by_layer[sync_.plan().unit_layer[u]];
  p.resend = resend;
  sync_.send_(p);
  arm_timer();
}

void InaSender::arm_timer() {
  Engine& engine = sync_.engine_;
  if (sent_log_.empty() || engine.is_pending(timer_)) return;
  const Time at =
      std::max(engine.now(), sent_log_.front().at + sync_.config_.retransmission_timeout);
  timer_ = engine.schedule_at(at, [this] { on_timer(); });
}

void InaSender::on_timer() {
  const Time now = sync_.engine_.now();
  while (!sent_log_.empty()) {
    const Sent s = sent_log_.front();
    const bool live = unit_iteration_[s.unit] == s.iteration &&
                      unit_state_[s.unit] == UnitState::kInFlight && unit_sent_[s.unit] == s.at;
    if (!live) {
      sent_log_.pop_front();
      continue;
    }
    if (s.at + sync_.config_.retransmission_timeout > now) break;
    sent_log_.pop_front();
    ++sync_.counters_.timeouts;
    ++sync_.timeouts_;
    transmit(s.unit, /*resend=*/true);
  }
  arm_timer();
}

void InaSender::on_result(const Packet& p) {
  const JobPlan& plan = sync_.plan();
  const auto units = plan.units();
  const auto u = static_cast<std::uint32_t>(p.seq % units);
  const auto it = static_cast<int>(p.seq / units);
  auto& c = sync_.counters_;
  if (unit_iteration_[u] != it || unit_state_[u] != UnitState::kInFlight) {
    // A re-answer to a retransmission (the switch's shadow copy, a PS) may trail the original
    // result when the retransmission was spurious; any other second result is a protocol bug.
    ++(p.resend ? c.late_results : c.duplicate_results);
    return;
  }
  const std::uint32_t full = full_bitmap(sync_.workers());
  if (p.bitmap != full || p.sum != full) ++c.wrong_sums;
  ++c.results_received;
  c.elements_delivered += plan.unit_elements[u];
  sync_.elements_delivered_ += plan.unit_elements[u];
  sync_.last_result_ = sync_.engine_.now();
  unit_state_[u] = UnitState::kDone;
  const double packets = plan.unit_packets[u];
  in_flight_ -= packets;
  if (in_flight_ == 0) {
    // Nothing left to time out: drop the timer so an idle worker leaves no event behind.
    sync_.engine_.cancel(timer_);
    sent_log_.clear();
  }

  const SenderConfig& cfg = sync_.config_;
  if (cfg.slot_window == 0) {
    if (p.ecn && unit_sent_[u] > last_decrease_) {
      window_ = std::max(1.0, window_ / 2);  // once per round trip: later sends only
      last_decrease_ = sync_.engine_.now();
    } else if (!p.ecn) {
      window_ = std::min(cfg.max_window_packets,
                         window_ + cfg.increase_bytes_per_ack * packets / cfg.packet_bytes);
    }
  }

  const std::uint32_t chunk = plan.unit_chunk[u];
  if (--chunk_units_left_[chunk] == 0) {
    // The chunk's aggregate is back: its credit returns and its parameters are updated.
    const ChunkPlan& cp = plan.chunks[chunk];
    sync_.events_.on_chunk(index_, training::Chunk{cp.layer, cp.index, cp.elements},
                           /*release=*/true, /*arrived=*/true);
  }
  try_send();
}

void InaSender::abort() {
  sync_.engine_.cancel(timer_);
  sent_log_.clear();
  queue_.clear();
}

void InaSender::on_resend_request(const Packet& p) {
  ++resend_requests_;
  const auto units = sync_.plan().units();
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

InaSync::InaSync(Engine& engine, training::SyncEvents& events, std::uint16_t job,
                 std::shared_ptr<const JobPlan> plan, int workers, JobPriority priority,
                 SenderConfig config, InaCounters& counters, Send send)
    : engine_(engine),
      events_(events),
      job_(job),
      plan_(std::move(plan)),
      priority_(std::move(priority)),
      config_(config),
      counters_(counters),
      send_(std::move(send)) {
  MLSIM_CHECK(workers >= 1 && workers <= 32, "a job needs 1..32 workers");
  MLSIM_CHECK(priority_.by_layer.size() == plan_->layers.size(), "a priority per plan layer");
  senders_.reserve(static_cast<std::size_t>(workers));
  for (int w = 0; w < workers; ++w) senders_.emplace_back(*this, static_cast<std::uint16_t>(w));
}

void InaSync::set_partition(std::int64_t partition) {
  // The units, and with them the packets' sequence numbers that the switch aggregates by, are
  // cut at the plan's partition once; a scheduler that re-partitions during a run (a tuner)
  // would need a new plan with nothing in flight, which ina does not do.
  MLSIM_CHECK(partition == plan_->partition,
              "ina's job plan is cut at its scheduler's partition, fixed for the run");
}

void InaSync::start(std::size_t owner, const training::Chunk& chunk) {
  const LayerPlan& l = plan_->layers[chunk.layer];
  senders_[owner].start_chunk(l.first_chunk + chunk.index);
}

void InaSync::abort() {
  for (InaSender& s : senders_) s.abort();
}

}  // namespace mlsim::ina
