// The routers of an elastic deployment's stage boundaries (boundary_router.hpp), by hand: two
// workers of stage 1 with known bound engines and outstanding tokens.
#include "models/serving/boundary_router.hpp"

#include <gtest/gtest.h>

using namespace mlsim::serving;

namespace {

// Stage 0 (the front, no router) and stage 1 with two workers, both live.
BoundaryRouters two_workers(StageRouting policy) {
  BoundaryRouters r(policy, {1, 2});
  r.set_live(1, 0, true);
  r.set_live(1, 1, true);
  return r;
}

}  // namespace

// Worker 0: two engines with 300 and 100 tokens to process (400); worker 1: two engines, 150 and
// 0 (150). least_work sends the next engine to worker 1; fewest_engines (2 against 2) to the
// first.
TEST(BoundaryRouter, TheNextEngineGoesToTheLessLoadedWorker) {
  for (const auto policy : {StageRouting::kLeastWork, StageRouting::kFewestEngines}) {
    BoundaryRouters r = two_workers(policy);
    r.engine_moved(1, -1, 0, 300);
    r.engine_moved(1, -1, 0, 100);
    r.engine_moved(1, -1, 1, 150);
    r.engine_moved(1, -1, 1, 0);
    EXPECT_EQ(r.work(1, 0), 400);
    EXPECT_EQ(r.work(1, 1), 150);
    EXPECT_EQ(r.pick(1), policy == StageRouting::kLeastWork ? 1 : 0);
  }
}

// A sequence by hand (least_work). Start: worker 0 at 400 tokens, worker 1 at 150.
//  - worker 1's idle engine takes a 200-token request: 350 < 400, still worker 1;
//  - 100 more there: 450 > 400, now worker 0;
//  - worker 0's 300-token engine finishes: 100 < 450, worker 0;
//  - worker 0 fails (not live): worker 1 whatever its load; both down: none.
TEST(BoundaryRouter, LeastWorkFollowsTheLoadAsItChanges) {
  BoundaryRouters r = two_workers(StageRouting::kLeastWork);
  r.engine_moved(1, -1, 0, 300);
  r.engine_moved(1, -1, 0, 100);
  r.engine_moved(1, -1, 1, 150);
  r.engine_moved(1, -1, 1, 0);
  r.work_changed(1, 1, 200);
  EXPECT_EQ(r.pick(1), 1);
  r.work_changed(1, 1, 100);
  EXPECT_EQ(r.work(1, 1), 450);
  EXPECT_EQ(r.pick(1), 0);
  r.work_changed(1, 0, -300);
  EXPECT_EQ(r.pick(1), 0);
  r.set_live(1, 0, false);
  EXPECT_EQ(r.pick(1), 1);
  r.set_live(1, 1, false);
  EXPECT_EQ(r.pick(1), -1);
  // Back up: its counters were kept while it was out.
  r.set_live(1, 0, true);
  r.set_live(1, 1, true);
  EXPECT_EQ(r.pick(1), 0);  // 100 < 450
}

// Four engines of 500, 300, 300 and 100 tokens bound one after another to two empty workers.
// least_work: 0 (tie, the first), 1 (0 < 500), 1 (300 < 500), 0 (500 < 600): 600 and 600.
// fewest_engines: 0, 1, 0, 1 (counts only): 500 + 300 = 800 and 300 + 100 = 400.
TEST(BoundaryRouter, ASequenceOfEnginesBalancesWorkOrCounts) {
  const std::int64_t work[] = {500, 300, 300, 100};
  for (const auto policy : {StageRouting::kLeastWork, StageRouting::kFewestEngines}) {
    BoundaryRouters r = two_workers(policy);
    std::vector<int> chosen;
    for (const std::int64_t w : work) {
      const int to = r.pick(1);
      chosen.push_back(to);
      r.engine_moved(1, -1, to, 0);  // bound idle, then its request arrives
      r.work_changed(1, to, w);
    }
    if (policy == StageRouting::kLeastWork) {
      EXPECT_EQ(chosen, (std::vector<int>{0, 1, 1, 0}));
      EXPECT_EQ(r.work(1, 0), 600);
      EXPECT_EQ(r.work(1, 1), 600);
    } else {
      EXPECT_EQ(chosen, (std::vector<int>{0, 1, 0, 1}));
      EXPECT_EQ(r.work(1, 0), 800);
      EXPECT_EQ(r.work(1, 1), 400);
    }
  }
}

