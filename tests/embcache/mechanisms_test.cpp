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

// Scripted samples; keys are table rows (SampleSource::table_row's default), of a table of
// `rows` rows.
class Scripted final : public SampleSource {
 public:
  explicit Scripted(std::deque<Sample> s, std::uint64_t rows = 3)
      : samples_(std::move(s)), rows_(rows) {}
  Sample next() override {
    Sample s = samples_.front();
    samples_.pop_front();
    return s;
  }
  std::uint64_t distinct_rows() const override { return rows_; }

 private:
  std::deque<Sample> samples_;
  std::uint64_t rows_;
};

struct Outcome {
  Counters counters;
  NetworkTotals totals;
  Time end;
  std::uint64_t messages;
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
  p.servers = {topo.hosts()[2]};
  p.row_meta_bytes = 0;  // these tests count rows: bytes are rows x 512
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
  return {t.counters(), net.totals(), engine.now(), t.embedding_messages()};
}

}  // namespace

// HET: iteration 0 splits A | B: 4 misses, 4 pushes; row 2 was updated by both, so each worker
// re-pulls it (2 refreshes; rows 1 and 3 were updated only by their holder). Iteration 1: C | D:
// w0 hits 2, misses 3; w1 hits 2, misses 1; 4 pushes; now w0 re-pulls 1 and 2, w1 re-pulls 2 and
// 3 (4 refreshes). Total 6 pulls + 8 pushes + 6 refreshes = 20 rows.
// Messages (one server): each iteration, per worker, pull request + response, push + ack and
// refresh request + response: 2 x 2 x 3 = 12, 24 in all.
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
  EXPECT_EQ(o.messages, 24u);
}

// Herald: iteration 0 as HET but nothing is re-pulled: w0 keeps 1 fresh and 2 outdated, w1 keeps
// 2 outdated and 3 fresh. Iteration 1 (batch 1): C = {2, 3} rotates from w1, which scores 1 (row
// 3) against w0's 0 -> w1; D = {1, 2} -> w0 (score 1; w1 is full). w1 pulls outdated 2, hits 3;
// w0 hits 1, pulls outdated 2. Total 4 misses + 2 outdated pulls + 8 pushes = 14 rows.
// Messages: pull and push round trips only, 2 workers x 2 x 2 per iteration = 16.
TEST(EmbeddingTraining, HeraldOnDemandCountedByHand) {
  const Outcome o = run(Allocation::kLocationAware, Sync::kOnDemand);
  EXPECT_EQ(o.counters.misses, 4u);
  EXPECT_EQ(o.counters.outdated_pulls, 2u);
  EXPECT_EQ(o.counters.hits, 2u);
  EXPECT_EQ(o.counters.pushes, 8u);
  EXPECT_EQ(o.counters.refreshes, 0u);
  EXPECT_EQ(o.counters.transmissions(), 14u);
  EXPECT_EQ(o.totals.bytes_delivered.count, 14 * 512);
  EXPECT_EQ(o.messages, 16u);
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
  std::uint64_t messages;
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
  p.servers = {topo.hosts()[workers]};
  adjust(p);
  NodeHardware no_gpus;
  HostSpeeds speeds(topo.nodes().size());
  CostModel compute_costs;
  Compute compute(engine, no_gpus, speeds, compute_costs);
  EmbeddingTraining t(engine, net, compute, p, std::make_unique<Scripted>(std::move(samples)));
  t.start();
  engine.run();
  EXPECT_TRUE(t.finished());
  return {engine.now(), t.counters(), t.dense_bytes_delivered(), t.embedding_messages()};
}

}  // namespace

