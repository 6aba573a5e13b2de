// Embedding caches against cases computed by hand: LRU order, Herald's location-aware allocation,
// and the rows transmitted by the HET baseline and Herald over two iterations.
#include <gtest/gtest.h>

#include "sim_core/hardware/compute.hpp"

#include <deque>

#include "models/embcache/embedding_training.hpp"
#include "models/embcache/input_allocation.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology_builders.hpp"

using namespace mlsim;
using namespace mlsim::embcache;

TEST(LruCache, EvictsTheLeastRecentlyUsedRow) {
  LruCache c(2);
  EXPECT_FALSE(c.put(1));
  EXPECT_FALSE(c.put(2));
  EXPECT_FALSE(c.put(1));  // 1 is now the most recent
  EXPECT_EQ(c.put(3), Key{2});
  EXPECT_TRUE(c.contains(1));
  EXPECT_FALSE(c.contains(2));
  EXPECT_EQ(c.put(4), Key{1});            // 3 was used after 1
  EXPECT_EQ(LruCache(0).put(5), Key{5});  // holds nothing
}

TEST(LocationAwareAllocation, FollowsCachesThenLoadThenRotation) {
  // w0 holds rows 1, 2 up to date, w1 holds 3; two samples per worker.
  auto fresh = [](Key k) -> std::uint64_t { return k == 1 || k == 2 ? 0b01 : k == 3 ? 0b10 : 0; };
  const std::vector<Sample> batch{{1, 2}, {3, 4}, {1, 5}, {6}};
  // s0 -> w0 (2 vs 0); s1 -> w1 (1 vs 0); s2 -> w0 (1 vs 0); s3 -> w1 (w0 is full).
  EXPECT_EQ(location_aware_allocation(batch, 2, 0, fresh), (SampleAssignment{{0, 2}, {1, 3}}));
  // No row cached anywhere: ties rotate from (sample + batch number) mod n.
  auto none = [](Key) -> std::uint64_t { return 0; };
  EXPECT_EQ(location_aware_allocation(std::vector<Sample>{{9}, {9}}, 2, 1, none),
            (SampleAssignment{{1}, {0}}));
  EXPECT_EQ(sequential_allocation(4, 2), (SampleAssignment{{0, 1}, {2, 3}}));
}

namespace {

class Scripted final : public SampleSource {
 public:
  explicit Scripted(std::deque<Sample> s) : samples_(std::move(s)) {}
  Sample next() override {
    Sample s = samples_.front();
    samples_.pop_front();
    return s;
  }
  std::uint64_t distinct_rows() const override { return 3; }

 private:
  std::deque<Sample> samples_;
};

struct Outcome {
  Counters counters;
  NetworkTotals totals;
  Time end;
};

Outcome run(Allocation allocation, Sync sync, std::int64_t pull_bound = 0,
            std::int64_t push_bound = 0, std::size_t cache_rows = 10) {
  // Iteration 0: A = {1, 2}, B = {2, 3}; iteration 1: C = {2, 3}, D = {1, 2}.
  const Topology topo = build_topology(StarSpec{3, LinkSpec{Bandwidth{1e9}, Time::us(1)}});
  Engine engine;
  FluidNetwork net(engine, topo, Sharing::kMaxMin);
  TrainingParams p;
  p.allocation = allocation;
  p.sync = sync;
  p.batch_per_worker = 1;
  p.iterations = 2;
  p.row_bytes = 512;
  p.cache_rows = cache_rows;
  p.pull_bound = pull_bound;
  p.push_bound = push_bound;
  p.compute_per_sample = Time::us(10);
  p.workers = {topo.hosts()[0], topo.hosts()[1]};
  p.server = topo.hosts()[2];
  NodeHardware no_gpus;  // fixed work needs no GPU type
  HostSpeeds speeds(topo.nodes().size());
  CostModel costs;
  Compute compute(engine, no_gpus, speeds, costs);
  EmbeddingTraining t(
      engine, net, compute, p,
      std::make_unique<Scripted>(std::deque<Sample>{{1, 2}, {2, 3}, {2, 3}, {1, 2}}));
  t.start();
  engine.run();
  EXPECT_TRUE(t.finished());
  EXPECT_TRUE(t.directory_matches_caches());
  return {t.counters(), net.totals(), engine.now()};
}

}  // namespace

