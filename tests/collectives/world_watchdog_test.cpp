// MultiWorld's watchdog detection times against cases worked by hand (world_watchdog.hpp).
#include "sim_core/collectives/world_watchdog.hpp"

#include <gtest/gtest.h>

namespace mlsim::collectives {
namespace {

const WatchdogConstants kPymultiworld{};  // 0.3 s ticks, a check every 10 ticks (3 s)

Time ms(std::int64_t v) {
  return Time::ms(v);
}

TEST(WorldWatchdog, AFailureBetweenChecksIsSeenAtTheSecondCheckAfterIt) {
  // Both loops start at 0; the peer fails at 4.0 s. Its ticks before 4.0 s: 0, 0.3, ..., 3.9 s
  // (14 increments). The observer's checks: 0 s reads 1; 3 s reads 11 (ticks 0..3.0 s); 6 s reads
  // 14, still new; 9 s reads 14 again: broken at 9 s, 5 s after the failure.
  EXPECT_EQ(watchdog_detection_time(kPymultiworld, ms(0), ms(0), ms(4000), false), ms(9000));
}

TEST(WorldWatchdog, AFailureJustBeforeACheckIsSeenOneCheckLater) {
  // Failure at 2.95 s: ticks 0..2.7 s, 10 increments. Check 0 s reads 1, 3 s reads 10 (new),
  // 6 s reads 10: broken at 6 s (3.05 s after the failure).
  EXPECT_EQ(watchdog_detection_time(kPymultiworld, ms(0), ms(0), ms(2950), false), ms(6000));
  // Failure at 3.05 s: the peer's tick at 3.0 s happened (11 increments), seen by the check at
  // 3.0 s (same instant: the increment lands first); 6 s reads 11 again: broken at 6 s (2.95 s).
  EXPECT_EQ(watchdog_detection_time(kPymultiworld, ms(0), ms(0), ms(3050), false), ms(6000));
}

TEST(WorldWatchdog, ThePhasesOfTheTwoLoopsCount) {
  // Observer starts at 0.1 s: checks at 0.1, 3.1, 6.1, 9.1 s. Peer (from 0) fails at 4.0 s:
  // 3.1 s reads 11 (ticks 0..3.0), 6.1 s reads 14, 9.1 s reads 14: broken at 9.1 s.
  EXPECT_EQ(watchdog_detection_time(kPymultiworld, ms(100), ms(0), ms(4000), false), ms(9100));
}

TEST(WorldWatchdog, AFailedStoreHostIsSeenAtTheNextTick) {
  // The store lived on the failed peer: the observer's next store.add fails. Ticks at 3.9 and
  // 4.2 s: a failure at 4.0 s is seen at 4.2 s; one exactly at a tick (4.2 s) at that tick.
  EXPECT_EQ(watchdog_detection_time(kPymultiworld, ms(0), ms(0), ms(4000), true), ms(4200));
  EXPECT_EQ(watchdog_detection_time(kPymultiworld, ms(0), ms(0), ms(4200), true), ms(4200));
}

TEST(WorldWatchdog, LateFailuresCostNoLoopFromTimeZero) {
  // A failure after a long run: 10^6 s. Checks every 3 s; 10^6 / 3 = 333333.33, so the check
  // at 999,999 s reads the peer's ticks up to then, the one at 1,000,002 s reads all of them
  // (the last tick before 10^6 s), and the one at 1,000,005 s reads the same: broken there.
  EXPECT_EQ(watchdog_detection_time(kPymultiworld, ms(0), ms(0), Time::s(1'000'000), false),
            Time::s(1'000'005));
}

TEST(WorldWatchdog, DetectionAlwaysFollowsTheFailureWithinTwoChecks) {
  // Property over failure times and phases: 0 < detection - failure <= 2 checks (6 s); with the
  // store on the peer, within one tick.
  for (std::int64_t f = 1; f < 20'000; f += 37)
    for (std::int64_t phase : {0, 50, 150, 299}) {
      const Time t = watchdog_detection_time(kPymultiworld, ms(phase), ms(0), ms(f), false);
      EXPECT_GT(t, ms(f));
      EXPECT_LE(t - ms(f), ms(6000)) << f << " " << phase;
      const Time s = watchdog_detection_time(kPymultiworld, ms(phase), ms(0), ms(f), true);
      EXPECT_GE(s, ms(f));
      EXPECT_LT(s - ms(f), ms(300));
    }
}

}  // namespace
}  // namespace mlsim::collectives
