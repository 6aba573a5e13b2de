// Properties of the training core over random jobs (every scheduler with every strategy):
// every gradient parameter of every worker is synchronised exactly once per iteration, every
// chunk started gives its credit back exactly once, the network carries what the strategy
// implies, and the job finishes.
#include <gtest/gtest.h>

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
