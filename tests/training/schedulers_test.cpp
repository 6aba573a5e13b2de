// The communication schedulers on their own, and FIFO against ByteScheduler in a job: a
// three-tensor case computed by hand.
#include <gtest/gtest.h>

#include "models/training/byte_scheduler.hpp"
#include "models/training/fifo_scheduler.hpp"
#include "tests/training/test_support.hpp"

using namespace mlsim;
using namespace mlsim::training;
using namespace mlsim::training::testing;

TEST(Partition, CutsIntoChunksOfThePartitionSize) {
  EXPECT_EQ(partition_tensor(5, 2), (std::vector<std::int64_t>{2, 2, 1}));
  EXPECT_EQ(partition_tensor(4, 2), (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(partition_tensor(5, 0), (std::vector<std::int64_t>{5}));  // whole tensor
  EXPECT_EQ(partition_tensor(5, 9), (std::vector<std::int64_t>{5}));
  EXPECT_TRUE(partition_tensor(0, 2).empty());
}

TEST(ByteScheduler, PopsWhileCreditIsPositiveAndOvershootsByLessThanAChunk) {
  ByteScheduler s({0, 3});
  s.ready({1, 0, 2});
  s.ready({1, 1, 2});
  s.ready({1, 2, 2});
  ASSERT_TRUE(s.next());  // credit 3 -> 1
  ASSERT_TRUE(s.next());  // credit 1 > 0: goes, credit -1 (bytecore.py)
  EXPECT_EQ(s.credit_left(), -1);
  EXPECT_FALSE(s.next());
  s.completed({1, 0, 2});
  EXPECT_EQ(s.credit_left(), 1);
  const auto c = s.next();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->index, 2u);
  EXPECT_EQ(s.queued(), 0u);
}

// Three tensors ready in backward order (layer 2, then 1, then 0) while layer 2's is in
// flight: ByteScheduler takes the lowest layer first, FIFO the order they became ready.
TEST(Schedulers, ByteSchedulerOvertakesQueuedTensorsFifoDoesNot) {
  ByteScheduler bs({0, 1});  // one parameter of credit: one tensor at a time
  FifoScheduler fifo(1);     // one engine: one tensor at a time
  for (CommScheduler* s : std::initializer_list<CommScheduler*>{&bs, &fifo}) {
    s->ready({2, 0, 4});
    const auto first = s->next();
    ASSERT_TRUE(first);
    s->ready({1, 0, 1});
    s->ready({0, 0, 1});
    EXPECT_FALSE(s->next());  // layer 2 is in flight
    s->completed(*first);
    std::vector<std::uint32_t> order;
    while (auto c = s->next()) {
      order.push_back(c->layer);
      s->completed(*c);
    }
    EXPECT_EQ(order,
              s == &bs ? (std::vector<std::uint32_t>{0, 1}) : (std::vector<std::uint32_t>{1, 0}));
  }
}

TEST(Schedulers, FifoEnginesServeTheQueueInReadyOrder) {
  FifoScheduler fifo(2);  // two engines
  fifo.ready({2, 0, 4});
  fifo.ready({1, 0, 1});
  fifo.ready({0, 0, 1});
  const auto a = fifo.next(), b = fifo.next();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->layer, 2u);
  EXPECT_EQ(b->layer, 1u);
  EXPECT_FALSE(fifo.next());  // both engines busy
  fifo.completed(*b);
  const auto c = fifo.next();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->layer, 0u);
  EXPECT_EQ(fifo.config(), (SchedulerConfig{0, 0}));  // no credit equivalent
}

TEST(Schedulers, FifoWithoutOneAtATimeStartsEverythingReady) {
  FifoScheduler fifo(0);  // no limit
  fifo.ready({1, 0, 5});
  fifo.ready({0, 0, 5});
  EXPECT_TRUE(fifo.next());
  EXPECT_TRUE(fifo.next());
  EXPECT_EQ(fifo.config(), (SchedulerConfig{0, 0}));
}

