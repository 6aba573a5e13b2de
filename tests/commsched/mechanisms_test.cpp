// The commsched mechanisms against cases computed by hand: FIFO and ByteScheduler iteration
// times, the credit window and priority order in a job, the ring all-reduce, and switching (the
// schedulers on their own: tests/training/schedulers_test.cpp).
// Links carry 4e6 bytes/s (one million parameters per second), no latency, no message overhead.
#include <gtest/gtest.h>

#include <cmath>

#include "models/commsched/bayesian_tuner.hpp"
#include "models/commsched/tuners.hpp"
#include "tests/commsched/test_support.hpp"

using namespace mlsim;
using namespace mlsim::commsched;
using namespace mlsim::commsched::testing;

namespace {

constexpr std::int64_t M = 1'000'000;

// Layer 0: forward 3 s, backward 1 s, 1M parameters; layer 1: 1 s, 1 s, 2M parameters.
std::vector<Layer> two_layers() {
  return {layer(3, 1, M), layer(1, 1, 2 * M)};
}

std::vector<std::pair<std::uint32_t, std::uint32_t>> start_order(const TrainingJob& job,
                                                                 std::size_t iteration) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> out;
  for (const ChunkEvent& e : job.trace())
    if (e.kind == ChunkEvent::Kind::kStart && e.iteration == iteration)
      out.emplace_back(e.chunk.layer, e.chunk.index);
  return out;
}

JobSpec push_pull(JobSpec s) {
  s.credit_scope = CreditScope::kPushPull;
  return s;
}

}  // namespace

// FIFO with no engine limit (fifo_engines 0), 1 worker + 1 PS, whole tensors all at once,
// links shared max-min:
//   iteration 0: F0 [0,3] F1 [3,4] B1 [4,5] B0 [5,6]. Push 1 (2M) alone [5,6] sends 1M; push 0
//   (1M) joins at 6, both at half rate, both end at 8. Pulls from 8 share: pull 0 ends at 10,
//   pull 1 has 1M left and ends alone at 11.
//   iteration 1: F0 [10,13] F1 [13,14] B1 [14,15] B0 [15,16]; the same pattern ends at 21.
TEST(HandComputed, FifoParameterServer) {
  Bench b(2);
  JobSpec s = b.spec(Mode::kParameterServer, SchedulerKind::kFifo, two_layers(), 1, 1, 2);
  s.fifo_engines = 0;
  TrainingJob& job = b.run(std::move(s), {});
  ASSERT_TRUE(job.finished());
  EXPECT_EQ(seconds(job.iteration_starts()), (std::vector<double>{0, 10}));
  EXPECT_DOUBLE_EQ(job.finish_time().seconds(), 21);
  EXPECT_EQ(start_order(job, 0),
            (std::vector<std::pair<std::uint32_t, std::uint32_t>>{{1, 0}, {0, 0}}));  // ready order
}

