#pragma once
// A training job built from the core's registries on a star of equal links, flow backend, for
// the tests of models/training. Links carry 4e6 bytes/s: one million fp32 parameters per second.
#include <functional>
#include <map>
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
    Time at;
  };
  struct Report {
    std::size_t owner;
    Chunk chunk;
    bool release, arrived;
    Time at;
  };
  void attach(GradientSync* inner, SyncEvents* outer, const Engine* clock = nullptr) {
    inner_ = inner;
    outer_ = outer;
    clock_ = clock;
  }
  Entry entry() const override { return inner_->entry(); }
  bool one_tensor_at_a_time() const override { return inner_->one_tensor_at_a_time(); }
  bool layout_matters() const override { return inner_->layout_matters(); }
  void set_partition(std::int64_t p) override { inner_->set_partition(p); }
  void start(std::size_t owner, const Chunk& c) override {
    starts.push_back({owner, c, now()});
    inner_->start(owner, c);
  }
  std::int64_t bytes_sent() const override { return inner_->bytes_sent(); }
  std::int64_t bytes_delivered() const override { return inner_->bytes_delivered(); }
  std::uint64_t messages() const override { return inner_->messages(); }
  void on_chunk(std::size_t owner, const Chunk& c, bool release, bool arrived) override {
    reports.push_back({owner, c, release, arrived, now()});
    outer_->on_chunk(owner, c, release, arrived);
  }

  std::vector<Start> starts;
  std::vector<Report> reports;

 private:
  Time now() const { return clock_ ? clock_->now() : Time::zero(); }
  GradientSync* inner_ = nullptr;
  SyncEvents* outer_ = nullptr;
  const Engine* clock_ = nullptr;
};

// Forwards every call to `inner` and keeps every delivered or failed transfer (its endpoints,
// bytes, start and end), so a test can check what crossed the network and when.
class RecordingNetwork final : public Network {
 public:
  explicit RecordingNetwork(Network& inner) : inner_(inner) {}
  std::string_view backend_name() const override { return inner_.backend_name(); }
  TransferId start_transfer(NodeId src, NodeId dst, Bytes bytes, DeliveryCallback done,
                            std::uint64_t flow_label = 0) override {
    return inner_.start_transfer(src, dst, bytes, wrap(std::move(done)), flow_label);
  }
  void start_transfers(std::span<TransferRequest> phase) override {
    for (TransferRequest& r : phase) r.done = wrap(std::move(r.done));
    inner_.start_transfers(phase);
  }
  bool cancel_transfer(TransferId id) override { return inner_.cancel_transfer(id); }
  void set_link_bandwidth(LinkId link, Bandwidth bw) override {
    inner_.set_link_bandwidth(link, bw);
  }
  void set_link_latency(LinkId link, Time latency) override {
    inner_.set_link_latency(link, latency);
  }
  bool latency_per_direction() const override { return inner_.latency_per_direction(); }
  void set_link_up(LinkId link, bool up) override { inner_.set_link_up(link, up); }
  LinkStats link_stats(LinkId link) const override { return inner_.link_stats(link); }
  NetworkTotals totals() const override { return inner_.totals(); }

  std::vector<TransferResult> transfers;  // in the order they ended

 private:
  // The callbacks wait here (an InlineFunction holds too little to carry one inside another).
  DeliveryCallback wrap(DeliveryCallback done) {
    const std::uint64_t key = next_++;
    waiting_.emplace(key, std::move(done));
    return DeliveryCallback([this, key](const TransferResult& r) {
      transfers.push_back(r);
      auto it = waiting_.find(key);
      DeliveryCallback f = std::move(it->second);
      waiting_.erase(it);
      f(r);
    });
  }
  Network& inner_;
  std::map<std::uint64_t, DeliveryCallback> waiting_;
  std::uint64_t next_ = 0;
};

struct Job : test::PlatformBench {
  // `hosts` on a star: the first `workers` are workers, the next `servers` parameter servers.
  Job(int workers, int servers, std::vector<Layer> layers, std::size_t iterations,
      const std::string& scheduler, const std::string& sync, SchedulerConfig config,
      bool credit_until_pull = false, const std::function<void(SyncOptions&)>& tweak = {})
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
    if (tweak) tweak(options);
    strategy = p.syncs.get(sync, "").value(SyncSetup{engine, recorder, tap, std::move(options)});
    tap.attach(strategy.get(), path.get(), &engine);
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
  RecordingNetwork recorder{network};
  Tap tap;
  std::unique_ptr<DataParallelJob> core;
  std::unique_ptr<GradientPath> path;
  std::unique_ptr<GradientSync> strategy;
};

}  // namespace mlsim::training::testing