// An idle engine being re-bound does not count itself: on a 2-2 split its own worker is 1-2
// without it, so it stays; it moves only when another worker is strictly better.
TEST(BoundaryRouter, AnIdleEngineStaysUnlessAnotherWorkerIsBetter) {
  BoundaryRouters counts = two_workers(StageRouting::kFewestEngines);
  for (int w : {0, 0, 1, 1}) counts.engine_moved(1, -1, w, 0);
  EXPECT_EQ(counts.pick(1, 0), 0);
  EXPECT_EQ(counts.pick(1, 1), 1);
  counts.engine_moved(1, -1, 0, 0);  // 3 - 2
  EXPECT_EQ(counts.pick(1, 0), 0);   // 2 - 2 without it: a tie, it stays
  counts.engine_moved(1, -1, 0, 0);  // 4 - 2
  EXPECT_EQ(counts.pick(1, 0), 1);   // 3 - 2 without it: worker 1 is better
  EXPECT_EQ(counts.pick(1, 1), 1);

  BoundaryRouters work = two_workers(StageRouting::kLeastWork);
  work.engine_moved(1, -1, 0, 0);    // the idle engine
  work.engine_moved(1, -1, 0, 100);  // worker 0: 100 tokens, two engines
  work.engine_moved(1, -1, 1, 100);  // worker 1: 100 tokens, one engine
  // Without the idle engine both hold 100 tokens on one engine: it stays on worker 0.
  EXPECT_EQ(work.pick(1, 0), 0);
  work.work_changed(1, 0, 1);
  EXPECT_EQ(work.pick(1, 0), 1);  // 101 > 100
}

// round_robin: the next live worker in turn whatever the load, skipping one that is not live (as
// pymultiworld's leader tries the next world when a send raises). Three workers; worker 1 fails
// after two picks and comes back.
TEST(BoundaryRouter, RoundRobinTakesTheLiveWorkersInTurn) {
  BoundaryRouters r(StageRouting::kRoundRobin, {1, 3});
  for (int i = 0; i < 3; ++i) r.set_live(1, i, true);
  r.engine_moved(1, -1, 0, 1000);  // load plays no part
  std::vector<int> chosen;
  chosen.push_back(r.pick(1));
  chosen.push_back(r.pick(1, 0));  // nor does the engine's current worker
  r.set_live(1, 1, false);
  chosen.push_back(r.pick(1));
  chosen.push_back(r.pick(1));
  r.set_live(1, 1, true);
  chosen.push_back(r.pick(1));
  chosen.push_back(r.pick(1));
  EXPECT_EQ(chosen, (std::vector<int>{0, 1, 2, 0, 1, 2}));
  for (int i = 0; i < 3; ++i) r.set_live(1, i, false);
  EXPECT_EQ(r.pick(1), -1);
}

// Where a join's rebalancing under `least_work` takes engines from and sends them (three workers
// of stage 1, the third not live): worker 0 holds 500 + 100 tokens on two engines, worker 1 holds
// 600 on one, worker 2 (not live) 0. The least work among the live: 600 against 600, the fewer
// engines wins: worker 1. The most: 600 against 600, the more engines: worker 0. Worker 2 is never
// chosen while not live, though it has no work; live, it is the least (0), and the most stays 0.
TEST(BoundaryRouter, RebalancingFindsTheLeastAndTheMostLoadedLiveWorkers) {
  BoundaryRouters r(StageRouting::kRoundRobin, {1, 3});
  r.set_live(1, 0, true);
  r.set_live(1, 1, true);
  r.engine_moved(1, -1, 0, 500);
  r.engine_moved(1, -1, 0, 100);
  r.engine_moved(1, -1, 1, 600);
  EXPECT_EQ(r.least_work(1), 1);
  EXPECT_EQ(r.most_work(1), 0);
  r.set_live(1, 2, true);
  EXPECT_EQ(r.least_work(1), 2);
  EXPECT_EQ(r.most_work(1), 0);
  r.work_changed(1, 1, 1);  // 601: worker 1 is now the most loaded
  EXPECT_EQ(r.most_work(1), 1);
  r.set_live(1, 0, false);
  r.set_live(1, 1, false);
  r.set_live(1, 2, false);
  EXPECT_EQ(r.least_work(1), -1);
  EXPECT_EQ(r.most_work(1), -1);
}
