// Invariants under random Zipf traces for both policies: every row access is a hit, a miss or an
// outdated pull; HET's eager sync never leaves an outdated row to be found; every transfer is
// delivered; the allocation places every sample once within the per-worker cap; reruns match.
#include <gtest/gtest.h>

#include "sim_core/hardware/compute.hpp"

#include <algorithm>
#include <set>
#include <tuple>

#include "models/embcache/embedding_training.hpp"
#include "models/embcache/input_allocation.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology_builders.hpp"

using namespace mlsim;
using namespace mlsim::embcache;

namespace {

// A pull's delivery of one row: (iteration, worker, row).
using Delivery = std::tuple<std::size_t, std::size_t, Key>;

struct PropertyOutcome {
  Counters counters;
  NetworkTotals totals;
  std::map<std::string, double> metrics;
  std::uint64_t messages = 0;
  std::set<Delivery> delivered;
  std::size_t duplicates = 0;  // rows a pull delivered more than once
};

// `servers` PS hosts after the workers; `meta` bytes of index and version per row (0: payload is
// rows x 512).
PropertyOutcome property_run(Allocation allocation, Sync sync, std::uint64_t seed,
                             std::size_t workers, std::size_t cache_rows,
                             std::int64_t pull_bound = 0, std::int64_t push_bound = 0,
                             std::size_t servers = 1, std::int64_t meta = 0) {
  const Topology topo = build_topology(
      StarSpec{static_cast<int>(workers + servers), LinkSpec{Bandwidth{12.5e9}, Time::us(1)}});
  Engine engine;
  FluidNetwork net(engine, topo, Sharing::kMaxMin);
  TrainingParams p;
  p.allocation = allocation;
  p.sync = sync;
  p.batch_per_worker = 32;
  p.iterations = 12;
  p.cache_rows = cache_rows;
  p.pull_bound = pull_bound;
  p.push_bound = push_bound;
  p.compute_per_sample = Time::us(2);
  for (std::size_t w = 0; w < workers; ++w) p.workers.push_back(topo.hosts()[w]);
  for (std::size_t s = 0; s < servers; ++s) p.servers.push_back(topo.hosts()[workers + s]);
  p.row_meta_bytes = meta;
  NodeHardware no_gpus;  // fixed work needs no GPU type
  HostSpeeds speeds(topo.nodes().size());
  CostModel costs;
  Compute compute(engine, no_gpus, speeds, costs);
  EmbeddingTraining t(engine, net, compute, p,
                      std::make_unique<ZipfSource>(8, 2000, 1.05, RandomStream(seed, "samples")));
  PropertyOutcome o;
  t.set_on_delivered([&o](std::size_t iteration, std::size_t worker, Key row) {
    if (!o.delivered.emplace(iteration, worker, row).second) ++o.duplicates;
  });
  t.start();
  engine.run();
  Results r;
  t.report(r);
  EXPECT_TRUE(t.finished());
  EXPECT_TRUE(t.directory_matches_caches());
  o.counters = t.counters();
  o.totals = net.totals();
  o.metrics = r.metrics();
  o.messages = t.embedding_messages();
  return o;
}

}  // namespace

TEST(EmbcacheProperties, AccessesAreAccountedAndNothingIsLost) {
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    for (auto [allocation, sync] : {std::pair{Allocation::kSequential, Sync::kEager},
                                    std::pair{Allocation::kLocationAware, Sync::kOnDemand},
                                    std::pair{Allocation::kSequential, Sync::kOnDemand},
                                    std::pair{Allocation::kLocationAware, Sync::kEager}}) {
      const std::size_t workers = 2 + seed % 4, cache = 50 + 100 * (seed % 5);
      const PropertyOutcome o = property_run(allocation, sync, seed, workers, cache);
      const Counters& c = o.counters;
      EXPECT_EQ(c.hits + c.misses + c.outdated_pulls, c.accesses) << seed;
      EXPECT_EQ(c.pushes, c.accesses);  // one gradient row per distinct row used
      EXPECT_EQ(c.eager_sync_violations, 0u);
      if (sync == Sync::kOnDemand) {
        EXPECT_EQ(c.refreshes, 0u);
      }
      EXPECT_EQ(o.totals.bytes_started, o.totals.bytes_delivered);
      EXPECT_EQ(o.totals.transfers_failed, 0u);
      EXPECT_EQ(o.totals.bytes_delivered.count, static_cast<std::int64_t>(c.transmissions()) * 512);
    }
  }
}

