// Invariants of the commsched model on random jobs: every chunk of every worker's gradient starts
// and completes exactly once per iteration, the credit window holds, iterations move forward,
// every byte sent is delivered; and a run with AutoByte's learned predictor is deterministic.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <tuple>

#include "models/commsched/tuners.hpp"
#include "sim_core/engine/random.hpp"
#include "tests/commsched/test_support.hpp"

using namespace mlsim;
using namespace mlsim::commsched;
using namespace mlsim::commsched::testing;

namespace {

std::vector<Layer> random_layers(RandomStream& rng) {
  std::vector<Layer> layers;
  const auto n = 2 + rng.below(8);
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto params = rng.below(4) == 0 ? 0 : static_cast<std::int64_t>(1 + rng.below(3'000'000));
    layers.push_back(layer(0.01 + 0.1 * rng.uniform(), 0.01 + 0.2 * rng.uniform(), params));
  }
  return layers;
}

// `fixed`: the configuration of the whole run (credit and chunk-count checks); nothing when a
// tuner changed it.
void check_invariants(const TrainingJob& job, std::optional<SchedulerConfig> fixed) {
  const SchedulerConfig config = fixed.value_or(SchedulerConfig{0, 0});
  const JobSpec& spec = job.spec();
  ASSERT_TRUE(job.finished());
  // Each (owner, iteration, layer, chunk) starts once and completes once, after its start.
  std::map<std::tuple<std::size_t, std::size_t, std::uint32_t, std::uint32_t>, int> started,
      completed;
  std::int64_t max_chunk = 0;
  for (const ChunkEvent& e : job.trace()) {
    const auto key = std::tuple{e.worker, e.iteration, e.chunk.layer, e.chunk.index};
    max_chunk = std::max(max_chunk, e.chunk.parameters);
    if (e.kind == ChunkEvent::Kind::kStart) {
      EXPECT_EQ(completed.count(key), 0u);
      ++started[key];
      // Popped only with positive credit: after charging, above -(one chunk).
      if (config.credit > 0) {
        EXPECT_GT(e.credit_left + e.chunk.parameters, 0);
      }
    } else {
      EXPECT_EQ(started[key], 1);
      ++completed[key];
    }
    if (config.credit > 0) {
      EXPECT_LE(e.credit_left, config.credit);
    }
  }
  EXPECT_EQ(started, completed);
  for (const auto& [key, n] : started) EXPECT_EQ(n, 1);
  // Every layer with parameters, every iteration, every owner (each worker in PS, the job in
  // all-reduce) with the partition's number of chunks.
  const std::size_t owners = spec.mode == Mode::kParameterServer ? spec.workers.size() : 1;
  std::size_t expected = 0;
  for (const Layer& l : spec.layers)
    expected += partition_tensor(l.parameters, config.partition).size();
  if (fixed) {
    EXPECT_EQ(started.size(), expected * owners * spec.iterations);
  }
  // Iterations move forward, and the run ends after the last one starts.
  const auto& starts = job.iteration_starts();
  ASSERT_EQ(starts.size(), spec.iterations);
  for (std::size_t i = 1; i < starts.size(); ++i) EXPECT_LT(starts[i - 1], starts[i]);
  EXPECT_LT(starts.back(), job.finish_time());
  EXPECT_EQ(job.bytes_sent(), job.bytes_delivered());
}

}  // namespace

