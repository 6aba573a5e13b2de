// The core's op schedules by hand (models/training/op_schedule.hpp, pipeline_schedule.hpp): a
// pipeline of two stages, one worker each, three micro-batches, on the training core. The test's
// observer plays the model: after a forward of stage 0 its activation reaches stage 1 0.5 s
// later, after a backward of stage 1 its gradient reaches stage 0 0.5 s later (and, for an op that
// ends_after_send, the op ends then).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "models/training/data_parallel_job.hpp"
#include "models/training/pipeline_schedule.hpp"
#include "sim_core/hardware/compute.hpp"

using namespace mlsim;
using namespace mlsim::training;

namespace {

constexpr Time kMessage = Time::ms(500);

// One op as the test writes it: worker, "F"/"B" and micro-batch, start and end in seconds.
struct Interval {
  std::size_t worker;
  std::string op;
  double start, end;
  friend bool operator==(const Interval&, const Interval&) = default;
};

std::ostream& operator<<(std::ostream& o, const Interval& i) {
  return o << "w" << i.worker << " " << i.op << " [" << i.start << ", " << i.end << "]";
}

struct Pipe final : OpObserver, GradientSink {
  // Layers' (forward, backward) seconds; every worker has the same.
  Pipe(std::vector<LayerSeconds> layers, std::vector<std::int64_t> parameters)
      : speeds(2), compute(engine, no_gpus, speeds, costs) {
    JobSpec spec;
    spec.parameters = std::move(parameters);
    spec.workers = {0, 1};
    spec.layer_seconds.assign(2, std::move(layers));
    job = std::make_unique<DataParallelJob>(engine, compute, spec);
    job->set_op_observer(this);
    job->set_gradient_sink(this);
  }

  void run(const PipelineSchedule& schedule) {
    schedule_ = &schedule;
    job->set_schedule(&schedule);
    job->start();
    engine.run();
  }
  void set_schedule(const PipelineSchedule& s) { schedule_ = &s; }

  void op_done(std::size_t w, const ScheduledOp& op) override {
    // Every time here is a multiple of 0.25 s: exact in ms, then in binary seconds.
    const double end = static_cast<double>(engine.now().count_ns() / 1'000'000) / 1000.0;
    ops.push_back(
        {w, (op.forward ? "F" : "B") + std::to_string(op.micro_batch), end - seconds(op), end});
    const auto& wk = schedule_->worker(w);
    const std::size_t k = op.micro_batch;
    // An op that ends_after_send ends when its message arrives.
    const bool blocking = op.ends_after_send;
    if (op.forward && wk.stage + 1 < schedule_->stages())
      engine.schedule_in(kMessage, [this, w, k, blocking] {
        job->input_arrived(1, k, true);
        if (blocking) job->output_sent(w);
      });
    if (!op.forward && wk.stage > 0)
      engine.schedule_in(kMessage, [this, w, k, blocking] {
        job->input_arrived(0, k, false);
        if (blocking) job->output_sent(w);
      });
  }
  // Gradients come back 0.25 s after they are handed over.
  void gradient_ready(std::size_t w, std::size_t layer) override {
    handed.push_back({w, layer});
    engine.schedule_in(Time::ms(250), [this, w, layer] {
      job->parameters_back(w, layer);
      job->check_progress();
    });
  }
  // The op's length on either worker (every worker has the same layer times).
  double seconds(const ScheduledOp& op) const {
    double s = 0;
    for (std::size_t l = op.first_layer; l < op.end_layer; ++l)
      s += op.forward ? times[l].forward : times[l].backward;
    return s;
  }

  Engine engine;
  NodeHardware no_gpus{2};
  HostSpeeds speeds;
  CostModel costs;
  Compute compute;
  std::unique_ptr<DataParallelJob> job;
  const PipelineSchedule* schedule_ = nullptr;
  std::vector<LayerSeconds> times;
  std::vector<Interval> ops;
  std::vector<std::pair<std::size_t, std::size_t>> handed;
};

std::unique_ptr<Pipe> pipe(std::vector<LayerSeconds> layers, std::vector<std::int64_t> params) {
  auto p = std::make_unique<Pipe>(layers, std::move(params));
  p->times = std::move(layers);
  return p;
}

}  // namespace

