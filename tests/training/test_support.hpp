#pragma once
// A training job built from the core's registries on a star of equal links, flow backend, for
// the tests of models/training. Links carry 4e6 bytes/s: one million fp32 parameters per second.
#include <memory>
#include <string>
#include <vector>

#include "models/training/data_parallel_job.hpp"
#include "models/training/gradient_path.hpp"
#include "models/training/policies.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "tests/support/platform_bench.hpp"

namespace mlsim::training::testing {

inline constexpr double kBandwidth = 4e6;
inline constexpr std::int64_t M = 1'000'000;

struct Layer {
  double forward_s, backward_s;
  std::int64_t parameters;
};

// Forwards every call, so a test can watch the traffic between path and strategy.
class Tap : public GradientSync, public SyncEvents {
 public:
  struct Start {
    std::size_t owner;
    Chunk chunk;
  };
  struct Report {
    std::size_t owner;
    Chunk chunk;
    bool release, arrived;
  };
  void attach(GradientSync* inner, SyncEvents* outer) {
    inner_ = inner;
    outer_ = outer;
  }
  Entry entry() const override { return inner_->entry(); }
  bool one_tensor_at_a_time() const override { return inner_->one_tensor_at_a_time(); }
  bool layout_matters() const override { return inner_->layout_matters(); }
  void set_partition(std::int64_t p) override { inner_->set_partition(p); }
  void start(std::size_t owner, const Chunk& c) override {
    starts.push_back({owner, c});
    inner_->start(owner, c);
  }
  std::int64_t bytes_sent() const override { return inner_->bytes_sent(); }
  std::int64_t bytes_delivered() const override { return inner_->bytes_delivered(); }
  std::uint64_t messages() const override { return inner_->messages(); }
  void on_chunk(std::size_t owner, const Chunk& c, bool release, bool arrived) override {
    reports.push_back({owner, c, release, arrived});
    outer_->on_chunk(owner, c, release, arrived);
  }

  std::vector<Start> starts;
  std::vector<Report> reports;

 private:
  GradientSync* inner_ = nullptr;
  SyncEvents* outer_ = nullptr;
};

struct Job : test::PlatformBench {
  // `hosts` on a star: the first `workers` are workers, the next `servers` parameter servers.
  Job(int workers, int servers, std::vector<Layer> layers, std::size_t iterations,
      const std::string& scheduler, const std::string& sync, SchedulerConfig config,
      bool credit_until_pull = false)
      : PlatformBench(build_topology(
            StarSpec{workers + servers, LinkSpec{Bandwidth{kBandwidth}, Time::zero()}})) {
    JobSpec spec;
    std::vector<LayerTimes> times;
    for (const Layer& l : layers) {
      spec.parameters.push_back(l.parameters);
      times.push_back({Time::from_seconds(l.forward_s), Time::from_seconds(l.backward_s)});
    }
    for (int w = 0; w < workers; ++w) spec.workers.push_back(topology.hosts()[w]);
    spec.times.assign(spec.workers.size(), times);
    spec.iterations = iterations;
    core = std::make_unique<DataParallelJob>(engine, compute, spec);
    const TrainingPolicies& p = training_policies();
    path = std::make_unique<GradientPath>(engine, *core, p.schedulers.get(scheduler, "").value,
                                          config, true);
    SyncOptions options;
    options.workers = spec.workers;
    for (int s = 0; s < servers; ++s) options.servers.push_back(topology.hosts()[workers + s]);
    options.layer_parameters = spec.parameters;
    options.bigarray_bound = 1'000'000'000;
    options.credit_until_pull = credit_until_pull;
    options.links = &links;  // rat plans over them
    strategy = p.syncs.get(sync, "").value(SyncSetup{engine, network, tap, std::move(options)});
    tap.attach(strategy.get(), path.get());
    path->set_sync(&tap);
    core->set_gradient_sink(path.get());
  }

  void run() {
    core->start();
    engine.run();
  }
  std::vector<double> iteration_starts() const {
    std::vector<double> out;
    for (Time t : core->iteration_starts()) out.push_back(t.seconds());
    return out;
  }
  // (layer, chunk) of every chunk started, in order.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> started() const {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> out;
    for (const auto& s : tap.starts) out.emplace_back(s.chunk.layer, s.chunk.index);
    return out;
  }

  LinkConditions links{topology, network};
  Tap tap;
  std::unique_ptr<DataParallelJob> core;
  std::unique_ptr<GradientPath> path;
  std::unique_ptr<GradientSync> strategy;
};

}  // namespace mlsim::training::testing