// HET: iteration 0 splits A | B: 4 misses, 4 pushes; row 2 was updated by both, so each worker
// re-pulls it (2 refreshes; rows 1 and 3 were updated only by their holder). Iteration 1: C | D:
// w0 hits 2, misses 3; w1 hits 2, misses 1; 4 pushes; now w0 re-pulls 1 and 2, w1 re-pulls 2 and
// 3 (4 refreshes). Total 6 pulls + 8 pushes + 6 refreshes = 20 rows.
TEST(EmbeddingTraining, HetEagerSyncCountedByHand) {
  const Outcome o = run(Allocation::kSequential, Sync::kEager);
  EXPECT_EQ(o.counters.misses, 6u);
  EXPECT_EQ(o.counters.outdated_pulls, 0u);
  EXPECT_EQ(o.counters.hits, 2u);
  EXPECT_EQ(o.counters.pushes, 8u);
  EXPECT_EQ(o.counters.refreshes, 6u);
  EXPECT_EQ(o.counters.transmissions(), 20u);
  EXPECT_EQ(o.counters.eager_sync_violations, 0u);
  EXPECT_EQ(o.totals.bytes_delivered.count, 20 * 512);
}

// Herald: iteration 0 as HET but nothing is re-pulled: w0 keeps 1 fresh and 2 outdated, w1 keeps
// 2 outdated and 3 fresh. Iteration 1 (batch 1): C = {2, 3} rotates from w1, which scores 1 (row
// 3) against w0's 0 -> w1; D = {1, 2} -> w0 (score 1; w1 is full). w1 pulls outdated 2, hits 3;
// w0 hits 1, pulls outdated 2. Total 4 misses + 2 outdated pulls + 8 pushes = 14 rows.
TEST(EmbeddingTraining, HeraldOnDemandCountedByHand) {
  const Outcome o = run(Allocation::kLocationAware, Sync::kOnDemand);
  EXPECT_EQ(o.counters.misses, 4u);
  EXPECT_EQ(o.counters.outdated_pulls, 2u);
  EXPECT_EQ(o.counters.hits, 2u);
  EXPECT_EQ(o.counters.pushes, 8u);
  EXPECT_EQ(o.counters.refreshes, 0u);
  EXPECT_EQ(o.counters.transmissions(), 14u);
  EXPECT_EQ(o.totals.bytes_delivered.count, 14 * 512);
  // Fewer rows and no sync phase: Herald finishes first.
  EXPECT_LT(o.end, run(Allocation::kSequential, Sync::kEager).end);
}