// Stage 0 = layer 0 on worker 0, stage 1 = layer 1 on worker 1; every forward 1 s, every backward
// 2 s. 1F1B: worker 0 may hold (2 - 1 - 0) / 1 + 1 = 2 micro-batches in flight, worker 1 one.
//   w0: F0 [0,1] F1 [1,2]; B0 waits for gradient 0
//   w1: F0 [1.5,2.5] (activation 0 at 1.5); B0 [2.5,4.5] (its own loss) -> gradient 0 at w0 at 5
//       F1 [4.5,5.5] (activation 1 came at 2.5); B1 [5.5,7.5] -> gradient 1 at 8
//   w0: B0 [5,7]; F2 [7,8] (one in flight) -> activation 2 at 8.5; B1 [8,10]
//   w1: F2 [8.5,9.5]; B2 [9.5,11.5] -> gradient 2 at 12
//   w0: B2 [12,14]. The job ends at 14 s.
TEST(PipelineSchedules, OneFOneBTwoStagesThreeMicroBatches) {
  auto p = pipe({{1, 2}, {1, 2}}, {0, 0});
  PipelineSchedule s(PipelineSchedule::Kind::kOneFOneB, {0, 1, 2}, {1, 1}, 2, 3);
  EXPECT_EQ(s.worker(0).limit, 2u);
  EXPECT_EQ(s.worker(1).limit, 1u);
  p->run(s);
  const std::vector<Interval> want = {
      {0, "F0", 0, 1},     {0, "F1", 1, 2},  {1, "F0", 1.5, 2.5},  {1, "B0", 2.5, 4.5},
      {1, "F1", 4.5, 5.5}, {0, "B0", 5, 7},  {1, "B1", 5.5, 7.5},  {0, "F2", 7, 8},
      {1, "F2", 8.5, 9.5}, {0, "B1", 8, 10}, {1, "B2", 9.5, 11.5}, {0, "B2", 12, 14}};
  EXPECT_EQ(p->ops, want);
  EXPECT_TRUE(p->job->finished());
  EXPECT_EQ(p->job->finish_time(), Time::s(14));
}

// GPipe, three micro-batches per flush: all forwards, then all backwards.
//   w0: F0 [0,1] F1 [1,2] F2 [2,3] -> activations at 1.5, 2.5, 3.5
//   w1: F0 [1.5,2.5] F1 [2.5,3.5] F2 [3.5,4.5]; B0 [4.5,6.5] B1 [6.5,8.5] B2 [8.5,10.5]
//       -> gradients at 7, 9, 11
//   w0: B0 [7,9] B1 [9,11] B2 [11,13]
// Both layers have parameters: only the group's last backward hands them over (once per worker,
// at 10.5 and 13 s); they are back 0.25 s later, so the job ends at 13.25 s.
TEST(PipelineSchedules, GPipeTwoStagesThreeMicroBatches) {
  auto p = pipe({{1, 2}, {1, 2}}, {10, 10});
  PipelineSchedule s(PipelineSchedule::Kind::kGPipe, {0, 1, 2}, {1, 1}, 2, 3, 3);
  p->run(s);
  const std::vector<Interval> want = {
      {0, "F0", 0, 1},     {0, "F1", 1, 2},      {1, "F0", 1.5, 2.5}, {0, "F2", 2, 3},
      {1, "F1", 2.5, 3.5}, {1, "F2", 3.5, 4.5},  {1, "B0", 4.5, 6.5}, {1, "B1", 6.5, 8.5},
      {0, "B0", 7, 9},     {1, "B2", 8.5, 10.5}, {0, "B1", 9, 11},    {0, "B2", 11, 13}};
  EXPECT_EQ(p->ops, want);
  EXPECT_EQ(p->handed, (std::vector<std::pair<std::size_t, std::size_t>>{{1, 1}, {0, 0}}));
  EXPECT_EQ(p->job->finish_time(), Time::ms(13250));
}

// GPipe with a flush every two micro-batches: the second group's forwards wait for the first
// group's gradients to come back.
//   w0: F0 [0,1] F1 [1,2]; w1: F0 [1.5,2.5] F1 [2.5,3.5] B0 [3.5,5.5] B1 [5.5,7.5] (hands at 7.5)
//   w0: B0 [6,8] B1 [8,10] (hands at 10, back at 10.25); F2 [10.25,11.25]
//   w1 (back at 7.75): F2 [11.75,12.75] B2 [12.75,14.75] (hands, back at 15)
//   w0: B2 [15.25,17.25] (back at 17.5): the job ends at 17.5 s.
TEST(PipelineSchedules, GPipeFlushGatesTheNextGroup) {
  auto p = pipe({{1, 2}, {1, 2}}, {10, 10});
  PipelineSchedule s(PipelineSchedule::Kind::kGPipe, {0, 1, 2}, {1, 1}, 2, 3, 2);
  p->run(s);
  const std::vector<Interval> want = {
      {0, "F0", 0, 1},         {0, "F1", 1, 2},         {1, "F0", 1.5, 2.5},
      {1, "F1", 2.5, 3.5},     {1, "B0", 3.5, 5.5},     {1, "B1", 5.5, 7.5},
      {0, "B0", 6, 8},         {0, "B1", 8, 10},        {0, "F2", 10.25, 11.25},
      {1, "F2", 11.75, 12.75}, {1, "B2", 12.75, 14.75}, {0, "B2", 15.25, 17.25}};
  EXPECT_EQ(p->ops, want);
  EXPECT_EQ(p->job->finish_time(), Time::ms(17500));
}