// FIFO vs ByteScheduler on two tensors in PS mode, 1 worker + 1 server, flow backend. Layer 0:
// forward 3 s, backward 0.5 s, 1M parameters; layer 1: 1 s, 1 s, 2M. Iteration 0: F0 [0,3]
// F1 [3,4] B1 [4,5] B0 [5,5.5].
//   FIFO, one engine (the framework's queue, the default): tensor 1 pushed [5,7], holding the
//   engine until the server has it; tensor 0 (ready at 5.5) waits and is pushed [7,8] while
//   tensor 1 is pulled from 7; from 8 both pulls share the downlink, 1M left each: both end at
//   10. Iteration 1 starts at 10 and ends at 20.
//   FIFO, no engine limit (every ready tensor at once): push 1 alone [5,5.5] sends 0.5M, then
//   shares with push 0 (1M at half rate, ends 7.5); push 1 ends alone at 8. Pull 0 alone
//   [7.5,8] (0.5M), then shares with pull 1: pull 0 ends at 9, pull 1 (2M) at 10.5. Iteration 1
//   starts at 9 (layer 0 back), F1 at 12 finds layer 1 back, and the job ends at 10.5 + 9 =
//   19.5: here the engine costs FIFO half a second (layer 0 waits behind layer 1's push).
//   ByteScheduler, partition 1M, credit 1M: (1,0) [5,6], (0,0) overtakes (1,1): pushed [6,7],
//   (1,1) [7,8]; layer 0 back at 8, layer 1 at 9; iteration 1 starts at 8 and ends at 17
//   (HandComputed.ByteSchedulerCreditForThePushOnly).
TEST(HandComputed, FifoEnginesAgainstByteSchedulerOnTwoTensors) {
  const std::vector<Layer> layers{layer(3, 0.5, M), layer(1, 1, 2 * M)};
  struct Case {
    SchedulerKind kind;
    int engines;
    double second_start, finish;
  };
  for (const Case& c :
       {Case{SchedulerKind::kFifo, 1, 10, 20}, Case{SchedulerKind::kFifo, 0, 9, 19.5},
        Case{SchedulerKind::kByteScheduler, 1, 8, 17}}) {
    Bench b(2);
    JobSpec s = b.spec(Mode::kParameterServer, c.kind, layers, 1, 1, 2);
    s.fifo_engines = c.engines;
    TrainingJob& job = b.run(std::move(s), {M, M});
    ASSERT_TRUE(job.finished());
    EXPECT_EQ(seconds(job.iteration_starts()), (std::vector<double>{0, c.second_start}));
    EXPECT_DOUBLE_EQ(job.finish_time().seconds(), c.finish);
    if (c.kind == SchedulerKind::kFifo) {  // ready order, whole tensors
      EXPECT_EQ(start_order(job, 0),
                (std::vector<std::pair<std::uint32_t, std::uint32_t>>{{1, 0}, {0, 0}}));
      for (const ChunkEvent& e : job.trace()) {
        if (e.kind == ChunkEvent::Kind::kStart && e.iteration == 0 && e.chunk.layer == 0) {
          EXPECT_DOUBLE_EQ(e.at.seconds(), c.engines == 1 ? 7 : 5.5);  // waits for the engine
        }
      }
    }
  }
}

// ByteScheduler's per-credit delay (credit_delay 0.25 s) on the same job: (1,0) pushed [5,6],
// its credit back at 6.25; (0,0) pushed [6.25,7.25], credit back at 7.5; (1,1) pushed
// [7.5,8.5] and pulled [8.5,9.5]; (0,0) pulled [7.25,8.25]. Iteration 1 starts when layer 0 is
// back, at 8.25, and repeats the pattern: the job ends at 9.5 + 8.25 = 17.75 (17 without delay).
TEST(HandComputed, CreditDelayHoldsTheNextChunk) {
  Bench b(2);
  JobSpec s = b.spec(Mode::kParameterServer, SchedulerKind::kByteScheduler,
                     {layer(3, 0.5, M), layer(1, 1, 2 * M)}, 1, 1, 2);
  s.credit_delay = Time::ms(250);
  TrainingJob& job = b.run(std::move(s), {M, M});
  ASSERT_TRUE(job.finished());
  EXPECT_EQ(seconds(job.iteration_starts()), (std::vector<double>{0, 8.25}));
  EXPECT_DOUBLE_EQ(job.finish_time().seconds(), 17.75);
}

// The same FIFO job on the analytic backend, where transfers do not share links: push 1 [5,7],
// push 0 [6,7]; pull 0 [7,8], pull 1 [7,9]. Iteration 1: F0 [8,11] F1 [11,12] B1 [12,13] B0
// [13,14]; push 1 [13,15], push 0 [14,15], pull 1 ends at 17.
TEST(HandComputed, FifoParameterServerAnalytic) {
  Bench b(2, Sharing::kNone);
  JobSpec s = b.spec(Mode::kParameterServer, SchedulerKind::kFifo, two_layers(), 1, 1, 2);
  s.fifo_engines = 0;
  TrainingJob& job = b.run(std::move(s), {});
  EXPECT_EQ(seconds(job.iteration_starts()), (std::vector<double>{0, 8}));
  EXPECT_DOUBLE_EQ(job.finish_time().seconds(), 17);
}

