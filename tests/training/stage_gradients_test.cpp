// The per-stage gradient path of a pipeline on the training core
// (models/training/stage_gradients.hpp) by hand: three workers on a star of 4e6 bytes/s links,
// stage 0 (layer 0) on workers 0 and 1, stage 1 (layer 1) on worker 2, 1F1B over two
// micro-batches, every forward 1 s and every backward 2 s, activations and gradients between the
// stages delivered at once (the test's observer).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "models/training/pipeline_schedule.hpp"
#include "models/training/stage_gradients.hpp"
#include "tests/training/test_support.hpp"

using namespace mlsim;
using namespace mlsim::training;

namespace {

// As test_support.hpp's: 4e6 bytes/s, a million fp32 parameters per second.
constexpr double kStageBandwidth = mlsim::training::testing::kBandwidth;
constexpr std::int64_t kStageParameters = mlsim::training::testing::M;

struct StagePipe final : mlsim::test::PlatformBench, OpObserver {
  StagePipe()
      : mlsim::test::PlatformBench(
            build_topology(StarSpec{3, LinkSpec{Bandwidth{kStageBandwidth}, Time::zero()}})),
        schedule(PipelineSchedule::Kind::kOneFOneB, {0, 1, 2}, {2, 1}, 3, 2) {
    JobSpec spec;
    spec.parameters = {kStageParameters, kStageParameters};
    spec.workers = {topology.hosts()[0], topology.hosts()[1], topology.hosts()[2]};
    spec.layer_seconds.assign(3, {{1, 2}, {1, 2}});
    core = std::make_unique<DataParallelJob>(engine, compute, spec);
    const TrainingPolicies& p = training_policies();
    StageGradients::Setup setup{p.schedulers.get("fifo", "").value, SchedulerConfig{},
                                p.syncs.get("ring", "").value, SyncOptions{}};
    gradients = std::make_unique<StageGradients>(engine, network, *core, schedule, setup,
                                                 [this] { failed = true; });
    core->set_schedule(&schedule);
    core->set_gradient_sink(gradients.get());
    core->set_op_observer(this);
  }

  void op_done(std::size_t w, const ScheduledOp& op) override {
    const auto& wk = schedule.worker(w);
    const std::size_t m = wk.replica + op.micro_batch * wk.replicas;  // the stage's numbering
    if (op.forward && wk.stage == 0) {
      const auto [to, k] = schedule.worker_of(1, m);
      engine.schedule_in(Time::zero(), [this, to, k] { core->input_arrived(to, k, true); });
    }
    if (!op.forward && wk.stage == 1) {
      const auto [to, k] = schedule.worker_of(0, m);
      engine.schedule_in(Time::zero(), [this, to, k] { core->input_arrived(to, k, false); });
    }
  }

  PipelineSchedule schedule;
  std::unique_ptr<DataParallelJob> core;
  std::unique_ptr<StageGradients> gradients;
  bool failed = false;
};

}  // namespace

// Stage 0's in-flight limit is (3 - 1 - 0) / 2 + 1 = 2, stage 1's 1; micro-batch 0 goes to
// worker 0, micro-batch 1 to worker 1.
//   w0: F0 [0,1]; w1: F1 [0,1]
//   w2: F0 [1,2] B0 [2,4]: stage 1 has one replica, so layer 1 is updated at once and F1 [4,5]
//       needs no wait; B1 [5,7]
//   w0: B0 [4,6]; w1: B1 [7,9]: the ring of stage 0 starts once both handed layer 0 over: two
//       steps of 4 MB / 2 at 4e6 bytes/s, 0.5 s each, over disjoint link directions: done at 10 s.
// Only stage 0's two workers exchange bytes: 2 (2 - 1) x 4 MB = 8 MB, not a three-worker ring's.
TEST(StageGradients, EachStageSynchronisesAmongItsOwnReplicasOnly) {
  StagePipe p;
  p.core->start();
  p.engine.run();
  EXPECT_TRUE(p.core->finished());
  EXPECT_EQ(p.core->finish_time(), Time::s(10));
  EXPECT_EQ(p.gradients->bytes_delivered(), 8'000'000);
  EXPECT_EQ(p.gradients->bytes_sent(), 8'000'000);
  EXPECT_EQ(p.gradients->last_event(), Time::s(10));
  EXPECT_EQ(p.core->updates(2, 1), 2u);  // one local update per backward
  EXPECT_EQ(p.core->updates(0, 0), 1u);  // one ring per replica's backward
  EXPECT_EQ(p.core->updates(1, 0), 1u);
  EXPECT_FALSE(p.failed);
}

// Replica groups (Setup::replica_groups, a Megatron job's DP groups with TP not collapsed): one
// stage of four replicas on four hosts of the star, two groups, replica i in group i mod 2, so
// workers 0 and 2 synchronise together and 1 and 3 together. One micro-batch each: forward 1 s,
// backward 2 s (worker 2's 3 s). Each group's ring of 4 MB over two members: two steps of 2 MB at
// 4e6 bytes/s, 0.5 s each, on links no other group uses: workers 1 and 3 are done at 3 + 1 = 4 s,
// workers 0 and 2 at 4 + 1 = 5 s (worker 0 waits for worker 2). 2 x 2 (2 - 1) x 4 MB / 2 x 2 =
// 16 MB in all. One ring over all four (one group) would move 2 (4 - 1) x 4 MB = 24 MB and end
// everyone together; groups of consecutive replicas (0, 1 and 2, 3) would end worker 0 at 4 s
// and worker 3 at 5 s.
TEST(StageGradients, ReplicaGroupsSynchroniseApart) {
  mlsim::test::PlatformBench b(
      build_topology(StarSpec{4, LinkSpec{Bandwidth{kStageBandwidth}, Time::zero()}}));
  PipelineSchedule schedule(PipelineSchedule::Kind::kOneFOneB, {0, 1}, {4}, 4, 4);
  JobSpec spec;
  spec.parameters = {kStageParameters};
  spec.workers = b.topology.hosts();
  spec.layer_seconds.assign(4, {{1, 2}});
  spec.layer_seconds[2] = {{1, 3}};
  DataParallelJob core(b.engine, b.compute, spec);
  const TrainingPolicies& p = training_policies();
  StageGradients::Setup setup{p.schedulers.get("fifo", "").value, SchedulerConfig{},
                              p.syncs.get("ring", "").value, SyncOptions{}};
  setup.replica_groups = 2;
  bool failed = false;
  StageGradients gradients(b.engine, b.network, core, schedule, setup, [&] { failed = true; });
  core.set_schedule(&schedule);
  core.set_gradient_sink(&gradients);
  core.start();
  b.engine.run();
  ASSERT_TRUE(core.finished());
  EXPECT_EQ(core.finish_time(), Time::s(5));
  EXPECT_EQ(core.last_update(0), Time::s(5));
  EXPECT_EQ(core.last_update(2), Time::s(5));
  EXPECT_EQ(core.last_update(1), Time::s(4));
  EXPECT_EQ(core.last_update(3), Time::s(4));
  EXPECT_EQ(gradients.bytes_delivered(), 16'000'000);
  for (std::size_t w = 0; w < 4; ++w) EXPECT_EQ(core.updates(w, 0), 1u) << w;
  EXPECT_FALSE(failed);
}
