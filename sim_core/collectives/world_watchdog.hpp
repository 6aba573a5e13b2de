#pragma once
// When MultiWorld's watchdog finds a world broken after one of its workers failed
// (cisco-open/pymultiworld v0.2.3, multiworld/watchdog.py: WatchDog._monitor_thread and
// _do_check; read to model, not copied). A world is one process group with its own TCPStore,
// hosted by the world's rank 0 (multiworld/manager.py, WorldManager.initialize_world).
//
// Every worker runs one monitor loop for all its worlds. Tick k of a worker (k = 0, 1, ...) comes
// `update_period` after tick k-1 (the loop sleeps UPDATE_PERIOD = 0.3 s; [assumed] its body takes
// no time beside that): at each tick the worker adds 1 to its own counter in every world's store,
// and at ticks that are multiples of `updates_per_check` (UPDATES_PER_CHECK = 10, every 3 s) it
// reads every peer's counter and declares the world broken if a counter equals the value it read
// at the previous check (the first check compares with 0). A store operation that fails (the
// store's host is gone) declares the world broken at once, at that tick.
//
// So a worker whose peer fails is told 2.7 to 6 s later (at most two checks), not "within about
// 3 s": the first check after the failure still sees the peer's increments since the previous
// check, unless the peer failed before it ticked once after that check. When the
// failed worker hosted the store, the next tick (at most 0.3 s) tells. Not modelled [assumed]: NCCL
// noticing the dead peer first through an operation in flight (the communicator then marks the
// world broken; its timing depends on the transport), and the notification's wait
// (NOTICE_WAIT_TIMEOUT = 5 s bounds how long the watchdog waits for the event loop to take the
// notice, which takes no time when the loop is not blocked).
#include "sim_core/base/time.hpp"

namespace mlsim::collectives {

struct WatchdogConstants {
  Time update_period = Time::ms(300);  // UPDATE_PERIOD
  int updates_per_check = 10;          // UPDATES_PER_CHECK
};

// A worker whose monitor loop started at `observer_start` (its tick 0) and a peer in one of its
// worlds whose loop started at `peer_start` and that fails at `failure` (its ticks at or after
// `failure` do not happen; a counter read at time t sees the peer's increments at times <= t).
// Returns the time at which the observer declares the world broken. `store_on_peer`: the world's
// store lived on the failed peer, so the observer's next tick at or after `failure` fails.
// Requires update_period > 0 and updates_per_check >= 1 (MLSIM_CHECK).
Time watchdog_detection_time(const WatchdogConstants& c, Time observer_start, Time peer_start,
                             Time failure, bool store_on_peer);

}  // namespace mlsim::collectives