// ByteScheduler, partition 1M, credit 1M (one chunk at a time) held for push and pull:
//   iteration 0: chunks (1,0) (1,1) ready at 5; (1,0) push [5,6] pull [6,7]. (0,0) is ready at 6
//   and overtakes the queued (1,1) at 7, the end of (1,0): [7,9]; (1,1) [9,11].
//   iteration 1: F0 [9,12] F1 waits for layer 1: [12,13] B1 [13,14] B0 [14,15]; (1,0) [14,16],
//   (0,0) [16,18], (1,1) [18,20]: the job ends at 20, a second earlier than FIFO.
TEST(HandComputed, ByteSchedulerParameterServer) {
  Bench b(2);
  TrainingJob& job = b.run(push_pull(b.spec(Mode::kParameterServer, SchedulerKind::kByteScheduler,
                                            two_layers(), 1, 1, 2)),
                           {M, M});
  ASSERT_TRUE(job.finished());
  EXPECT_EQ(seconds(job.iteration_starts()), (std::vector<double>{0, 9}));
  EXPECT_DOUBLE_EQ(job.finish_time().seconds(), 20);
  EXPECT_EQ(job.iteration_seconds(), (std::vector<double>{9, 11}));
}

// The same job with the credit covering the push only (the default): a chunk's pull overlaps the
// next chunk's push. Layer 0's backward is 0.5 s here, so no two events tie.
//   iteration 0: B1 [4,5] B0 [5,5.5]. (1,0) push [5,6]; (0,0) ready at 5.5 waits for the credit;
//   at 6 it goes first: push [6,7] while (1,0) is pulled [6,7]; (1,1) push [7,8] with (0,0)'s
//   pull [7,8]; (1,1) pull [8,9]. Layer 0 is back at 8, layer 1 at 9.
//   iteration 1: F0 [8,11] F1 [11,12] B1 [12,13] B0 [13,13.5]; the same pattern ends at 17.
TEST(HandComputed, ByteSchedulerCreditForThePushOnly) {
  Bench b(2);
  TrainingJob& job = b.run(b.spec(Mode::kParameterServer, SchedulerKind::kByteScheduler,
                                  {layer(3, 0.5, M), layer(1, 1, 2 * M)}, 1, 1, 2),
                           {M, M});
  EXPECT_EQ(seconds(job.iteration_starts()), (std::vector<double>{0, 8}));
  EXPECT_DOUBLE_EQ(job.finish_time().seconds(), 17);
  EXPECT_EQ(start_order(job, 1),
            (std::vector<std::pair<std::uint32_t, std::uint32_t>>{{1, 0}, {0, 0}, {1, 1}}));
}

TEST(HandComputed, PreemptionOnlyAtChunkBoundaries) {
  Bench b(2);
  TrainingJob& job = b.run(push_pull(b.spec(Mode::kParameterServer, SchedulerKind::kByteScheduler,
                                            two_layers(), 1, 1, 1)),
                           {M, M});
  EXPECT_EQ(start_order(job, 0),
            (std::vector<std::pair<std::uint32_t, std::uint32_t>>{{1, 0}, {0, 0}, {1, 1}}));
  // (0,0) became ready at 6 but started at 7, when the in-flight (1,0) completed.
  for (const ChunkEvent& e : job.trace()) {
    if (e.kind == ChunkEvent::Kind::kStart && e.chunk.layer == 0) {
      EXPECT_DOUBLE_EQ(e.at.seconds(), 7);
    }
  }
}

TEST(HandComputed, CreditWindowLimitsChunksInFlight) {
  // One 4M layer in 1M chunks under a 2M window held for push and pull: two chunks at a time,
  // pushed together [1,3] at half rate each, pulled together [3,5]; then the other two [5,9].
  Bench b(2);
  TrainingJob& job = b.run(push_pull(b.spec(Mode::kParameterServer, SchedulerKind::kByteScheduler,
                                            {layer(0.5, 0.5, 4 * M)}, 1, 1, 1)),
                           {M, 2 * M});
  int in_flight = 0, most = 0;
  for (const ChunkEvent& e : job.trace()) {
    in_flight += e.kind == ChunkEvent::Kind::kStart ? 1 : -1;
    most = std::max(most, in_flight);
  }
  EXPECT_EQ(most, 2);
  EXPECT_DOUBLE_EQ(job.finish_time().seconds(), 9);
}