// Segment boundary (DataParallelJob::end_segment / resume). Layers (F, B): 0 (1, 2), 1 (0.5, 1),
// 2 (0.5, 1). The first segment is 1F1B over stages [0,1) | [1,3) (1 s forward, 2 s backward on
// each worker, as above) for three micro-batches. At 1.2 s, during w0's F1, the first stage stops
// admitting: two micro-batches have started, so the segment keeps two.
//   w0: F0 [0,1] F1 [1,2]; B0 [5,7]; B1 [8,10] (no F2 any more)
//   w1: F0 [1.5,2.5] B0 [2.5,4.5] F1 [4.5,5.5] B1 [5.5,7.5]; waits from 7.5
// Drained at 10 s; resumed at once with the boundary moved, [0,2) | [2,3), for the remaining
// micro-batch: w0 F0 [10,11.5] -> activation at 12; w1 F0 [12,12.5] B0 [12.5,13.5] -> gradient
// at 14; w0 B0 [14,17]. The job ends at 17 s.
TEST(PipelineSchedules, SegmentDrainsThenResumesWithAnotherPlacement) {
  auto p = pipe({{1, 2}, {0.5, 1}, {0.5, 1}}, {0, 0, 0});
  PipelineSchedule first(PipelineSchedule::Kind::kOneFOneB, {0, 1, 3}, {1, 1}, 2, 3);
  PipelineSchedule second(PipelineSchedule::Kind::kOneFOneB, {0, 2, 3}, {1, 1}, 2, 1);
  Time drained_at = Time::s(-1);
  p->engine.schedule_at(Time::ms(1200), [&] {
    EXPECT_EQ(p->job->forwards_started(0), 2u);
    first.set_micro_batches(2);
    p->job->end_segment([&] {
      drained_at = p->engine.now();
      p->set_schedule(second);
      p->job->resume(second);
    });
  });
  p->run(first);
  const std::vector<Interval> want = {
      {0, "F0", 0, 1},     {0, "F1", 1, 2},     {1, "F0", 1.5, 2.5},   {1, "B0", 2.5, 4.5},
      {1, "F1", 4.5, 5.5}, {0, "B0", 5, 7},     {1, "B1", 5.5, 7.5},   {0, "B1", 8, 10},
      {0, "F0", 10, 11.5}, {1, "F0", 12, 12.5}, {1, "B0", 12.5, 13.5}, {0, "B0", 14, 17}};
  EXPECT_EQ(p->ops, want);
  EXPECT_EQ(drained_at, Time::s(10));
  EXPECT_TRUE(p->job->finished());
  EXPECT_EQ(p->job->finish_time(), Time::s(17));
}

// Which ops need an input, and a worker no stage uses has none.
TEST(PipelineSchedules, WorkersWithoutOpsEndTheirIteration) {
  PipelineSchedule s(PipelineSchedule::Kind::kOneFOneB, {0, 1, 2}, {1, 1}, 3, 2);
  EXPECT_FALSE(s.next(2, 0, 0).has_value());
  EXPECT_EQ(s.next(1, 0, 0)->needs_input, true);
  EXPECT_EQ(s.next(0, 0, 0)->needs_input, false);
  EXPECT_EQ(s.next(1, 1, 0)->needs_input, false);  // the last stage's backward: its own loss
}

