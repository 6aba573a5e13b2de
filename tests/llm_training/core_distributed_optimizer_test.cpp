// The distributed optimizer (Megatron-LM's --use-distributed-optimizer, `dp_sync:
// "reduce_scatter_all_gather"`) on the training core (models/training/
// reduce_scatter_all_gather_sync.hpp through MegatronCoreJob), by hand, and on the execution
// graph for comparison.
#include <gtest/gtest.h>

#include "models/llm_training/megatron_core_job.hpp"
#include "models/llm_training/megatron_source.hpp"
#include "sim_core/workload/graph_executor.hpp"
#include "tests/llm_training/core_bench.hpp"

namespace mlsim::llm_training {
namespace {

// `hosts` one-GPU hosts on a star whose every link runs at 1e9 B/s with 10 us of latency (a host
// to another: two links, 20 us); every collective pays a 5 us launch and the Simple protocol's
// 2 us per hop (core_bench.hpp) [assumed, round figures for the hand computation].
core_bench::CoreBenchOptions dist_opt_bench(int hosts) {
  return {.hosts = hosts, .star_latency = Time::us(10), .gpus_per_host = 1, .nvswitch = false};
}

// One layer: forward 1 ms, backward 2 ms (attention kernels only; no embedding or head).
StageKernels dist_opt_kernels() {
  StageKernels k;
  k.attention_forward = {FixedWork{Time::ms(1)}};
  k.attention_backward = {FixedWork{Time::ms(2)}};
  return k;
}

// TP 1, PP 1, DP 2, two micro-batches, one layer whose gradients are 1 MB per GPU.
ParallelLayout dist_opt_layout(DpSync sync) {
  ParallelLayout l;
  l.dp = 2;
  l.micro_batches = 2;
  l.first_stage_grads = l.middle_stage_grads = l.last_stage_grads = Bytes{1'000'000};
  l.dp_sync = sync;
  return l;
}

// By hand. Each worker runs F0 B0 F1 B1: 6 ms. Then, over the two workers:
//   reduce-scatter: launch 5 us; one ring step, each worker sending its other half, 500 kB, to
//     the other (the two directions of every link are separate): 0.5 ms on the wire + 20 us of
//     route latency + the 2 us hop: ends at 6 + 0.005 + 0.522 = 6.527 ms;
//   all-gather (starts at once): launch 5 us, one step of 500 kB, 0.522 ms: ends at 7.054 ms.
// The all-reduce (dp_sync all_reduce) is one collective of two steps: 6 + 0.005 + 2 x 0.522 =
// 7.049 ms, one launch fewer. Both move 2 (n - 1)/n x 1 MB per worker, 2 MB in all, in four
// messages.
TEST(DistributedOptimizerOnTheCore, TwoDpRanksOfOneLayerTakeTheHandComputedTimes) {
  for (const DpSync sync : {DpSync::kReduceScatterAllGather, DpSync::kAllReduce}) {
    const ParallelLayout l = dist_opt_layout(sync);
    core_bench::CoreBench b(l, dist_opt_bench(2));
    MegatronCoreOptions options = b.core_options();
    MegatronCoreJob job(b.engine, b.net, b.compute, l, dist_opt_kernels(), b.topo.hosts(), options,
                        [] { ADD_FAILURE(); });
    job.start();
    b.engine.run();
    ASSERT_TRUE(job.finished());
    const bool distributed = sync == DpSync::kReduceScatterAllGather;
    EXPECT_EQ(job.finish_time(), distributed ? Time::us(7'054) : Time::us(7'049));
    EXPECT_EQ(job.gradients().bytes_delivered(), 2'000'000);
    EXPECT_EQ(job.gradients().bytes_sent(), 2'000'000);
    EXPECT_EQ(job.gradients().messages(), 4u);
  }
}

// The same case on the execution graph: its reduce-scatter and all-gather nodes take the same
// 7.054 ms.
TEST(DistributedOptimizerOnTheCore, TheGraphTakesTheSameHandComputedTime) {
  const ParallelLayout l = dist_opt_layout(DpSync::kReduceScatterAllGather);
  core_bench::CoreBench b(l, dist_opt_bench(2));
  const auto run = b.run_graph(l, dist_opt_kernels());
  ASSERT_TRUE(run.executor->done());
  const Time end = run.end;
  EXPECT_EQ(end, Time::us(7'054));
  EXPECT_EQ(run.executor->counts().network_collectives, 2u);
}

// Three DP ranks, one iteration after another: the strategy rearms its two collectives for the
// second iteration. DP 3 on three hosts of the star, 900 kB of gradients: each ring step moves
// 300 kB, 0.3 ms + 22 us; two steps per phase: reduce-scatter 5 + 2 x 322 = 649 us, all-gather
// the same, 1.298 ms after each iteration's 6 ms of compute, which the next iteration's first
// forward waits for: 2 x 7.298 = 14.596 ms. Each phase delivers (n - 1) x 900 kB = 1.8 MB (every
// worker receives two 300 kB segments): 2 phases x 2 iterations = 7.2 MB.
TEST(DistributedOptimizerOnTheCore, ThreeRanksOverTwoIterationsRearmTheirCollectives) {
  ParallelLayout l = dist_opt_layout(DpSync::kReduceScatterAllGather);
  l.dp = 3;
  l.iterations = 2;
  l.first_stage_grads = l.middle_stage_grads = l.last_stage_grads = Bytes{900'000};
  core_bench::CoreBench b(l, dist_opt_bench(3));
  MegatronCoreOptions options = b.core_options();
  MegatronCoreJob job(b.engine, b.net, b.compute, l, dist_opt_kernels(), b.topo.hosts(), options,
                      [] { ADD_FAILURE(); });
  job.start();
  b.engine.run();
  ASSERT_TRUE(job.finished());
  EXPECT_EQ(job.finish_time(), Time::us(14'596));
  EXPECT_EQ(job.gradients().bytes_delivered(), 7'200'000);
}

}  // namespace
}  // namespace mlsim::llm_training