TEST(HandComputed, OneChunkPartitionWithoutCreditLimitIsFifo) {
  // Partition and credit larger than the model: every tensor leaves whole as soon as it is ready,
  // as under FIFO with no engine limit, so the timing is the same to the nanosecond.
  const std::vector<Layer> layers = {layer(0.2, 0.3, 3 * M), layer(0.1, 0.4, M / 2),
                                     layer(0.3, 0.2, 5 * M), layer(0.2, 0.2, 0)};
  Bench fifo(5), bs(5);
  JobSpec all_at_once = fifo.spec(Mode::kParameterServer, SchedulerKind::kFifo, layers, 3, 2, 3);
  all_at_once.fifo_engines = 0;
  TrainingJob& a = fifo.run(std::move(all_at_once), {});
  TrainingJob& c =
      bs.run(bs.spec(Mode::kParameterServer, SchedulerKind::kByteScheduler, layers, 3, 2, 3),
             {1'000 * M, 1'000 * M});
  EXPECT_EQ(a.iteration_starts(), c.iteration_starts());
  EXPECT_EQ(a.finish_time(), c.finish_time());
}

TEST(HandComputed, RingAllReduce) {
  // Two workers, one 2M layer (8 MB): 2 (N - 1) = 2 steps of 4 MB, one second each, both
  // directions at once. F [0,1] B [1,2] all-reduce [2,4]; F [4,5] B [5,6] all-reduce [6,8].
  Bench b(2);
  TrainingJob& job =
      b.run(b.spec(Mode::kAllReduce, SchedulerKind::kByteScheduler, {layer(1, 1, 2 * M)}, 2, 0, 2),
            {8 * M, 16 * M});
  EXPECT_EQ(seconds(job.iteration_starts()), (std::vector<double>{0, 4}));
  EXPECT_DOUBLE_EQ(job.finish_time().seconds(), 8);
  EXPECT_EQ(job.messages(), 2u * 2u * 2u);  // 2 iterations x 2 steps x 2 senders
}

TEST(HandComputed, WorkersOnDifferentGpusRunTheirOwnLayerTimes) {
  // One 2M layer, two workers on different GPUs: worker 0 takes 1 s forward and 1 s backward,
  // worker 1 (a GPU half as fast) 2 s and 2 s. Worker 1: F [0,2] B [2,4]; the layer is ready when
  // both produced it (4), its all-reduce takes 2 steps of 4 MB, 1 s each [4,6]; both workers'
  // next forward waits for it: iteration 1 starts at 6, worker 1 F [6,8] B [8,10], all-reduce
  // [10,12]. (With both workers at worker 0's times it is 0, 4 and 8: the same test above.)
  Bench b(2);
  JobSpec s =
      b.spec(Mode::kAllReduce, SchedulerKind::kByteScheduler, {layer(1, 1, 2 * M)}, 2, 0, 2);
  s.worker_times = {{{Time::s(1), Time::s(1)}}, {{Time::s(2), Time::s(2)}}};
  TrainingJob& job = b.run(std::move(s), {8 * M, 16 * M});
  EXPECT_EQ(seconds(job.iteration_starts()), (std::vector<double>{0, 6}));
  EXPECT_DOUBLE_EQ(job.finish_time().seconds(), 12);
}

TEST(HandComputed, FifoAllReduceRunsOneTensorAtATime) {
  // Two 1M layers, two workers: each all-reduce takes 1 s (2 steps of 2 MB). F0 [0,1] F1 [1,2]
  // B1 [2,3] B0 [3,3.5]. FIFO all-reduces layer 1 [3,4], then layer 0 [4,5]: layer 0 waits for
  // layer 1 instead of sharing the links with it from 3.5.
  Bench b(2);
  TrainingJob& job = b.run(
      b.spec(Mode::kAllReduce, SchedulerKind::kFifo, {layer(1, 0.5, M), layer(1, 1, M)}, 2, 0, 1),
      {});
  EXPECT_DOUBLE_EQ(job.finish_time().seconds(), 5);
  for (const ChunkEvent& e : job.trace()) {
    if (e.kind == ChunkEvent::Kind::kStart) {
      EXPECT_DOUBLE_EQ(e.at.seconds(), e.chunk.layer == 1 ? 3 : 4);
    }
  }
}

