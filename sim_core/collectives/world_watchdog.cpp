#include "sim_core/collectives/world_watchdog.hpp"

#include <algorithm>
#include <cstdint>

#include "sim_core/base/error.hpp"

namespace mlsim::collectives {
namespace {

// The peer's increments visible at time t: its ticks at times <= t and before `failure`.
std::int64_t increments_seen(Time t, Time peer_start, Time failure, std::int64_t period) {
  const Time last = std::min(t, failure - Time::ns(1));
  if (last < peer_start) return 0;
  return (last - peer_start).count_ns() / period + 1;
}

}  // namespace

Time watchdog_detection_time(const WatchdogConstants& c, Time observer_start, Time peer_start,
                             Time failure, bool store_on_peer) {
  MLSIM_CHECK(c.update_period > Time::zero() && c.updates_per_check >= 1,
              "watchdog constants must be positive");
  const std::int64_t period = c.update_period.count_ns();
  if (store_on_peer) {  // the first tick at or after the failure
    if (failure <= observer_start) return observer_start;
    const std::int64_t k = ((failure - observer_start).count_ns() + period - 1) / period;
    return observer_start + c.update_period * k;
  }
  const Time check_period = c.update_period * c.updates_per_check;
  const std::int64_t cp = check_period.count_ns();
  // Checks before the one preceding the failure cannot detect it; start one check before it.
  std::int64_t m = 0;
  if (failure > observer_start)
    m = std::max<std::int64_t>(0, (failure - observer_start).count_ns() / cp - 1);
  std::int64_t last = m == 0 ? 0
                             : increments_seen(observer_start + check_period * (m - 1), peer_start,
                                               failure, period);
  // The counter stops growing once checks pass the failure: this ends within three checks.
  for (;; ++m) {
    const Time check = observer_start + check_period * m;
    const std::int64_t seen = increments_seen(check, peer_start, failure, period);
    if (seen == last) return check;
    last = seen;
  }
}

}  // namespace mlsim::collectives
