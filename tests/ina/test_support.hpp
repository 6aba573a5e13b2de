#pragma once
// Small hand-made profiles and cluster set-ups shared by the INA tests.
#include <cstdint>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>

#include "models/ina/cluster_params.hpp"
#include "sim_core/engine/random.hpp"
#include "sim_core/hardware/compute.hpp"
#include "sim_core/hardware/dnn_profile.hpp"
#include "sim_core/network/aggregator_slots.hpp"

namespace mlsim::ina::testing {

// The platform's Compute over `speeds`, with no host hardware: ina's layer times are already on
// the job's GPU (FixedWork).
struct ComputeOn {
  ComputeOn(Engine& engine, HostSpeeds& speeds)
      : hardware(speeds.size()), compute(engine, hardware, speeds, costs) {}
  NodeHardware hardware;
  CostModel costs;
  Compute compute;
};

// Watches an aggregator pool (set_observer) for the "no aggregator held twice" property: a claim
// of a held aggregator, or a release by anyone but its holder, is a violation; `held` is what is
// still claimed.
struct OwnershipTracker {
  std::map<std::size_t, std::pair<std::uint16_t, std::uint64_t>> held;  // index -> (job, seq)
  int violations = 0;

  void operator()(const PoolEvent& e) {
    if (e.kind == PoolEvent::kClaim) {
      if (!held.emplace(e.index, std::make_pair(e.job, e.seq)).second) ++violations;
      return;
    }
    auto it = held.find(e.index);
    if (it == held.end() || it->second != std::make_pair(e.job, e.seq))
      ++violations;
    else
      held.erase(it);
  }
};

// A one-layer network: `forward_ms`/`backward_ms` per minibatch, `values` fp32 gradients.
inline std::shared_ptr<const DnnProfile> one_layer(double forward_ms, double backward_ms,
                                                   long values) {
  std::ostringstream text;
  text << "node1 -- Linear -- forward_compute_time=" << forward_ms
       << ", backward_compute_time=" << backward_ms
       << ", activation_size=4.0, parameter_size=" << values * 4 << ".0\n";
  std::istringstream in(text.str());
  return std::make_shared<const DnnProfile>(parse_pipedream_graph(in, "one_layer"));
}

// Two layers, so that communication of the second overlaps the backward of the first.
inline std::shared_ptr<const DnnProfile> two_layers(long values_each) {
  std::ostringstream text;
  text << "node1 -- A -- forward_compute_time=0.2, backward_compute_time=0.3, activation_size=4.0, "
          "parameter_size="
       << values_each * 4 << ".0\n"
       << "node2 -- B -- forward_compute_time=0.1, backward_compute_time=0.2, activation_size=4.0, "
          "parameter_size="
       << values_each * 4 << ".0\n"
       << "\tnode1 -- node2\n";
  std::istringstream in(text.str());
  return std::make_shared<const DnnProfile>(parse_pipedream_graph(in, "two_layers"));
}

inline JobSpec job(std::shared_ptr<const DnnProfile> profile, int workers, int iterations,
                   Time arrival = Time::zero()) {
  JobSpec j;
  j.model = profile->name;
  j.profile = std::move(profile);
  j.workers = workers;
  j.iterations = iterations;
  j.arrival = arrival;
  return j;
}

// 2-4 jobs of 2-5 workers, one or two layers of 2,000-22,000 values each, 2-4 iterations,
// arriving within 300 us, each worker 0-30% slow; placed as the cluster places them (each job's
// workers, then its PS): appended to `p.jobs`, the workers' speeds set in `speeds`. Returns the
// number of jobs. The random workloads of the property tests.
inline int add_random_jobs(RandomStream& rng, ClusterParams& p, HostSpeeds& speeds) {
  const int jobs = 2 + static_cast<int>(rng.below(3));
  std::size_t host = 0;  // the job's first worker's host
  for (int j = 0; j < jobs; ++j) {
    const long values = 2000 + static_cast<long>(rng.below(20000));
    auto profile = rng.uniform() < 0.5
                       ? two_layers(values)
                       : one_layer(0.05 + rng.uniform() * 0.5, 0.05 + rng.uniform() * 0.5, values);
    JobSpec spec =
        job(profile, 2 + static_cast<int>(rng.below(4)), 2 + static_cast<int>(rng.below(3)),
            Time::us(static_cast<std::int64_t>(rng.below(300))));
    for (int k = 0; k < spec.workers; ++k)
      speeds.set_speed(static_cast<NodeId>(host + static_cast<std::size_t>(k)),
                       1 / (1.0 + rng.uniform() * 0.3));
    host += static_cast<std::size_t>(spec.workers) + 1;  // and the job's PS
    p.jobs.push_back(spec);
  }
  return jobs;
}

// Switch memory for exactly one ATP/DSA aggregator (62 fp32 values): the base case of the
// hand-computed tests. The default timeout is longer than any wait in those tests, so no timeout
// muddles them; the loss tests pass ATP's own 1 ms.
inline ClusterParams one_aggregator(PolicyKind policy, Time timeout = Time::ms(10)) {
  ClusterParams p;
  p.policy = policy;
  p.aggregator_memory = Bytes{248};
  p.atp_timeout = timeout;
  return p;
}

}  // namespace mlsim::ina::testing
