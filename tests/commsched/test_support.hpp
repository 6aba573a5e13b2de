#pragma once
// Small jobs on a star of equal links, run on the flow backend, for the commsched tests.
#include <memory>
#include <vector>

#include "models/commsched/training_job.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "sim_core/run/events.hpp"

namespace mlsim::commsched::testing {

// 4e6 bytes/s: one million fp32 parameters take exactly one second.
inline constexpr double kBandwidth = 4e6;

inline Layer layer(double forward_s, double backward_s, std::int64_t parameters) {
  return {Time::from_seconds(forward_s), Time::from_seconds(backward_s), parameters};
}

struct Bench {
  Bench(int hosts, Sharing sharing = Sharing::kMaxMin, Time latency = Time::zero())
      : topology(build_topology(StarSpec{hosts, LinkSpec{Bandwidth{kBandwidth}, latency}})),
        network(engine, topology, sharing),
        links(topology, network),
        speeds(topology.nodes().size()),
        health(topology.nodes().size()),
        hardware(topology.nodes().size()),
        compute(engine, hardware, speeds, costs) {}

  // Host i computes `slowdown` times slower during [from, to): two platform speed events, as the
  // scenario's `events` section gives them.
  void straggle(std::size_t host, double slowdown, Time from, Time to = Time::max()) {
    PlatformEvent e;
    e.change = EventChange::kSpeed;
    e.nodes = {topology.hosts()[host]};
    e.at = from;
    e.speed = 1 / slowdown;
    events.events.push_back(e);
    if (to == Time::max()) return;
    e.at = to;
    e.speed = 1;
    events.events.push_back(e);
  }

  JobSpec spec(Mode mode, SchedulerKind kind, std::vector<Layer> layers, int workers, int servers,
               std::size_t iterations) const {
    JobSpec s;
    s.mode = mode;
    s.scheduler = kind;
    s.layers = std::move(layers);
    for (int w = 0; w < workers; ++w) s.workers.push_back(topology.hosts()[w]);
    for (int v = 0; v < servers; ++v) s.servers.push_back(topology.hosts()[workers + v]);
    s.iterations = iterations;
    s.bigarray_bound = 1'000'000'000;
    s.record_trace = true;
    return s;
  }

  // The PS job the AutoByte tests tune: two workers, two servers, three layers of 1M, 6M and 12M
  // parameters, 24 iterations, 30 us per message.
  JobSpec autobyte_ps_spec() const {
    JobSpec s =
        spec(Mode::kParameterServer, SchedulerKind::kByteScheduler,
             {layer(0.3, 0.5, 1'000'000), layer(0.2, 0.4, 6'000'000), layer(0.1, 0.2, 12'000'000)},
             2, 2, 24);
    s.message_overhead = Time::us(30);
    return s;
  }

  // Runs the job to its end; the job stays readable.
  TrainingJob& run(JobSpec s, SchedulerConfig config, Controller* controller = nullptr) {
    scheduler = std::make_unique<EventScheduler>(engine, PlatformState{links, speeds, health},
                                                 events, RandomStream(1));
    job = std::make_unique<TrainingJob>(engine, network, compute, std::move(s), config);
    job->set_controller(controller);
    scheduler->start();
    job->start();
    engine.run();
    return *job;
  }

  Engine engine;
  Topology topology;
  FluidNetwork network;
  LinkConditions links;
  HostSpeeds speeds;
  NodeHealth health;
  NodeHardware hardware;  // none: layer times are given on the job's GPU
  CostModel costs;
  Compute compute;
  PlatformEvents events;
  std::unique_ptr<EventScheduler> scheduler;
  std::unique_ptr<TrainingJob> job;
};

inline std::vector<double> seconds(const std::vector<Time>& ts) {
  std::vector<double> out;
  for (Time t : ts) out.push_back(t.seconds());
  return out;
}

}  // namespace mlsim::commsched::testing
