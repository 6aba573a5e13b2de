#pragma once
// The discrete-event engine: a clock and a set of pending events ordered by (time, insertion
// sequence), so ties are resolved deterministically in scheduling order.
//
// The event set (event_set.hpp) holds 16-byte keys (time, sequence<<24 | slot). Callbacks live in
// a chunked slab indexed by the slot, so the set moves only small keys and scheduling does not
// allocate. Cancellation is O(1): the slot is emptied and its stale key is dropped when it
// reaches the top of the set.
//
// No globals: every component receives the Engine it belongs to, and several engines can coexist
// in one process (tests, sweeps run in-process).
#include <cstdint>
#include <memory>
#include <vector>

#include "sim_core/base/time.hpp"
#include "sim_core/engine/event_set.hpp"
#include "sim_core/engine/inline_function.hpp"

namespace mlsim {

struct EventHandle {
  std::uint32_t slot = 0;
  std::uint64_t seq = 0;  // 0 = no event
  bool valid() const { return seq != 0; }
};

// A component with its own clock (a SimGrid or ns-3 backend) that the engine must let advance
// before it runs its own next event.
class ExternalClock {
 public:
  virtual ~ExternalClock() = default;
  // Earliest time at which this component has something to do, if it can tell; Time::max() when
  // it has nothing pending.
  virtual Time next_event_time() = 0;
  // Advances the component to `t` (>= now). It may schedule engine events at times in [now, t],
  // and may stop short of `t` right after scheduling one (ns-3 stops at each delivery): the
  // engine then runs that event and asks again.
  virtual void advance_to(Time t) = 0;
};

class Engine {
 public:
  using Callback = InlineFunction<void(), 48>;

  Engine();
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  Time now() const { return now_; }

  // Schedules `cb` at absolute time `t`; `t` earlier than now() is an InvariantError.
  EventHandle schedule_at(Time t, Callback cb);
  EventHandle schedule_in(Time delay, Callback cb) {
    return schedule_at(now_ + delay, std::move(cb));
  }

  // Cancels a pending event. Returns false when it already ran, was cancelled, or is running.
  bool cancel(EventHandle h);
  bool is_pending(EventHandle h) const;

  // Runs until no event is left or stop() is called.
  void run();
  // Runs every event with time <= t, then sets the clock to t (unless stopped earlier).
  void run_until(Time t);
  // Makes run()/run_until() return after the current event.
  void stop() { stop_requested_ = true; }
  bool stopped() const { return stop_requested_; }

  std::uint64_t events_processed() const { return processed_; }
  std::size_t pending_events() const { return live_; }

  void add_external_clock(ExternalClock* clock) { clocks_.push_back(clock); }
  // A component that goes away before the engine must unregister its clock.
  void remove_external_clock(ExternalClock* clock) { std::erase(clocks_, clock); }

  // Called every `every` processed events with the engine (progress reporting, stop conditions).
  void set_periodic_hook(std::uint64_t every, InlineFunction<void(Engine&), 32> hook) {
    hook_every_ = every;
    hook_ = std::move(hook);
  }

 private:
  // One cache line per event: running an event costs one (prefetched) line of the slab.
  struct alignas(64) Slot {
    Callback cb;
    std::uint64_t seq = 0;  // matches the key's sequence while the event is pending
  };
  static_assert(sizeof(Slot) == 64);
  static constexpr unsigned kSlotBits = 24;
  static constexpr std::uint32_t kChunkBits = 12;
  static constexpr std::uint32_t kChunkSize = 1u << kChunkBits;

  Slot& slot(std::uint32_t i) { return chunks_[i >> kChunkBits][i & (kChunkSize - 1)]; }
  const Slot& slot(std::uint32_t i) const { return chunks_[i >> kChunkBits][i & (kChunkSize - 1)]; }
  std::uint32_t allocate_slot();
  // Runs events with time <= limit; returns false if stopped.
  bool run_events(Time limit);
  Time next_time() { return events_.empty() ? Time::max() : Time::ns(events_.top().time); }
  void sync_external_clocks(Time limit);

  Time now_ = Time::zero();
  std::uint64_t next_seq_ = 1;
  std::uint64_t processed_ = 0;
  std::size_t live_ = 0;
  bool stop_requested_ = false;
  EventSet events_;
  std::vector<std::unique_ptr<Slot[]>> chunks_;
  std::vector<std::uint32_t> free_slots_;
  std::uint32_t slots_used_ = 0;
  std::vector<ExternalClock*> clocks_;
  std::uint64_t hook_every_ = 0;
  InlineFunction<void(Engine&), 32> hook_;
};

}  // namespace mlsim