// HET as Hetu implements it (bounded staleness), same two iterations, sequential split A | C on
// w0, B | D on w1. Versions: the PS's per row, each holder's at its pull plus its own pushes.
//   bounds 0/0: iteration 0: 4 misses, 4 pushes (each used row has 1 update > 0); PS versions
//     row 1 = 1, row 2 = 2, row 3 = 1; w0 holds 1 at 1 and 2 at 1, w1 holds 2 at 1 and 3 at 1, so
//     row 2 is 1 version behind on both (> 0: outdated). Iteration 1: w0 {2, 3}: outdated 2,
//     miss 3; w1 {1, 2}: miss 1, outdated 2; 4 pushes. 4 + 4 + 4 + 4 = 16 rows, the same as
//     sequential + on-demand sync.
//   pull bound 1: row 2's copies are 1 behind, within the bound: iteration 1 hits 2 on both
//     workers, misses 3 and 1. 4 + 4 + 2 + 4 = 14 rows.
//   push bound 1 (a row is pushed after 2 updates): iteration 0 pushes nothing (each row has 1
//     update), so the PS versions stay 0 and every copy is current; iteration 1: w0 hits 2, misses
//     3, w1 misses 1, hits 2; row 2 now has 2 updates on each worker -> pushed (2 rows), rows 3
//     and 1 keep 1. 4 + 0 + 2 + 2 = 8 rows.
//   push bound 1, caches of 1 row: iteration 0: w0 pulls 1, 2 (2 evicts 1, no updates yet); w1
//     pulls 2, 3 (3 evicts 2). Push: w0's row 1 and w1's row 2 are no longer cached, so they are
//     pushed at once (Hetu pushes a row it finds without data): 2 rows; rows 2 (w0) and 3 (w1)
//     keep 1 update. PS: row 1 is cached nowhere; row 2 (held by w0 at 0) goes to 1: outdated.
//     Iteration 1: w0 {2, 3}: outdated 2 (pulled at version 1, its update kept), miss 3, which
//     evicts 2 with 1 update pending; w1 {1, 2}: misses 1 and 2; 2 evicts 1, and 1 had evicted 3
//     with 1 update pending. Pushes: w0: row 2 (not cached: at once) + evicted row 2 = 2, row 3
//     keeps 1 update; w1: row 1 (not cached) + evicted row 3 = 2, row 2 keeps 1 update.
//     4 + 2 + 4 + 4 = 14 rows.
TEST(EmbeddingTraining, HetBoundedStalenessCountedByHand) {
  const Outcome exact = run(Allocation::kSequential, Sync::kBounded, 0, 0);
  EXPECT_EQ(exact.counters.misses, 6u);
  EXPECT_EQ(exact.counters.outdated_pulls, 2u);
  EXPECT_EQ(exact.counters.pushes, 8u);
  EXPECT_EQ(exact.counters.transmissions(), 16u);
  EXPECT_EQ(exact.counters.transmissions(),
            run(Allocation::kSequential, Sync::kOnDemand).counters.transmissions());
  EXPECT_EQ(exact.totals.bytes_delivered.count, 16 * 512);

  const Outcome pull1 = run(Allocation::kSequential, Sync::kBounded, 1, 0);
  EXPECT_EQ(pull1.counters.misses, 6u);
  EXPECT_EQ(pull1.counters.outdated_pulls, 0u);
  EXPECT_EQ(pull1.counters.hits, 2u);
  EXPECT_EQ(pull1.counters.transmissions(), 14u);

  const Outcome push1 = run(Allocation::kSequential, Sync::kBounded, 0, 1);
  EXPECT_EQ(push1.counters.misses, 6u);
  EXPECT_EQ(push1.counters.hits, 2u);
  EXPECT_EQ(push1.counters.pushes, 2u);
  EXPECT_EQ(push1.counters.transmissions(), 8u);
  EXPECT_EQ(push1.totals.bytes_delivered.count, 8 * 512);

  const Outcome evicting = run(Allocation::kSequential, Sync::kBounded, 0, 1, 1);
  EXPECT_EQ(evicting.counters.misses, 7u);
  EXPECT_EQ(evicting.counters.outdated_pulls, 1u);
  EXPECT_EQ(evicting.counters.pushes, 6u);
  EXPECT_EQ(evicting.counters.transmissions(), 14u);
}

namespace {

// One iteration of one sample per worker on a star of 1 GB/s, 1 us links (hosts: the workers,
// then the PS), 512-byte rows; `adjust` sets what a test varies. Returns the job and end time.
struct OneIteration {
  Time end;
  Counters counters;
  std::int64_t dense_bytes;
};
template <typename Adjust>
OneIteration one_iteration(std::size_t workers, Sharing sharing, std::deque<Sample> samples,
                           Adjust adjust) {
  const Topology topo = build_topology(
      StarSpec{static_cast<int>(workers) + 1, LinkSpec{Bandwidth{1e9}, Time::us(1)}});
  Engine engine;
  FluidNetwork net(engine, topo, sharing);
  TrainingParams p;
  p.batch_per_worker = 1;
  p.iterations = 1;
  p.row_bytes = 512;
  p.cache_rows = 10;
  for (std::size_t w = 0; w < workers; ++w) p.workers.push_back(topo.hosts()[w]);
  p.server = topo.hosts()[workers];
  adjust(p);
  NodeHardware no_gpus;
  HostSpeeds speeds(topo.nodes().size());
  CostModel compute_costs;
  Compute compute(engine, no_gpus, speeds, compute_costs);
  EmbeddingTraining t(engine, net, compute, p, std::make_unique<Scripted>(std::move(samples)));
  t.start();
  engine.run();
  EXPECT_TRUE(t.finished());
  return {engine.now(), t.counters(), t.dense_bytes_delivered()};
}

}  // namespace