namespace {

struct SwitchAt final : Controller {
  std::size_t at;
  Decision decision;
  SwitchAt(std::size_t iteration, Decision d) : at(iteration), decision(d) {}
  std::optional<Decision> at_iteration(std::size_t iteration, TrainingJob&) override {
    if (iteration == at) return decision;
    return std::nullopt;
  }
};

}  // namespace

TEST(HandComputed, PartitionChangeInPsModeDrainsAndRestarts) {
  // One 1M layer, F 1 s, B 1 s. Iteration 0: F [0,1] B [1,2] push [2,3] pull [3,4]. At 2 the
  // controller halves the partition: the job drains (until 4), pauses 5 s, resumes at 9:
  // F [9,10] B [10,11], two 0.5M chunks pushed together [11,12] and pulled together [12,13].
  Bench b(2);
  SwitchAt controller(1, Decision{{M / 2, 4 * M}, Time::s(5)});
  TrainingJob& job = b.run(
      b.spec(Mode::kParameterServer, SchedulerKind::kByteScheduler, {layer(1, 1, M)}, 1, 1, 2),
      {M, 4 * M}, &controller);
  EXPECT_EQ(seconds(job.iteration_starts()), (std::vector<double>{0, 9}));
  EXPECT_DOUBLE_EQ(job.finish_time().seconds(), 13);
  EXPECT_DOUBLE_EQ(job.paused().seconds(), 7);  // drain 2 s + restart 5 s
  ASSERT_EQ(job.changes().size(), 1u);
  EXPECT_TRUE(job.changes()[0].restart);
  EXPECT_EQ(job.config().partition, M / 2);
}

TEST(HandComputed, CreditChangeAppliesAtOnce) {
  // The same job; only the credit changes: no drain, no pause (the static run's times).
  Bench b(2);
  SwitchAt controller(1, Decision{{M, 8 * M}, Time::s(5)});
  TrainingJob& job = b.run(
      b.spec(Mode::kParameterServer, SchedulerKind::kByteScheduler, {layer(1, 1, M)}, 1, 1, 2),
      {M, 4 * M}, &controller);
  EXPECT_EQ(seconds(job.iteration_starts()), (std::vector<double>{0, 4}));
  EXPECT_DOUBLE_EQ(job.finish_time().seconds(), 8);
  EXPECT_EQ(job.paused(), Time::zero());
  EXPECT_EQ(job.config().credit, 8 * M);
}

TEST(HandComputed, MessageOverheadDelaysEachMessage) {
  // 1 worker + 1 PS, one 1M layer, one chunk: push and pull each wait 0.25 s first.
  // F [0,1] B [1,2] push [2.25,3.25] pull [3.5,4.5].
  Bench b(2);
  JobSpec s =
      b.spec(Mode::kParameterServer, SchedulerKind::kByteScheduler, {layer(1, 1, M)}, 1, 1, 1);
  s.message_overhead = Time::ms(250);
  TrainingJob& job = b.run(std::move(s), {M, 4 * M});
  EXPECT_DOUBLE_EQ(job.finish_time().seconds(), 4.5);
}

TEST(HandComputed, StragglerSlowsItsOpsInItsWindow) {
  // Worker 1 is 3x slower during [0, 1.5): its forward does 0.5 s of its 1 s of work by 1.5,
  // the rest at speed 1 [1.5,2]; its backward [2,3]. Worker 0 pushes [2,3], worker 1 [3,4]; the
  // server answers when both are in.
  Bench b(3);
  JobSpec s =
      b.spec(Mode::kParameterServer, SchedulerKind::kByteScheduler, {layer(1, 1, M)}, 2, 1, 1);
  b.straggle(1, 3.0, Time::zero(), Time::ms(1500));
  TrainingJob& job = b.run(std::move(s), {M, 4 * M});
  // The server's downlink receives worker 0's push alone [2,3], worker 1's [3,4]; its uplink then
  // sends both pulls at once, each at half rate: [4,6].
  EXPECT_DOUBLE_EQ(job.finish_time().seconds(), 6);
}