// The same three tensors in a job: 2 workers, ring sync (one tensor at a time for FIFO; credit
// 1 makes ByteScheduler one chunk at a time too), whole tensors. Layers: forward 1 s and
// backward 1 s each; 1M, 1M and 4M parameters. A ring of 2 sends P parameters in 2 steps of
// 2P bytes, each 2P / 4e6 = P/2 s (P in millions), so a tensor takes P seconds.
//   Iteration 0: F0 [0,1] F1 [1,2] F2 [2,3] B2 [3,4] B1 [4,5] B0 [5,6]; layer 2 [4,8]; layer 1
//   is ready at 5, layer 0 at 6, both wait.
//   FIFO: layer 1 [8,9], layer 0 [9,10]. Iteration 1 waits for layer 0: F0 [10,11] F1 [11,12]
//   F2 [12,13] B2 [13,14] B1 [14,15] B0 [15,16]; layer 2 [14,18], layer 1 [18,19], layer 0
//   [19,20]: the job ends at 20.
//   ByteScheduler: layer 0 [8,9], layer 1 [9,10]. F0 [9,10], F1 waits for layer 1: [10,11]
//   F2 [11,12] B2 [12,13] B1 [13,14] B0 [14,15]; layer 2 [13,17], layer 0 [17,18], layer 1
//   [18,19]: the job ends at 19.
TEST(Schedulers, FifoAgainstByteSchedulerOnThreeTensors) {
  const std::vector<Layer> layers = {{1, 1, M}, {1, 1, M}, {1, 1, 4 * M}};
  Job fifo(2, 0, layers, 2, "fifo", "ring", {});
  fifo.run();
  Job bs(2, 0, layers, 2, "bytescheduler", "ring", {0, 1});
  bs.run();
  using Order = std::vector<std::pair<std::uint32_t, std::uint32_t>>;
  EXPECT_EQ(fifo.started(), (Order{{2, 0}, {1, 0}, {0, 0}, {2, 0}, {1, 0}, {0, 0}}));
  EXPECT_EQ(bs.started(), (Order{{2, 0}, {0, 0}, {1, 0}, {2, 0}, {0, 0}, {1, 0}}));
  EXPECT_EQ(fifo.iteration_starts(), (std::vector<double>{0, 10}));
  EXPECT_EQ(bs.iteration_starts(), (std::vector<double>{0, 9}));
  ASSERT_TRUE(fifo.core->finished() && bs.core->finished());
  EXPECT_DOUBLE_EQ(fifo.core->finish_time().seconds(), 20);
  EXPECT_DOUBLE_EQ(bs.core->finish_time().seconds(), 19);
}

namespace {
// Two workers, three layers of one parameter (one chunk each); records what comes back.
struct TwoWorkers final : GradientOwner {
  std::size_t gradient_workers() const override { return 2; }
  std::size_t gradient_layers() const override { return 3; }
  std::int64_t layer_parameters(std::size_t) const override { return 1; }
  void parameters_back(std::size_t w, std::size_t l) override { back.push_back({w, l}); }
  void parameters_fetched(std::size_t, std::size_t) override {}
  void check_progress() override {}
  std::size_t updates(std::size_t, std::size_t) const override { return 0; }
  std::vector<std::pair<std::size_t, std::size_t>> back;
};

// A per-worker strategy that only records the chunks started, as (worker, layer).
struct StartLog final : GradientSync {
  Entry entry() const override { return Entry::kPerWorker; }
  bool one_tensor_at_a_time() const override { return false; }
  bool layout_matters() const override { return false; }
  void set_partition(std::int64_t) override {}
  void start(std::size_t w, const Chunk& c) override { starts.push_back({w, c.layer}); }
  std::int64_t bytes_sent() const override { return 0; }
  std::int64_t bytes_delivered() const override { return 0; }
  std::uint64_t messages() const override { return 0; }
  std::vector<std::pair<std::size_t, std::size_t>> starts;
};
using Pairs = std::vector<std::pair<std::size_t, std::size_t>>;
}  // namespace

// One order for the job (Ordering::kJob, ByteScheduler over a collective: rank 0 decides the
// order), by hand: ByteScheduler with credit 1 (one chunk in flight). Worker 0 produces layers
// 2, 1, 0 before worker 1 produces any: nothing starts. Worker 1 produces layer 2: it starts on
// both workers. Worker 1 produces layer 1: it waits for the credit. Worker 1's result of layer
// 2 is back: its parameters are, but the credit is worker 0's, so nothing starts. Worker 0's is
// back: the credit returns and layer 1 starts on both. Worker 1 produces layer 0, which waits;
// worker 0's layer 1 is back: layer 0 starts on both. Every worker starts the same chunks in the
// same order; every worker gets every layer back once.
TEST(GradientPath, OneOrderForTheJobStartsEachChunkOnEveryWorkerOnceAllProducedIt) {
  Engine engine;
  TwoWorkers job;
  StartLog sync;
  GradientPath path(engine, job, training_policies().schedulers.get("bytescheduler", "").value,
                    SchedulerConfig{1, 1});
  path.set_ordering(Ordering::kJob);
  path.set_sync(&sync);
  for (std::size_t l : {2, 1, 0}) path.gradient_ready(0, l);
  EXPECT_TRUE(sync.starts.empty());
  path.gradient_ready(1, 2);
  EXPECT_EQ(sync.starts, (Pairs{{0, 2}, {1, 2}}));
  path.gradient_ready(1, 1);
  EXPECT_EQ(sync.starts.size(), 2u);
  path.on_chunk(1, Chunk{2, 0, 1}, /*release=*/true, /*arrived=*/true);
  EXPECT_EQ(sync.starts.size(), 2u);
  EXPECT_EQ(job.back, (Pairs{{1, 2}}));
  path.on_chunk(0, Chunk{2, 0, 1}, true, true);
  EXPECT_EQ(sync.starts, (Pairs{{0, 2}, {1, 2}, {0, 1}, {1, 1}}));
  path.gradient_ready(1, 0);
  EXPECT_EQ(sync.starts.size(), 4u);
  path.on_chunk(1, Chunk{1, 0, 1}, true, true);
  path.on_chunk(0, Chunk{1, 0, 1}, true, true);
  EXPECT_EQ(sync.starts, (Pairs{{0, 2}, {1, 2}, {0, 1}, {1, 1}, {0, 0}, {1, 0}}));
  path.on_chunk(0, Chunk{0, 0, 1}, true, true);
  path.on_chunk(1, Chunk{0, 0, 1}, true, true);
  EXPECT_EQ(job.back, (Pairs{{1, 2}, {0, 2}, {1, 1}, {0, 1}, {0, 0}, {1, 0}}));
  EXPECT_EQ(path.config().credit, 1);
}