// Every pull and push is a send_recv call of the collective layer and pays its costs. One worker
// (host 0), PS host 1, one sample of rows {1, 2}, one iteration, 1 GB/s links of 1 us on a star:
// 2 rows x 512 B = 1,024 B each way, 1,024 ns + 2 x 1 us = 3,024 ns per message.
//   no costs:    pull 0 -> 3,024; compute 10 us -> 13,024; push -> 16,048 ns.
//   launch 2 us, host overhead 3 us: each message leaves 5 us later:
//                pull -> 8,024; compute -> 18,024; push -> 26,048 ns (+ 2 x 5 us).
TEST(EmbeddingTraining, EveryMessagePaysTheCollectiveLayersCosts) {
  auto end_time = [](const collectives::PointToPoint::Options& costs) {
    const OneIteration o = one_iteration(1, Sharing::kMaxMin, {{1, 2}}, [&](TrainingParams& p) {
      p.compute_per_sample = Time::us(10);
      p.messages = costs;
    });
    EXPECT_EQ(o.counters.transmissions(), 4u);
    return o.end;
  };
  EXPECT_EQ(end_time({}), Time::ns(16'048));
  collectives::PointToPoint::Options costs;
  costs.costs.launch = Time::us(2);
  costs.host.message_overhead = Time::us(3);
  EXPECT_EQ(end_time(costs), Time::ns(26'048));
}

// The dense layer's gradient through the training core's ps or ring strategy, on the analytic
// backend (no sharing: a message of b bytes over the star's two 1 us links takes b ns + 2 us).
// Workers 0 and 1 (samples {1, 2} and {2, 3}, sequential, eager), PS host 2, one iteration,
// 30 us per sample: dense forward 10 us, backward 20 us.
//   pulls (1,024 B each) arrive at 3,024 ns; forward 3,024-13,024, backward -33,024 ns; then the
//   embedding pushes (1,024 B) arrive at 36,048 and both re-pull row 2 (512 B): 38,560 ns.
//   dense 0 values: the job ends with the embedding sync, 38,560 ns.
//   dense 10,000 values (40,000 B) by ring: 2 steps of 20,000 B, 22,000 ns each, from 33,024:
//     77,024 ns.
//   by ps on host 2: pushes of 40,000 B arrive at 75,024, pulls at 117,024 ns.
TEST(EmbeddingTraining, DenseLayerSyncsThroughTheTrainingCore) {
  auto end_time = [](std::int64_t dense, const std::string& sync) {
    const OneIteration o =
        one_iteration(2, Sharing::kNone, {{1, 2}, {2, 3}}, [&](TrainingParams& p) {
          p.compute_per_sample = Time::us(30);
          p.dense_parameters = dense;
          p.dense_sync = sync;
        });
    EXPECT_EQ(o.counters.refreshes, 2u);
    // ring: 2 (n-1) steps of S/n each, 2 x 20,000 B; ps: 2 workers x (push + pull) of S.
    EXPECT_EQ(o.dense_bytes, dense == 0 ? 0 : (sync == "ring" ? 2 : 4) * 4 * dense);
    return o.end;
  };
  EXPECT_EQ(end_time(0, "ring"), Time::ns(38'560));
  EXPECT_EQ(end_time(10'000, "ring"), Time::ns(77'024));
  EXPECT_EQ(end_time(10'000, "ps"), Time::ns(117'024));
}