// Every request and response is a send_recv call of the collective layer and pays its costs.
// One worker (host 0), PS host 1, one sample of rows {1, 2}, one iteration, 1 GB/s links of
// 1 us on a star (a message of b bytes: b ns + 2 us), 512-byte rows, 16 bytes of index and
// version per row (Hetu's messages):
//   pull request 2 x 16 = 32 B: 2,032 ns; response 2 x (512 + 16) = 1,056 B: 3,056 ns -> 5,088;
//   compute 10 us -> 15,088; push 1,056 B -> 18,144; empty ack -> 20,144 ns (the one worker
//   updated both rows alone: no refresh).
//   launch 2 us, host overhead 3 us: each of the 4 messages leaves 5 us later -> 40,144 ns;
//   and a message latency of 7 us: 12 us per message -> 68,144 ns.
//   Without those, a per-byte copy of 4 ns/B (slower than the 1 B/ns link), booked on the
//   sender after its overhead and run beside the transfer (delivered at max(arrival, copy end)):
//   request 32 B, copy 128 ns < 2,032 -> 2,032; response copy 4,224 ns from 2,032 -> 6,256
//   (arrival 5,088); compute -> 16,256; push copy 4,224 -> 20,480 (arrival 19,312); empty ack
//   -> 22,480 ns.
TEST(EmbeddingTraining, EveryMessagePaysTheCollectiveLayersCosts) {
  auto end_time = [](const collectives::PointToPoint::Options& costs) {
    const OneIteration o = one_iteration(1, Sharing::kMaxMin, {{1, 2}}, [&](TrainingParams& p) {
      p.compute_per_sample = Time::us(10);
      p.messages = costs;
    });
    EXPECT_EQ(o.counters.transmissions(), 4u);
    EXPECT_EQ(o.messages, 4u);
    return o.end;
  };
  EXPECT_EQ(end_time({}), Time::ns(20'144));
  collectives::PointToPoint::Options costs;
  costs.costs.launch = Time::us(2);
  costs.host.message_overhead = Time::us(3);
  EXPECT_EQ(end_time(costs), Time::ns(40'144));
  costs.host.message_latency = Time::us(7);
  EXPECT_EQ(end_time(costs), Time::ns(68'144));
  collectives::PointToPoint::Options copy;
  copy.host.per_byte_ns = 4;
  EXPECT_EQ(end_time(copy), Time::ns(22'480));
}

// Two workers and two servers (ps-lite's AveragePartitioner: a table of 4 rows, server 0 holds
// rows [0, 2), server 1 rows [2, 4)), HET's eager sync, one iteration, analytic backend (no
// sharing: b ns + 2 us a message), 10 us per sample, 512-byte rows and 16 bytes of meta per row.
// w0 uses {1, 2} (row 1 on s0, row 2 on s1), w1 {2, 3} (both on s1).
//   pulls: w0 sends 16 B to s0 and 16 B to s1 (2,016), each answers one row, 528 B (2,528):
//     4,544; w1 sends 32 B to s1 (2,032), 1,056 B back (3,056): 5,088.
//   compute: w0 -> 14,544, w1 -> 15,088.
//   pushes: w0: 528 B to s0 and to s1 -> 17,072, acks (0 B) -> 19,072; w1: 1,056 B to s1 ->
//     18,144, ack -> 20,144.
//   eager sync: row 2 was updated by both: each re-pulls it from s1: 16 B -> 22,160, 528 B ->
//     24,688 ns.
//   messages: w0 2 + 2 + 1 round trips, w1 1 + 1 + 1: 8 round trips, 16 messages; with one
//     server, one round trip per worker and phase: 12 messages, same end (w1 decides it: its
//     messages are the same).
//   payload: 4 x 16 + 4 x 528 (pulls) + 4 x 528 (pushes) + 2 x 16 + 2 x 528 (refreshes) = 5,376 B.
// With 3 us of host overhead per message (each host sends one message after another):
//   two servers: w0's requests leave at 3 and 6 us (arrive 5,016 at s0, 8,016 at s1); w1's at
//     3 us (5,032 at s1). s0 answers w0: 8,016 -> 10,544. s1 answers w1 first: 8,032 -> 11,088,
//     then w0: 11,032 -> 13,560. Compute: w0 -> 23,560, w1 -> 21,088. w1 pushes 24,088 ->
//     27,144, s1 acks 30,144 -> 32,144. w0 pushes to s0 26,560 -> 29,088 (ack 32,088 -> 34,088)
//     and to s1 29,560 -> 32,088 (ack 35,088 -> 37,088). Refresh: both request at 40,088 ->
//     42,104 at s1, which answers at 45,104 (-> 47,632) and 48,104 (-> 50,632 ns).
//   one server: both requests arrive at 5,032; answers leave 8,032 (-> 11,088) and 11,032
//     (-> 14,088). Pushes 24,088 -> 27,144 and 27,088 -> 30,144; acks 30,144 -> 32,144 and
//     33,144 -> 35,144. Refresh requests 38,144 -> 40,160; answers 43,160 (-> 45,688) and
//     46,160 (-> 48,688 ns): more servers, more messages, later here.
TEST(EmbeddingTraining, RequestsGoToEachServerOfTheRowsCountedByHand) {
  struct Run {
    Time end;
    std::uint64_t messages;
    std::int64_t payload;
    Counters counters;
  };
  auto run_with = [](std::size_t servers, Time overhead) {
    const Topology topo = build_topology(StarSpec{4, LinkSpec{Bandwidth{1e9}, Time::us(1)}});
    Engine engine;
    FluidNetwork net(engine, topo, Sharing::kNone);
    TrainingParams p;
    p.batch_per_worker = 1;
    p.iterations = 1;
    p.row_bytes = 512;
    p.cache_rows = 10;
    p.compute_per_sample = Time::us(10);
    p.workers = {topo.hosts()[0], topo.hosts()[1]};
    for (std::size_t s = 0; s < servers; ++s) p.servers.push_back(topo.hosts()[2 + s]);
    p.messages.host.message_overhead = overhead;
    NodeHardware no_gpus;
    HostSpeeds speeds(topo.nodes().size());
    CostModel compute_costs;
    Compute compute(engine, no_gpus, speeds, compute_costs);
    EmbeddingTraining t(engine, net, compute, p,
                        std::make_unique<Scripted>(std::deque<Sample>{{1, 2}, {2, 3}}, 4));
    t.start();
    engine.run();
    EXPECT_TRUE(t.finished());
    return Run{engine.now(), t.embedding_messages(), net.totals().bytes_delivered.count,
               t.counters()};
  };
  const Run two = run_with(2, Time::zero());
  EXPECT_EQ(two.counters.misses, 4u);
  EXPECT_EQ(two.counters.pushes, 4u);
  EXPECT_EQ(two.counters.refreshes, 2u);
  EXPECT_EQ(two.messages, 16u);
  EXPECT_EQ(two.payload, 5'376);
  EXPECT_EQ(two.end, Time::ns(24'688));
  const Run one = run_with(1, Time::zero());
  EXPECT_EQ(one.messages, 12u);
  EXPECT_EQ(one.payload, 5'376);  // the same rows and meta, fewer messages
  EXPECT_EQ(one.end, Time::ns(24'688));
  EXPECT_EQ(run_with(2, Time::us(3)).end, Time::ns(50'632));
  EXPECT_EQ(run_with(1, Time::us(3)).end, Time::ns(48'688));
}

// The dense layer's gradient through the training core's ps or ring strategy, on the analytic
// backend (no sharing: a message of b bytes over the star's two 1 us links takes b ns + 2 us).
// Workers 0 and 1 (samples {1, 2} and {2, 3}, sequential, eager), PS host 2, one iteration,
// 30 us per sample: dense forward 10 us, backward 20 us. No per-row meta bytes (requests and
// acks are empty: 2 us each).
//   pull requests arrive at 2,000, responses (1,024 B each) at 5,024; forward 5,024-15,024,
//   backward -35,024 ns; then the embedding pushes (1,024 B) arrive at 38,048, the acks at
//   40,048, and both re-pull row 2 (request 42,048, 512 B back): 44,560 ns.
//   dense 0 values: the job ends with the embedding sync, 44,560 ns.
//   dense 10,000 values (40,000 B) by ring: 2 steps of 20,000 B, 22,000 ns each, from 35,024:
//     79,024 ns.
//   by ps on host 2: pushes of 40,000 B arrive at 77,024, pulls at 119,024 ns.
TEST(EmbeddingTraining, DenseLayerSyncsThroughTheTrainingCore) {
  auto end_time = [](std::int64_t dense, const std::string& sync) {
    const OneIteration o =
        one_iteration(2, Sharing::kNone, {{1, 2}, {2, 3}}, [&](TrainingParams& p) {
          p.compute_per_sample = Time::us(30);
          p.dense_parameters = dense;
          p.dense_sync = sync;
          p.row_meta_bytes = 0;
        });
    EXPECT_EQ(o.counters.refreshes, 2u);
    // ring: 2 (n-1) steps of S/n each, 2 x 20,000 B; ps: 2 workers x (push + pull) of S.
    EXPECT_EQ(o.dense_bytes, dense == 0 ? 0 : (sync == "ring" ? 2 : 4) * 4 * dense);
    return o.end;
  };
  EXPECT_EQ(end_time(0, "ring"), Time::ns(44'560));
  EXPECT_EQ(end_time(10'000, "ring"), Time::ns(79'024));
  EXPECT_EQ(end_time(10'000, "ps"), Time::ns(119'024));
}
