// The core's fetched layers (JobSpec::fetched_each_iteration, DataParallelJob::parameters_fetched)
// and the LayerRouter, by hand. One worker, one layer of 1 s forward and 1 s backward, two
// iterations; the test's sink plays a strategy: 1 s after a gradient is ready its parameters are
// back, and 2 s after it the next iteration's parameters are fetched.
#include <gtest/gtest.h>

#include "models/training/data_parallel_job.hpp"
#include "models/training/layer_router.hpp"
#include "sim_core/hardware/compute.hpp"

using namespace mlsim;
using namespace mlsim::training;

namespace {

class Fetcher final : public GradientSink {
 public:
  Fetcher(Engine& e, DataParallelJob& job, bool fetched)
      : engine_(e), job_(job), fetched_(fetched) {}
  void gradient_ready(std::size_t w, std::size_t layer) override {
    ++gradients;
    engine_.schedule_in(Time::s(1), [this, w, layer] {
      job_.parameters_back(w, layer);
      job_.check_progress();  // as the gradient path does after every chunk
    });
    if (fetched_)
      engine_.schedule_in(Time::s(2), [this, w, layer] { job_.parameters_fetched(w, layer); });
  }
  int gradients = 0;

 private:
  Engine& engine_;
  DataParallelJob& job_;
  bool fetched_;
};

struct Outcome {
  std::vector<Time> starts;
  Time finish;
  int gradients;
};

Outcome run(bool fetched) {
  Engine engine;
  NodeHardware no_gpus(1);
  HostSpeeds speeds(1);
  CostModel costs;
  Compute compute(engine, no_gpus, speeds, costs);
  JobSpec spec;
  spec.parameters = {10};
  spec.workers = {0};
  spec.times = {{LayerTimes{Time::s(1), Time::s(1)}}};
  spec.iterations = 2;
  if (fetched) spec.fetched_each_iteration = {true};
  DataParallelJob job(engine, compute, spec);
  Fetcher fetcher(engine, job, fetched);
  LayerRouter router({&fetcher});
  job.set_gradient_sink(&router);
  job.start();
  // The first iteration's parameters arrive at 3 s (a pull before any compute).
  if (fetched) engine.schedule_at(Time::s(3), [&] { job.parameters_fetched(0, 0); });
  engine.run();
  EXPECT_TRUE(job.finished());
  return {job.iteration_starts(), job.finish_time(), fetcher.gradients};
}

}  // namespace

// Fetched: forward [3,4], backward [4,5]; back at 6, fetched at 7; forward [7,8], backward [8,9];
// back at 10: the job ends at 10 s.
TEST(FetchedLayer, ForwardWaitsForEachIterationsFetch) {
  const Outcome r = run(true);
  EXPECT_EQ(r.starts, (std::vector<Time>{Time::s(3), Time::s(5 + 2)}));
  EXPECT_EQ(r.finish, Time::s(10));
  EXPECT_EQ(r.gradients, 2);
}

// Not fetched: forward [0,1], backward [1,2]; back at 3; forward [3,4], backward [4,5]; back at 6.
TEST(FetchedLayer, WithoutFetchingOnlyTheUpdateGates) {
  const Outcome r = run(false);
  EXPECT_EQ(r.starts, (std::vector<Time>{Time::zero(), Time::s(3)}));
  EXPECT_EQ(r.finish, Time::s(6));
}
