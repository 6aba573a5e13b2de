#include "sim_core/engine/engine.hpp"

#include <algorithm>

#include "sim_core/base/error.hpp"

namespace mlsim {

Engine::Engine() {
  events_.set_imminent_hook(
      [](void* self, const EventKey& k) {
        auto& e = *static_cast<Engine*>(self);
        const auto s = static_cast<std::uint32_t>(k.seq_slot & ((1u << kSlotBits) - 1));
        __builtin_prefetch(&e.slot(s));
      },
      this);
}
Engine::~Engine() = default;

std::uint32_t Engine::allocate_slot() {
  if (!free_slots_.empty()) {
    std::uint32_t s = free_slots_.back();
    free_slots_.pop_back();
    return s;
  }
  MLSIM_CHECK(slots_used_ < (1u << kSlotBits), "more than 16.7 million pending events");
  if ((slots_used_ >> kChunkBits) >= chunks_.size())
    chunks_.push_back(std::make_unique<Slot[]>(kChunkSize));
  return slots_used_++;
}

EventHandle Engine::schedule_at(Time t, Callback cb) {
  MLSIM_CHECK(t >= now_,
              "event scheduled in the past (" + to_string(t) + " < " + to_string(now_) + ")");
  const std::uint32_t s = allocate_slot();
  const std::uint64_t seq = next_seq_++;
  MLSIM_CHECK(seq < (1ULL << (64 - kSlotBits)), "event sequence space exhausted");
  Slot& sl = slot(s);
  sl.cb = std::move(cb);
  sl.seq = seq;
  events_.push(EventKey{t.count_ns(), (seq << kSlotBits) | s});
  ++live_;
  return EventHandle{s, seq};
}

bool Engine::cancel(EventHandle h) {
  if (!is_pending(h)) return false;
  Slot& sl = slot(h.slot);
  sl.cb.reset();
  sl.seq = 0;  // its key stays in the heap and is discarded when it reaches the top
  --live_;
  return true;
}

bool Engine::is_pending(EventHandle h) const {
  return h.valid() && h.slot < slots_used_ && slot(h.slot).seq == h.seq;
}

bool Engine::run_events(Time limit) {
  const std::int64_t lim = limit.count_ns();
  while (!events_.empty()) {
    const EventKey k = events_.top();
    if (k.time > lim) return true;
    if (!clocks_.empty()) {
      sync_external_clocks(Time::ns(k.time));
      if (events_.top().seq_slot != k.seq_slot) continue;  // an earlier event was added
    }
    events_.pop();
    const std::uint32_t s = static_cast<std::uint32_t>(k.seq_slot & ((1u << kSlotBits) - 1));
    Slot& sl = slot(s);
    if (sl.seq != (k.seq_slot >> kSlotBits)) {  // cancelled
      free_slots_.push_back(s);
      continue;
    }
    now_ = Time::ns(k.time);
    sl.seq = 0;
    --live_;
    // The slab is chunked, so `sl` stays valid even if the callback schedules more events.
    sl.cb();
    sl.cb.reset();
    free_slots_.push_back(s);
    ++processed_;
    if (hook_every_ && processed_ % hook_every_ == 0) hook_(*this);
    if (stop_requested_) return false;
  }
  return true;
}

void Engine::sync_external_clocks(Time limit) {
  for (;;) {
    Time t = limit;
    for (ExternalClock* c : clocks_) t = std::min(t, c->next_event_time());
    if (t < now_) t = now_;
    for (ExternalClock* c : clocks_) c->advance_to(t);
    if (t >= limit || (!events_.empty() && Time::ns(events_.top().time) <= t)) return;
    now_ = t;
  }
}

void Engine::run() {
  stop_requested_ = false;
  for (;;) {
    if (!run_events(Time::max())) return;
    if (clocks_.empty()) return;
    // The engine is idle, but an external component may still have work.
    Time t = Time::max();
    for (ExternalClock* c : clocks_) t = std::min(t, c->next_event_time());
    if (t == Time::max()) return;
    const Time target = std::max(t, now_);
    for (ExternalClock* c : clocks_) c->advance_to(target);
    // A component may stop short of `target` at an event it scheduled: run that event first.
    if (events_.empty() || Time::ns(events_.top().time) > target) now_ = target;
  }
}

void Engine::run_until(Time t) {
  stop_requested_ = false;
  if (!run_events(t)) return;
  if (!clocks_.empty()) sync_external_clocks(t);
  if (!events_.empty() && Time::ns(events_.top().time) <= t) {
    run_until(t);  // the external clocks added events before t
    return;
  }
  if (t > now_) now_ = t;
}

}  // namespace mlsim