TEST(CommschedProperties, RandomParameterServerJobs) {
  RandomStream rng(7, "commsched-ps");
  for (int trial = 0; trial < 30; ++trial) {
    const int workers = 1 + static_cast<int>(rng.below(3));
    const int servers = 1 + static_cast<int>(rng.below(3));
    Bench b(workers + servers, trial % 2 ? Sharing::kMaxMin : Sharing::kNone, Time::us(5));
    const auto kind = rng.below(3) == 0 ? SchedulerKind::kFifo : SchedulerKind::kByteScheduler;
    JobSpec spec = b.spec(Mode::kParameterServer, kind, random_layers(rng), workers, servers,
                          1 + rng.below(4));
    spec.bigarray_bound = 1 + static_cast<std::int64_t>(rng.below(2'000'000));
    spec.message_overhead = Time::us(static_cast<std::int64_t>(rng.below(50)));
    spec.fifo_engines = static_cast<int>(rng.below(4));  // 0: no limit
    spec.credit_delay = Time::us(static_cast<std::int64_t>(rng.below(2) * rng.below(20'000)));
    // ps-lite's in-order connections or shared links: the invariants hold either way.
    spec.ps_connections = trial % 3 == 0 ? PsConnections::kShared : PsConnections::kInOrder;
    const int engines = spec.fifo_engines;
    const SchedulerConfig config =
        kind == SchedulerKind::kFifo
            ? fifo_config(Mode::kParameterServer)
            : SchedulerConfig{static_cast<std::int64_t>(1 + rng.below(2'000'000)),
                              static_cast<std::int64_t>(1 + rng.below(4'000'000))};
    SCOPED_TRACE("trial " + std::to_string(trial));
    const TrainingJob& job = b.run(std::move(spec), config);
    check_invariants(job, config);
    EXPECT_EQ(b.network.totals().bytes_delivered.count, job.bytes_delivered());
    if (kind == SchedulerKind::kFifo && engines > 0) {  // never more tensors out than engines
      std::map<std::size_t, int> out;
      for (const ChunkEvent& e : job.trace()) {
        out[e.worker] += e.kind == ChunkEvent::Kind::kStart ? 1 : -1;
        EXPECT_LE(out[e.worker], engines);
      }
    }
  }
}

TEST(CommschedProperties, RandomAllReduceJobs) {
  RandomStream rng(11, "commsched-ar");
  for (int trial = 0; trial < 30; ++trial) {
    const int workers = 1 + static_cast<int>(rng.below(4));
    Bench b(workers, Sharing::kMaxMin, Time::us(5));
    const auto kind = rng.below(3) == 0 ? SchedulerKind::kFifo : SchedulerKind::kByteScheduler;
    JobSpec spec = b.spec(Mode::kAllReduce, kind, random_layers(rng), workers, 0, 1 + rng.below(4));
    const SchedulerConfig config =
        kind == SchedulerKind::kFifo
            ? fifo_config(Mode::kAllReduce)
            : SchedulerConfig{static_cast<std::int64_t>(1 + rng.below(2'000'000)),
                              static_cast<std::int64_t>(1 + rng.below(4'000'000))};
    SCOPED_TRACE("trial " + std::to_string(trial));
    const TrainingJob& job = b.run(std::move(spec), config);
    check_invariants(job, config);
  }
}

TEST(CommschedProperties, AutoByteRunsAreDeterministicAndKeepInvariants) {
  auto run = [](std::vector<double>& times, std::vector<ConfigChange>& changes) {
    Bench b(4);
    JobSpec spec = b.autobyte_ps_spec();
    b.straggle(1, 2.0, Time::s(20), Time::s(60));
    AutoByteParams params;
    params.grid = {{1'000'000, 4'000'000}, {2'000'000, 8'000'000}};
    params.interval = 4;
    params.restart_cost = Time::s(1);
    const LinkId up = b.topology.out_links(b.topology.hosts()[0])[0];
    AutoByte tuner(params, b.network, Probe{up, up, Time::zero()}, Sharing::kMaxMin);
    const SchedulerConfig start{1'000'000, 4'000'000};
    const TrainingJob& job = b.run(std::move(spec), start, &tuner);
    check_invariants(job, std::nullopt);
    EXPECT_FALSE(tuner.decisions().empty());
    // Pre-trained once on every grid point under four conditions, then one online sample per
    // decision that has a full interval behind it.
    EXPECT_EQ(tuner.pretraining_samples(), 4 * params.grid.points().size());
    std::size_t online = 0;
    for (const AutoByteDecision& d : tuner.decisions()) online += d.measured_iteration_s > 0;
    EXPECT_EQ(tuner.meta_network().samples(), tuner.pretraining_samples() + online);
    EXPECT_GT(online, 0u);
    times = job.iteration_seconds();
    changes = job.changes();
  };
  std::vector<double> t1, t2;
  std::vector<ConfigChange> c1, c2;
  run(t1, c1);
  run(t2, c2);
  EXPECT_EQ(t1, t2);
  ASSERT_EQ(c1.size(), c2.size());
  for (std::size_t i = 0; i < c1.size(); ++i) EXPECT_EQ(c1[i].to, c2[i].to);
}