TEST(HandComputed, CreditHeldThroughThePullDeadlocksWithAStraggler) {
  // Two workers, one server, chunks of 1M, credit 1M; worker 1 computes 10x slower. Worker 0
  // pushes (1,0) at 0.3 and waits for worker 1's, pushed at 3; both pulls end at 6. Then worker 0
  // takes its top chunk, (0,0), while worker 1, whose layer 0 is still computing, takes (1,1):
  // held through the pull, each window waits for a push the other worker cannot make.
  for (CreditScope scope : {CreditScope::kPush, CreditScope::kPushPull}) {
    Bench b(3);
    JobSpec s = b.spec(Mode::kParameterServer, SchedulerKind::kByteScheduler,
                       {layer(0.1, 1.0, M), layer(0.1, 0.1, 2 * M)}, 2, 1, 1);
    s.credit_scope = scope;
    b.straggle(1, 10.0, Time::zero());
    if (scope == CreditScope::kPushPull) {
      // The grid search ranks a stalling configuration last: a 3M window holds every chunk.
      const auto grid = run_grid(s, b.topology, Sharing::kMaxMin, b.events, Grid{{M}, {M, 3 * M}});
      EXPECT_TRUE(std::isinf(grid[0].time_s));
      EXPECT_FALSE(std::isinf(grid[1].time_s));
      EXPECT_EQ(best_of(grid), (SchedulerConfig{M, 3 * M}));
    }
    TrainingJob& job = b.run(std::move(s), {M, M});
    EXPECT_EQ(job.finished(), scope == CreditScope::kPush);
  }
}

TEST(Tuners, BayesianTunerDropsTheStartTriesItsPointsThenKeepsTheBest) {
  // PS mode: only the credit is searched (the partition stays 1M), in [1M, 4M]. Trials of 3
  // iterations: the start (1M, not registered: search.py drops the first point), 2 uniform
  // points, 1 suggestion by expected improvement, then the best registered point for the rest of
  // the run (5 trials of 3 iterations = 15 of the 20).
  Bench b(2);
  BayesianTunerParams params;
  params.trial_iterations = 3;
  params.random_points = 2;
  params.suggested_points = 1;
  params.credit_range = {1, 4};
  BayesianTuner tuner(params, {M, M}, RandomStream(1, "bo"));
  TrainingJob& job = b.run(b.spec(Mode::kParameterServer, SchedulerKind::kByteScheduler,
                                  {layer(0.5, 0.5, 4 * M)}, 1, 1, 20),
                           {M, M}, &tuner);
  ASSERT_TRUE(job.finished());
  const auto& trials = tuner.trials();
  ASSERT_EQ(trials.size(), 4u);
  EXPECT_EQ(trials[0].config, (SchedulerConfig{M, M}));
  EXPECT_FALSE(trials[0].registered);
  const BayesianTrial* best = nullptr;
  for (std::size_t i = 1; i < trials.size(); ++i) {
    EXPECT_TRUE(trials[i].registered);
    EXPECT_EQ(trials[i].suggested, i == 3);
    EXPECT_EQ(trials[i].config.partition, M);
    EXPECT_GE(trials[i].config.credit, M);
    EXPECT_LE(trials[i].config.credit, 4 * M);
    EXPECT_GT(trials[i].mean_iteration_s, 0);
    if (!best || trials[i].mean_iteration_s < best->mean_iteration_s) best = &trials[i];
  }
  EXPECT_EQ(job.config(), best->config);
}

TEST(HandComputed, MessageCpuSerialisesEachSendersMessages) {
  // Analytic backend (no sharing), one 1M layer in two 0.5M chunks, 0.25 s of sender CPU per
  // message. F [0,1] B [1,2]; the worker's pushes leave at 2.25 and 2.5: [2.25,2.75] and
  // [2.5,3.0]; the server's pulls at 3.0 and 3.25: [3.0,3.5] and [3.25,3.75].
  Bench b(2, Sharing::kNone);
  JobSpec s =
      b.spec(Mode::kParameterServer, SchedulerKind::kByteScheduler, {layer(1, 1, M)}, 1, 1, 1);
  s.message_cpu = Time::ms(250);
  TrainingJob& job = b.run(std::move(s), {M / 2, 4 * M});
  EXPECT_DOUBLE_EQ(job.finish_time().seconds(), 3.75);
}

