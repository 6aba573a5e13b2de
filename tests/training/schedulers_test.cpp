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