// Megatron's flush on the 1F1B order (set_sync_after_last_backward), four micro-batches, no
// blocking sends. The op order is 1F1B's; only each worker's last backward hands its gradients
// over (back 0.25 s later), so no forward waits for parameters inside the iteration.
//   w0: F0 [0,1] F1 [1,2] -> activations at 1.5, 2.5; B0 waits for gradient 0
//   w1: F0 [1.5,2.5] B0 [2.5,4.5] -> gradient 0 at 5; F1 [4.5,5.5] B1 [5.5,7.5] -> at 8
//   w0: B0 [5,7] F2 [7,8] -> at 8.5; B1 [8,10] F3 [10,11] -> at 11.5
//   w1: F2 [8.5,9.5] B2 [9.5,11.5] -> at 12; F3 [11.5,12.5] B3 [12.5,14.5] (hands, back 14.75)
//   w0: B2 [12,14] B3 [15,17] (hands at 17, back at 17.25): the job ends at 17.25 s.
// Without the flag w0's B0 would hand layer 0 over at 7 and F2 wait for it until 7.25.
TEST(PipelineSchedules, MegatronFlushHandsGradientsOverAfterTheLastBackward) {
  auto p = pipe({{1, 2}, {1, 2}}, {10, 10});
  PipelineSchedule s(PipelineSchedule::Kind::kOneFOneB, {0, 1, 2}, {1, 1}, 2, 4);
  s.set_sync_after_last_backward(true);
  EXPECT_EQ(s.updates(0), 1u);
  EXPECT_EQ(s.updates(1), 1u);
  p->run(s);
  const std::vector<Interval> want = {
      {0, "F0", 0, 1},       {0, "F1", 1, 2},   {1, "F0", 1.5, 2.5},   {1, "B0", 2.5, 4.5},
      {1, "F1", 4.5, 5.5},   {0, "B0", 5, 7},   {1, "B1", 5.5, 7.5},   {0, "F2", 7, 8},
      {1, "F2", 8.5, 9.5},   {0, "B1", 8, 10},  {0, "F3", 10, 11},     {1, "B2", 9.5, 11.5},
      {1, "F3", 11.5, 12.5}, {0, "B2", 12, 14}, {1, "B3", 12.5, 14.5}, {0, "B3", 15, 17}};
  EXPECT_EQ(p->ops, want);
  EXPECT_EQ(p->handed, (std::vector<std::pair<std::size_t, std::size_t>>{{1, 1}, {0, 0}}));
  EXPECT_EQ(p->job->updates(0, 0), 1u);
  EXPECT_EQ(p->job->updates(1, 1), 1u);
  EXPECT_EQ(p->job->finish_time(), Time::ms(17250));
}

// Both of Megatron's flags: the flush as above and blocking sends. Stage 0's forwards and stage
// 1's backwards end only when their 0.5 s message arrives, so the worker starts nothing before.
// (Ops are listed by the end of their compute; at equal ends, the one started first.)
//   w0: F0 [0,1] (ends 1.5) F1 [1.5,2.5] (ends 3); B0 waits for gradient 0
//   w1: F0 [1.5,2.5] B0 [2.5,4.5] (ends 5, gradient 0 at 5) F1 [5,6] B1 [6,8] (ends 8.5)
//   w0: B0 [5,7] F2 [7,8] (ends 8.5) B1 [8.5,10.5] F3 [10.5,11.5] (ends 12)
//   w1: F2 [8.5,9.5] B2 [9.5,11.5] (ends 12) F3 [12,13] B3 [13,15] (ends 15.5, hands, back 15.75)
//   w0: B2 [12,14] B3 [15.5,17.5] (hands, back at 17.75): the job ends at 17.75 s.
TEST(PipelineSchedules, MegatronBlockingSendsHoldTheStageUntilDelivered) {
  auto p = pipe({{1, 2}, {1, 2}}, {10, 10});
  PipelineSchedule s(PipelineSchedule::Kind::kOneFOneB, {0, 1, 2}, {1, 1}, 2, 4);
  s.set_sync_after_last_backward(true);
  s.set_blocking_sends(true);
  EXPECT_TRUE(s.next(0, 0, 0)->ends_after_send);   // stage 0's forward sends an activation
  EXPECT_FALSE(s.next(0, 2, 0)->ends_after_send);  // its backward sends nothing
  EXPECT_FALSE(s.next(1, 0, 0)->ends_after_send);  // nor does the last stage's forward
  EXPECT_TRUE(s.next(1, 1, 0)->ends_after_send);   // its backward sends a gradient
  p->run(s);
  const std::vector<Interval> want = {
      {0, "F0", 0, 1},     {1, "F0", 1.5, 2.5},  {0, "F1", 1.5, 2.5},  {1, "B0", 2.5, 4.5},
      {1, "F1", 5, 6},     {0, "B0", 5, 7},      {1, "B1", 6, 8},      {0, "F2", 7, 8},
      {1, "F2", 8.5, 9.5}, {0, "B1", 8.5, 10.5}, {1, "B2", 9.5, 11.5}, {0, "F3", 10.5, 11.5},
      {1, "F3", 12, 13},   {0, "B2", 12, 14},    {1, "B3", 13, 15},    {0, "B3", 15.5, 17.5}};
  EXPECT_EQ(p->ops, want);
  EXPECT_EQ(p->handed, (std::vector<std::pair<std::size_t, std::size_t>>{{1, 1}, {0, 0}}));
  EXPECT_EQ(p->job->finish_time(), Time::ms(17750));
}