// ByteScheduler's MXNet PS plugin (rank 0 schedules, the others are immediate) with its
// per-partition barrier (GradientPath::set_start_barrier), by hand, credit 1 (one chunk in
// flight on worker 0). Worker 1 produces layers 2, 1, 0 first: nothing starts, worker 0 has
// released nothing. Worker 0 produces layer 2: released, it starts on both. Worker 0 produces
// 1 and 0: they wait for its credit. Worker 1's layer 2 is back: nothing starts (its release
// paces nothing). Worker 0's is back: its scheduler releases layer 0 (the input side first),
// which starts on both; then layer 1 the same way. Worker 1 sends in worker 0's order 2, 0, 1,
// not in its own ready order 2, 1, 0 (which it would send at once without the barrier).
TEST(GradientPath, RankZeroBarrierPacesTheImmediateWorkersInRankZerosOrder) {
  for (const bool barrier : {true, false}) {
    Engine engine;
    TwoWorkers job;
    StartLog sync;
    GradientPath path(engine, job, training_policies().schedulers.get("bytescheduler", "").value,
                      SchedulerConfig{1, 1});
    path.set_scheduling_owners(1);
    path.set_start_barrier(barrier);
    path.set_sync(&sync);
    for (std::size_t l : {2, 1, 0}) path.gradient_ready(1, l);
    if (!barrier) {
      EXPECT_EQ(sync.starts, (Pairs{{1, 2}, {1, 1}, {1, 0}}));
      continue;
    }
    EXPECT_TRUE(sync.starts.empty());
    path.gradient_ready(0, 2);
    EXPECT_EQ(sync.starts, (Pairs{{0, 2}, {1, 2}}));
    path.gradient_ready(0, 1);
    path.gradient_ready(0, 0);
    EXPECT_EQ(sync.starts.size(), 2u);
    path.on_chunk(1, Chunk{2, 0, 1}, /*release=*/true, /*arrived=*/true);
    EXPECT_EQ(sync.starts.size(), 2u);
    path.on_chunk(0, Chunk{2, 0, 1}, true, true);
    EXPECT_EQ(sync.starts, (Pairs{{0, 2}, {1, 2}, {0, 0}, {1, 0}}));
    path.on_chunk(1, Chunk{0, 0, 1}, true, true);
    path.on_chunk(0, Chunk{0, 0, 1}, true, true);
    EXPECT_EQ(sync.starts, (Pairs{{0, 2}, {1, 2}, {0, 0}, {1, 0}, {0, 1}, {1, 1}}));
    path.on_chunk(0, Chunk{1, 0, 1}, true, true);
    path.on_chunk(1, Chunk{1, 0, 1}, true, true);
    EXPECT_EQ(job.back, (Pairs{{1, 2}, {0, 2}, {1, 0}, {0, 0}, {0, 1}, {1, 1}}));
  }
}

// One order for the job needs a strategy that starts chunks per worker.
TEST(GradientPath, OneOrderForTheJobRefusesAnAllWorkersStrategy) {
  struct AllWorkers final : GradientSync {
    Entry entry() const override { return Entry::kAllWorkers; }
    bool one_tensor_at_a_time() const override { return false; }
    bool layout_matters() const override { return false; }
    void set_partition(std::int64_t) override {}
    void start(std::size_t, const Chunk&) override {}
    std::int64_t bytes_sent() const override { return 0; }
    std::int64_t bytes_delivered() const override { return 0; }
    std::uint64_t messages() const override { return 0; }
  } sync;
  Engine engine;
  TwoWorkers job;
  GradientPath path(engine, job, training_policies().schedulers.get("bytescheduler", "").value,
                    SchedulerConfig{1, 1});
  path.set_ordering(Ordering::kJob);
  EXPECT_ANY_THROW(path.set_sync(&sync));
}
