#include "sim_core/engine/engine.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "sim_core/base/error.hpp"

using namespace mlsim;

TEST(Engine, RunsEventsInTimeThenInsertionOrder) {
  Engine e;
  std::vector<int> order;
  e.schedule_at(Time::ns(20), [&] { order.push_back(3); });
  e.schedule_at(Time::ns(10), [&] { order.push_back(1); });
  e.schedule_at(Time::ns(10), [&] { order.push_back(2); });
  e.schedule_at(Time::ns(5), [&] { order.push_back(0); });
  e.run();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(e.now(), Time::ns(20));
  EXPECT_EQ(e.events_processed(), 4u);
}

TEST(Engine, CancelledEventNeverRuns) {
  Engine e;
  int ran = 0;
  auto h = e.schedule_at(Time::ns(10), [&] { ++ran; });
  e.schedule_at(Time::ns(5), [&] { EXPECT_TRUE(e.cancel(h)); });
  e.run();
  EXPECT_EQ(ran, 0);
  EXPECT_FALSE(e.cancel(h));
  EXPECT_EQ(e.pending_events(), 0u);
}

TEST(Engine, HandleOfReusedSlotDoesNotCancelNewEvent) {
  Engine e;
  int ran = 0;
  auto h = e.schedule_at(Time::ns(1), [] {});
  e.run();
  e.schedule_at(Time::ns(2), [&] { ++ran; });  // reuses the slot of h
  EXPECT_FALSE(e.cancel(h));
  e.run();
  EXPECT_EQ(ran, 1);
}

TEST(Engine, RunUntilStopsAtLimitAndAdvancesClock) {
  Engine e;
  int ran = 0;
  e.schedule_at(Time::ns(10), [&] { ++ran; });
  e.schedule_at(Time::ns(30), [&] { ++ran; });
  e.run_until(Time::ns(20));
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(e.now(), Time::ns(20));
  e.run();
  EXPECT_EQ(ran, 2);
}

TEST(Engine, StopFromCallback) {
  Engine e;
  int ran = 0;
  for (int i = 1; i <= 5; ++i)
    e.schedule_at(Time::ns(i), [&, i] {
      ++ran;
      if (i == 3) e.stop();
    });
  e.run();
  EXPECT_EQ(ran, 3);
  EXPECT_EQ(e.pending_events(), 2u);
}

TEST(Engine, SchedulingInThePastIsAnInvariantError) {
  Engine e;
  e.schedule_at(Time::ns(10), [] {});
  e.run();
  EXPECT_THROW(e.schedule_at(Time::ns(5), [] {}), InvariantError);
}

TEST(Engine, CallbacksMaySpawnManyEventsWhileRunning) {
  Engine e;
  std::int64_t count = 0;
  // Grows the slab across several chunks from inside callbacks.
  std::function<void(int)> spawn = [&](int depth) {
    ++count;
    if (depth < 14) {
      e.schedule_in(Time::ns(1), [&, depth] { spawn(depth + 1); });
      e.schedule_in(Time::ns(1), [&, depth] { spawn(depth + 1); });
    }
  };
  e.schedule_at(Time::zero(), [&] { spawn(0); });
  e.run();
  EXPECT_EQ(count, (1 << 15) - 1);
}

TEST(Engine, LargeCapturesFallBackToTheHeap) {
  Engine e;
  std::array<std::int64_t, 32> big{};
  big[31] = 7;
  std::int64_t seen = 0;
  e.schedule_at(Time::ns(1), [big, &seen] { seen = big[31]; });
  e.run();
  EXPECT_EQ(seen, 7);
}

// Property: a random mix of schedules and cancellations runs exactly the uncancelled events, in
// (time, insertion) order.
TEST(Engine, RandomScheduleCancelProperty) {
  Engine e;
  std::uint64_t x = 12345;
  auto rnd = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  struct Ev {
    std::int64_t t;
    int id;
  };
  std::vector<Ev> expected;
  std::vector<Ev> seen;
  std::vector<EventHandle> handles;
  for (int i = 0; i < 5000; ++i) {
    std::int64_t t = static_cast<std::int64_t>(rnd() % 1000);
    handles.push_back(e.schedule_at(Time::ns(t), [&seen, t, i] { seen.push_back({t, i}); }));
    expected.push_back({t, i});
  }
  std::vector<bool> cancelled(5000, false);
  for (int k = 0; k < 1500; ++k) {
    int i = static_cast<int>(rnd() % 5000);
    if (e.cancel(handles[i])) cancelled[i] = true;
  }
  e.run();
  std::vector<Ev> want;
  for (auto& ev : expected)
    if (!cancelled[ev.id]) want.push_back(ev);
  std::stable_sort(want.begin(), want.end(), [](const Ev& a, const Ev& b) { return a.t < b.t; });
  ASSERT_EQ(seen.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(seen[i].id, want[i].id);
  }
}

namespace {
// An external component with one event of its own at a fixed date.
class OneShotClock : public ExternalClock {
 public:
  OneShotClock(Engine& e, Time at) : engine_(e), at_(at) {}
  Time next_event_time() override { return fired_ ? Time::max() : at_; }
  void advance_to(Time t) override {
    advanced_to_ = t;
    if (!fired_ && t >= at_) {
      fired_ = true;
      engine_.schedule_at(at_, [this] { ran_at_ = engine_.now(); });
    }
  }
  Engine& engine_;
  Time at_, advanced_to_, ran_at_;
  bool fired_ = false;
};
}  // namespace

TEST(Engine, ExternalClockEventRunsAtItsDateBetweenEngineEvents) {
  Engine e;
  OneShotClock clock(e, Time::ns(15));
  e.add_external_clock(&clock);
  std::vector<Time> seen;
  e.schedule_at(Time::ns(10), [&] { seen.push_back(e.now()); });
  e.schedule_at(Time::ns(20), [&] { seen.push_back(e.now()); });
  e.run();
  EXPECT_EQ(clock.ran_at_, Time::ns(15));
  EXPECT_EQ(seen, (std::vector<Time>{Time::ns(10), Time::ns(20)}));
}

TEST(Engine, RemovedExternalClockIsNoLongerAdvanced) {
  Engine e;
  OneShotClock clock(e, Time::ns(15));
  e.add_external_clock(&clock);
  e.remove_external_clock(&clock);
  e.schedule_at(Time::ns(30), [] {});
  e.run();
  EXPECT_FALSE(clock.fired_);
  EXPECT_EQ(clock.advanced_to_, Time::zero());
}

namespace {
// A component that, asked to advance far, stops at its own event (as the ns-3 bridge does).
class EarlyStopClock : public ExternalClock {
 public:
  explicit EarlyStopClock(Engine& e) : engine_(e) {}
  Time next_event_time() override { return pending_ ? Time::s(1) : Time::max(); }
  void advance_to(Time t) override {
    if (pending_ && t >= Time::ns(40)) {
      pending_ = false;
      engine_.schedule_at(Time::ns(40), [this] { ran_at_ = engine_.now(); });
    }
  }
  Engine& engine_;
  bool pending_ = true;
  Time ran_at_;
};
}  // namespace

TEST(Engine, ExternalClockMayStopShortOfTheTargetAtItsOwnEvent) {
  Engine e;
  EarlyStopClock clock(e);
  e.add_external_clock(&clock);
  e.run();
  EXPECT_EQ(clock.ran_at_, Time::ns(40));
  EXPECT_EQ(e.now(), Time::ns(40));
}
