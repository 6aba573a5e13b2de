// Properties of the training core over random jobs (every scheduler with every strategy):
// every gradient parameter of every worker is synchronised exactly once per iteration, every
// chunk started gives its credit back exactly once, the network carries what the strategy
// implies, and the job finishes.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <random>
#include <tuple>

#include "tests/training/test_support.hpp"

using namespace mlsim;
using namespace mlsim::training;
using namespace mlsim::training::testing;

TEST(Properties, EveryGradientParameterIsSynchronisedOncePerIteration) {
  std::mt19937_64 rng(13);
  auto uniform = [&](double a, double b) { return std::uniform_real_distribution<>(a, b)(rng); };
  auto integer = [&](std::int64_t a, std::int64_t b) {
    return std::uniform_int_distribution<std::int64_t>(a, b)(rng);
  };
  for (int trial = 0; trial < 60; ++trial) {
    const bool ps = trial % 2 == 0;
    // The all-reduce trials take ring, tree, RAT (one region on the star) and the distributed
    // optimizer's reduce-scatter + all-gather in turn, each with both schedulers.
    const std::string sync =
        ps ? "ps" : std::array{"ring", "tree", "rat", "reduce_scatter_all_gather"}[(trial / 2) % 4];
    const bool fifo = trial % 4 < 2;
    const int workers = static_cast<int>(integer(1, 4));
    const int servers = ps ? static_cast<int>(integer(1, 3)) : 0;
    std::vector<Layer> layers;
    for (std::int64_t l = integer(1, 5); l > 0; --l)
      layers.push_back({uniform(0.05, 1), uniform(0.05, 1), integer(0, 3) * integer(0, M)});
    const auto iterations = static_cast<std::size_t>(integer(1, 3));
    const SchedulerConfig config{integer(0, 1) * integer(1, 2 * M),
                                 integer(0, 1) * integer(1, 4 * M)};
    SCOPED_TRACE(::testing::Message()
                 << "trial " << trial << " " << sync << (fifo ? " fifo" : " bytescheduler")
                 << " workers " << workers << " partition " << config.partition << " credit "
                 << config.credit);
    Job job(workers, servers, layers, iterations, fifo ? "fifo" : "bytescheduler", sync, config);
    job.run();
    ASSERT_TRUE(job.core->finished());

    // Per (owner, layer): parameters started, released, arrived. An all-reduce chunk arrives on
    // every worker at once (owner 0).
    std::map<std::pair<std::size_t, std::uint32_t>, std::int64_t> started, released, arrived;
    for (const auto& s : job.tap.starts) started[{s.owner, s.chunk.layer}] += s.chunk.parameters;
    for (const auto& r : job.tap.reports) {
      if (r.release) released[{r.owner, r.chunk.layer}] += r.chunk.parameters;
      if (r.arrived) arrived[{r.owner, r.chunk.layer}] += r.chunk.parameters;
    }
    std::int64_t total = 0;
    const std::size_t owners = ps ? static_cast<std::size_t>(workers) : 1;
    for (std::uint32_t l = 0; l < layers.size(); ++l) {
      total += layers[l].parameters;
      const std::int64_t expected = layers[l].parameters * static_cast<std::int64_t>(iterations);
      for (std::size_t o = 0; o < owners; ++o) {
        EXPECT_EQ((started[std::pair{o, l}]), expected) << "layer " << l << " owner " << o;
        EXPECT_EQ((released[std::pair{o, l}]), expected) << "layer " << l << " owner " << o;
        EXPECT_EQ((arrived[std::pair{o, l}]), expected) << "layer " << l << " owner " << o;
      }
      for (std::size_t w = 0; w < static_cast<std::size_t>(workers); ++w)
        EXPECT_EQ(job.core->updates(w, l), iterations);
    }
    // PS: every worker pushes and pulls every parameter; ring: 2 (N - 1) steps each moving the
    // whole tensor once around the ring; tree and RAT on one region: each of the N - 1 workers
    // other than the root (the region's aggregator) sends the tensor up once and receives the
    // sum once; reduce-scatter and all-gather: N - 1 ring steps each, every worker sending a
    // 1/N segment a step, so (N - 1) x the tensor each, as the ring's two halves.
    const std::int64_t bytes = total * 4 * static_cast<std::int64_t>(iterations);
    EXPECT_EQ(job.strategy->bytes_delivered(),
              ps ? 2 * workers * bytes : 2 * (workers - 1) * bytes);
    EXPECT_EQ(job.strategy->bytes_sent(), job.strategy->bytes_delivered());
    EXPECT_EQ(job.core->iteration_starts().size(), iterations);
  }
}