// Hetu's bounded cache with both bounds 0 is BSP-exact: it pulls and pushes exactly the rows
// on-demand sync does, under either allocation. Looser bounds never transmit more pulls, and
// every access is still a hit, a miss or an outdated pull.
TEST(EmbcacheProperties, BoundedStalenessAtZeroIsOnDemandAndLooserBoundsPullLess) {
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    const std::size_t workers = 2 + seed % 4, cache = 50 + 100 * (seed % 5);
    for (Allocation a : {Allocation::kSequential, Allocation::kLocationAware}) {
      const PropertyOutcome zero = property_run(a, Sync::kBounded, seed, workers, cache);
      const PropertyOutcome on_demand = property_run(a, Sync::kOnDemand, seed, workers, cache);
      EXPECT_EQ(zero.counters.misses, on_demand.counters.misses) << seed;
      EXPECT_EQ(zero.counters.outdated_pulls, on_demand.counters.outdated_pulls) << seed;
      EXPECT_EQ(zero.counters.pushes, on_demand.counters.pushes) << seed;
    }
    const PropertyOutcome zero =
        property_run(Allocation::kSequential, Sync::kBounded, seed, workers, cache);
    const PropertyOutcome loose =
        property_run(Allocation::kSequential, Sync::kBounded, seed, workers, cache, 3, 0);
    EXPECT_LE(loose.counters.outdated_pulls, zero.counters.outdated_pulls) << seed;
    const PropertyOutcome lazy =
        property_run(Allocation::kSequential, Sync::kBounded, seed, workers, cache, 0, 3);
    const Counters& c = lazy.counters;
    EXPECT_EQ(c.hits + c.misses + c.outdated_pulls, c.accesses) << seed;
    EXPECT_LT(c.pushes, c.accesses) << seed;  // pushes deferred up to 4 updates
    EXPECT_EQ(lazy.totals.bytes_delivered.count,
              static_cast<std::int64_t>(c.transmissions()) * 512);
  }
}

// Hetu's messages over several servers (ps-lite's range partition): every row a pull requests
// is delivered exactly once, by the one server that holds it, and which rows move never depends
// on the number of servers; only the messages do. Payload: every used row's index and version
// in the pull request (16 B), index, version and values in responses and pushes (528 B), and a
// refresh's request and response; messages: one round trip per server with rows, per worker and
// phase.
TEST(EmbcacheProperties, EveryRequestedRowIsDeliveredExactlyOnceWhateverTheServers) {
  constexpr std::int64_t kMeta = 16, kRow = 512;
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    for (auto [allocation, sync] : {std::pair{Allocation::kSequential, Sync::kEager},
                                    std::pair{Allocation::kLocationAware, Sync::kOnDemand},
                                    std::pair{Allocation::kSequential, Sync::kBounded}}) {
      const std::size_t workers = 2 + seed % 3, cache = 50 + 100 * (seed % 4);
      const PropertyOutcome one =
          property_run(allocation, sync, seed, workers, cache, 0, 0, 1, kMeta);
      for (std::size_t servers : {1u, 2u, 3u, 5u}) {
        const PropertyOutcome o =
            property_run(allocation, sync, seed, workers, cache, 0, 0, servers, kMeta);
        const Counters& c = o.counters;
        EXPECT_EQ(o.duplicates, 0u) << seed << " " << servers;
        EXPECT_EQ(o.delivered.size(), c.misses + c.outdated_pulls) << seed << " " << servers;
        EXPECT_EQ(o.delivered, one.delivered) << seed << " " << servers;
        EXPECT_EQ(c.transmissions(), one.counters.transmissions());
        const auto n = [](std::uint64_t v) { return static_cast<std::int64_t>(v); };
        EXPECT_EQ(
            o.totals.bytes_delivered.count,
            kMeta * n(c.accesses) + (kRow + kMeta) * n(c.transmissions()) + kMeta * n(c.refreshes))
            << seed << " " << servers;
        EXPECT_EQ(o.totals.bytes_started, o.totals.bytes_delivered);
        // 12 iterations; a pull and a push round trip per worker to at least one server, at most
        // to every server, plus at most a refresh round trip.
        const std::uint64_t round_trips = o.messages / 2;
        EXPECT_EQ(o.messages % 2, 0u);
        EXPECT_GE(round_trips, 12 * workers * 2);
        EXPECT_LE(round_trips, 12 * workers * 3 * servers);
        if (servers == 1)
          EXPECT_LE(round_trips, 12 * workers * 3);
        else
          EXPECT_GE(o.messages, one.messages);  // rows spread over more servers: more messages
      }
    }
  }
}

TEST(EmbcacheProperties, AllocationPlacesEverySampleOnceWithinTheCap) {
  RandomStream rng(3, "alloc");
  for (int trial = 0; trial < 50; ++trial) {
    const std::size_t workers = 1 + rng.below(6), per = 1 + rng.below(8);
    std::vector<Sample> batch(workers * per);
    for (Sample& s : batch)
      for (int f = 0; f < 4; ++f) s.push_back(rng.below(20));
    // Bits beyond the worker count must be ignored.
    auto fresh = [&](Key k) -> std::uint64_t { return (k * 0x9E3779B97F4A7C15ULL) >> 56; };
    const SampleAssignment a = location_aware_allocation(batch, workers, trial, fresh);
    std::vector<int> seen(batch.size(), 0);
    for (const auto& list : a) {
      EXPECT_LE(list.size(), per);
      for (std::size_t j : list) ++seen[j];
    }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
  }
}

TEST(EmbcacheProperties, SameSeedSameRun) {
  EXPECT_EQ(property_run(Allocation::kLocationAware, Sync::kOnDemand, 5, 4, 200).metrics,
            property_run(Allocation::kLocationAware, Sync::kOnDemand, 5, 4, 200).metrics);
}