// The server's summing (ps_aggregation, the platform's PS cost) at 4e6 bytes/s, one worker and
// one server, one layer of 1M parameters (4 MB): F [0,1] B [1,2], push [2,3], summed [3,4],
// pull [4,5]. Free summing ends at 4.
TEST(HandComputed, ServerSummingDelaysThePull) {
  for (bool summing : {true, false}) {
    Bench b(2);
    JobSpec s =
        b.spec(Mode::kParameterServer, SchedulerKind::kFifo, {layer(1, 1, 1'000'000)}, 1, 1, 1);
    if (summing) s.ps_aggregation = Bandwidth{kBandwidth};
    TrainingJob& job = b.run(std::move(s), {});
    ASSERT_TRUE(job.finished());
    EXPECT_DOUBLE_EQ(job.finish_time().seconds(), summing ? 5 : 4);
  }
}

// ByteScheduler as its MXNet plugin runs in PS mode (scheduling rank0): only worker 0 queues
// and paces; every partition's push waits, on every worker, for a barrier key the server
// answers once both workers pushed it (kvstore_task.py _post_push_pull_barrier), so worker 1's
// chunks start when worker 0 releases them. Two workers and one server, one layer of 2M
// parameters (F 1 s, B 1 s) in 1M chunks, credit 1M (one chunk), flow backend.
//   Equal workers: at 2 worker 0 releases (0,0), worker 1 both chunks: (0,0) starts on both and
//   the two pushes share the server's downlink [2,4]; worker 0's credit returns at 4 and (0,1)
//   starts on both [4,6] while (0,0) is pulled [4,6]; (0,1) pulled [6,8]: 8 s, as when every
//   worker schedules (both release the same chunks at the same times).
//   Worker 0 twice as slow (F [0,2], B [2,4]; worker 1 B ends at 2):
//   rank0: nothing starts before worker 0 releases (0,0) at 4: pushes [4,6], then (0,1) pushed
//   [6,8] while (0,0) is pulled [6,8], (0,1) pulled [8,10]: 10 s.
//   every_worker: worker 1 pushes (0,0) alone [2,3] and (0,1) [3,4]; worker 0 pushes (0,0)
//   [4,5] and (0,1) [5,6]. (0,0)'s pulls start at 5, two flows on the server's uplink at 1/2:
//   2 MB each by 6, when (0,1)'s two pulls join (four flows at 1/4): (0,0)'s last 2 MB end at
//   8, (0,1)'s 2 MB sent by then, its last 2 MB at 1/2 end at 9: 9 s.
TEST(HandComputed, OnlyRankZeroSchedulesInPsModeAsThePluginRuns) {
  for (const bool slow_rank0 : {false, true}) {
    for (Scheduling scheduling : {Scheduling::kRankZero, Scheduling::kEveryWorker}) {
      Bench b(3);
      if (slow_rank0) b.straggle(0, 2, Time::zero());
      JobSpec s = b.spec(Mode::kParameterServer, SchedulerKind::kByteScheduler,
                         {layer(1, 1, 2 * M)}, 2, 1, 1);
      s.scheduling = scheduling;
      TrainingJob& job = b.run(std::move(s), {M, M});
      ASSERT_TRUE(job.finished());
      const bool rank0 = scheduling == Scheduling::kRankZero;
      SCOPED_TRACE(::testing::Message() << "slow rank 0 " << slow_rank0 << ", rank0 " << rank0);
      EXPECT_DOUBLE_EQ(job.finish_time().seconds(), !slow_rank0 ? 8 : (rank0 ? 10 : 9));
      for (const ChunkEvent& e : job.trace()) {
        if (e.kind != ChunkEvent::Kind::kStart) continue;
        double expected = e.chunk.index == 0 ? 2 : 4;  // equal workers
        if (slow_rank0 && rank0) expected = e.chunk.index == 0 ? 4 : 6;
        if (slow_rank0 && !rank0)
          expected = e.worker == 1 ? (e.chunk.index == 0 ? 2 : 3) : (e.chunk.index == 0 ? 4 : 5);
        EXPECT_DOUBLE_EQ(e.at.seconds(), expected)
            << "worker " << e.worker << " chunk " << e.chunk.index;
      }
    }
  }
}