// ps-lite's in-order connections (SyncOptions::in_order_connections) over random PS jobs, FIFO
// and ByteScheduler, random sizes, partitions, credits, big-array bounds and per-message delays:
// every worker pushes and pulls every parameter once per iteration, and on each (worker, server)
// connection at most one push is on the wire at a time, the pushes in the order the worker's
// scheduler started their chunks (a chunk above the bound as one slice per server).
TEST(Properties, PsLiteConnectionsKeepEachWorkersOrderPerServer) {
  std::mt19937_64 rng(29);
  auto uniform = [&](double a, double b) { return std::uniform_real_distribution<>(a, b)(rng); };
  auto integer = [&](std::int64_t a, std::int64_t b) {
    return std::uniform_int_distribution<std::int64_t>(a, b)(rng);
  };
  for (int trial = 0; trial < 40; ++trial) {
    const bool fifo = trial % 2 == 0;
    const int workers = static_cast<int>(integer(1, 4));
    const int servers = static_cast<int>(integer(1, 3));
    std::vector<Layer> layers;
    for (std::int64_t l = integer(1, 6); l > 0; --l)
      layers.push_back({uniform(0.05, 1), uniform(0.05, 1), integer(0, 3) * integer(0, M)});
    const auto iterations = static_cast<std::size_t>(integer(1, 3));
    const SchedulerConfig config{integer(0, 1) * integer(1, 2 * M),
                                 integer(0, 1) * integer(1, 4 * M)};
    const std::int64_t bound = integer(0, 1) ? integer(1, 2 * M) : 1'000'000'000;
    const Time latency = Time::us(integer(0, 1) * integer(0, 50'000));
    SCOPED_TRACE(::testing::Message()
                 << "trial " << trial << (fifo ? " fifo" : " bytescheduler") << " workers "
                 << workers << " servers " << servers << " partition " << config.partition
                 << " credit " << config.credit << " bound " << bound);
    Job job(workers, servers, layers, iterations, fifo ? "fifo" : "bytescheduler", "ps", config,
            false, [&](SyncOptions& o) {
              o.in_order_connections = true;
              o.bigarray_bound = bound;
              o.host.message_latency = latency;
            });
    job.run();
    ASSERT_TRUE(job.core->finished());

    // Every byte pushed and pulled once per iteration and worker.
    std::int64_t total = 0;
    for (const Layer& l : layers) total += l.parameters;
    const std::int64_t bytes = total * 4 * static_cast<std::int64_t>(iterations);
    EXPECT_EQ(job.strategy->bytes_delivered(), 2 * workers * bytes);
    EXPECT_EQ(job.strategy->bytes_sent(), job.strategy->bytes_delivered());

    // The expected pushes per (worker, server), in start order: keys numbered over (layer,
    // chunk); a chunk above the bound sliced evenly over the servers (empty slices not sent).
    const std::int64_t partition = fifo ? 0 : config.partition;  // FIFO sends whole tensors
    std::vector<std::size_t> first_key(layers.size(), 0);
    for (std::size_t l = 1; l < layers.size(); ++l)
      first_key[l] =
          first_key[l - 1] + partition_tensor(layers[l - 1].parameters, partition).size();
    std::map<std::pair<NodeId, NodeId>, std::vector<std::int64_t>> expected, seen;
    for (const auto& s : job.tap.starts) {
      const NodeId w = job.topology.hosts()[s.owner];
      const std::int64_t p = s.chunk.parameters;
      if (p > bound) {
        for (std::int64_t k = 0; k < servers; ++k) {
          const std::int64_t values = p / servers + (k < p % servers ? 1 : 0);
          if (values > 0) expected[{w, job.topology.hosts()[workers + k]}].push_back(values * 4);
        }
      } else {
        const std::size_t key = first_key[s.chunk.layer] + s.chunk.index;
        expected[{w, job.topology.hosts()[workers + key % servers]}].push_back(p * 4);
      }
    }
    std::vector<TransferResult> pushes;
    for (const TransferResult& t : job.recorder.transfers)
      for (int w = 0; w < workers; ++w)
        if (t.src == job.topology.hosts()[w]) pushes.push_back(t);
    std::sort(pushes.begin(), pushes.end(), [](const TransferResult& a, const TransferResult& b) {
      return std::tie(a.started, a.id) < std::tie(b.started, b.id);
    });
    std::map<std::pair<NodeId, NodeId>, Time> free_at;
    for (const TransferResult& t : pushes) {
      ASSERT_FALSE(t.failed);
      const std::pair<NodeId, NodeId> conn{t.src, t.dst};
      seen[conn].push_back(t.bytes.count);
      if (auto it = free_at.find(conn); it != free_at.end()) {
        EXPECT_GE(t.started, it->second) << "two pushes at once on one connection";
      }
      free_at[conn] = t.finished;
    }
    // A slice of a sliced chunk is whole in one message; the expected order per connection is
    // the order of the scheduler's starts.
    for (auto& [conn, sizes] : expected)
      EXPECT_EQ(seen[conn], sizes) << "connection " << conn.first << " -> " << conn.second;
    EXPECT_EQ(seen.size(), expected.size());
  }
}
