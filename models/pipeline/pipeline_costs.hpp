#pragma once
// What a pipeline partitioner and schedule need to know: per-layer costs of one minibatch and
// the conditions (each stage host's layer times and speed, links between consecutive stages) they
// run under.
#include <cstddef>
#include <vector>

#include "sim_core/hardware/dnn_profile.hpp"

namespace mlsim::pipeline {

// One layer of the profile: its per-minibatch times as profiled (on the profile's GPU, at speed 1)
// and its sizes.
struct LayerCost {
  double forward_s = 0;
  double backward_s = 0;
  double activation_bytes = 0;  // output sent to the next stage when the layer ends a stage
  double parameter_bytes = 0;   // moved when the layer changes GPU
};

// Layers of a profile in topological order; data-loading input nodes are left out (they run on
// the host, not on a pipeline stage).
std::vector<LayerCost> layer_costs(const DnnProfile& profile);

// What running each layer on one stage's host takes: every layer's time on the host's GPU at
// speed 1 (the profile moved to that GPU by the platform's Compute), and the host's speed now.
// Its layer time now is nominal / speed: what PipeDream's profiler would measure if it profiled
// the model on that host at this moment (PipeDream profiles once, on one GPU, and assumes every
// stage's GPU is that one; the partitioner here sees each host as it is).
struct StageHost {
  std::vector<double> forward_s, backward_s;  // per layer, at speed 1 on the host's GPU
  double speed = 1;                           // HostSpeeds of the host
};

// The profiling GPU's own times (a host of the profile's GPU type) at `speed`.
StageHost profiled_host(const std::vector<LayerCost>& layers, double speed = 1);

// Conditions at one moment. Stage s runs on hosts[s]; link s joins stage s to stage s + 1.
struct Conditions {
  std::vector<StageHost> hosts;
  std::vector<double> link_bandwidth;  // bytes/s, one per pair of consecutive stages
  std::vector<double> link_latency;    // seconds
  std::size_t stages() const { return hosts.size(); }
};

// Stage s owns layers [first[s], first[s + 1]); first[0] = 0 and first[stages] = layer count.
struct Partition {
  std::vector<std::size_t> first;
  std::size_t stages() const { return first.empty() ? 0 : first.size() - 1; }
  bool operator==(const Partition&) const = default;
};

// Per-stage forward and backward seconds of one minibatch, and the bytes each stage boundary
// carries (the activation of the stage's last layer; the gradient going back is the same size).
struct StageCosts {
  std::vector<double> forward_s, backward_s, boundary_bytes;
};
StageCosts stage_costs(const std::vector<LayerCost>& layers, const Partition& p,
                       const Conditions& c);

// Parameter bytes that change GPU when going from `from` to `to`.
double moved_parameter_bytes(const std::vector<LayerCost>& layers, const Partition& from,
                             const Partition& to);

}  // namespace mlsim::pipeline
