#pragma once
// What a pipeline partitioner and schedule need to know: per-layer costs of one minibatch, the
// conditions (each host's layer times and speed, its link to the network) they run under, and a
// configuration: contiguous layer ranges (stages), each run by one or more hosts (replicas).
#include <cstddef>
#include <optional>
#include <vector>

#include "sim_core/hardware/dnn_profile.hpp"

namespace mlsim::pipeline {

// One layer of the profile: its per-minibatch times as profiled (on the profile's GPU, at speed 1)
// and its sizes.
struct LayerCost {
  double forward_s = 0;
  double backward_s = 0;
  double activation_bytes = 0;  // the layer's output, per minibatch (stashed for its backward)
  double parameter_bytes = 0;   // moved when the layer changes GPU; all-reduced when replicated
  // The bytes that cross a stage boundary placed after this layer (per minibatch, forward; its
  // gradient goes back the same size): the outputs of every layer up to and including this one
  // that has a consumer after it (PipeDream's augmented antichain, graph/graph.py
  // `augment_antichain`). layer_costs() sets it from the profile's edges. Unset: the layers form
  // a chain (each layer's only consumer is the next one), and the cut carries this layer's own
  // output.
  std::optional<double> boundary_bytes = std::nullopt;
  double cut_bytes() const { return boundary_bytes.value_or(activation_bytes); }
};

// Layers of a profile in topological order, each with its boundary_bytes from the profile's
// edges; data-loading input nodes are left out (they run on the host, not on a pipeline stage: a
// stage that consumes an input reads it itself, so an input's edges carry nothing across a cut).
std::vector<LayerCost> layer_costs(const DnnProfile& profile);

// What running each layer on one host takes: every layer's time on the host's GPU at speed 1
// (the profile moved to that GPU by the platform's Compute), and the host's speed now. Its layer
// time now is nominal / speed: what PipeDream's profiler would measure if it profiled the model
// on that host at this moment (PipeDream profiles once, on one GPU, and assumes every GPU is that
// one; the partitioners here see each host as it is).
struct StageHost {
  std::vector<double> forward_s, backward_s;  // per layer, at speed 1 on the host's GPU
  double speed = 1;                           // HostSpeeds of the host
};

// The profiling GPU's own times (a host of the profile's GPU type) at `speed`.
StageHost profiled_host(const std::vector<LayerCost>& layers, double speed = 1);

// Conditions at one moment, for the job's hosts in order (host h is the topology's h-th pipeline
// host). Every host has one access link each way. Without `routes` (a star: every route is the
// two hosts' access links) the model takes those links as the bottleneck, so a transfer from a
// to b runs at the smaller of the two hosts' bandwidths and arrives latency_out[a] +
// latency_in[b] after it leaves. With `routes` (route_conditions.hpp: some route crosses a link
// that is no job host's own, a server's uplink on a leaf-spine) it runs at its route's narrowest
// link and arrives the route's latency later, and the shared links it crosses are divided among
// the hosts sending across them (transfer_bandwidths).
struct Conditions {
  std::vector<StageHost> hosts;
  std::vector<double> bandwidth;    // bytes/s: the smaller of the host's link out and link in
  std::vector<double> latency_out;  // seconds: host -> network (its uplink)
  std::vector<double> latency_in;   // seconds: network -> host (its downlink)
  // Per ordered pair of hosts, at a * hosts + b: the platform's route from a to b (flow label 0,
  // the pipeline's point-to-point messages'), its narrowest bandwidth and summed latency, and the
  // shared links it crosses as indexes into shared_bandwidth (every link of the route that is
  // no job host's access link). hosts == 0: no routes (see above).
  struct Routes {
    std::size_t hosts = 0;
    std::vector<double> bandwidth, latency;
    std::vector<std::vector<std::size_t>> shared;
    std::vector<double> shared_bandwidth;
  } routes;
  bool routed() const { return routes.hosts > 0; }
  std::size_t host_count() const { return hosts.size(); }
  // The route's narrowest link (without routes: the smaller of the two hosts' links).
  double bandwidth_between(std::size_t a, std::size_t b) const;
  double latency_between(std::size_t a, std::size_t b) const {
    return routed() ? routes.latency[a * routes.hosts + b] : latency_out[a] + latency_in[b];
  }
};

// A configuration. Stage s owns layers [first[s], first[s + 1]) (first[0] = 0, first[stages] =
// layer count) and runs on replicas[s] hosts, the next ones in order: stage 0 on hosts
// [0, replicas[0]), stage 1 on the following replicas[1], and so on (PipeDream's hybrid: a
// replicated stage is data-parallel inside, its replicas take minibatches round-robin and
// all-reduce the stage's weight gradients after each backward). Empty `replicas` means one host
// per stage (a straight pipeline).
struct Partition {
  std::vector<std::size_t> first;
  std::vector<std::size_t> replicas;
  std::size_t stages() const { return first.empty() ? 0 : first.size() - 1; }
  std::size_t replication(std::size_t stage) const {
    return replicas.empty() ? 1 : replicas[stage];
  }
  std::size_t first_host(std::size_t stage) const;  // the first host of `stage`
  std::size_t hosts_used() const { return first_host(stages()); }
  std::size_t stage_of_host(std::size_t host) const;  // stages() when the host runs nothing
  bool operator==(const Partition& o) const;
};

// Per-host forward and backward seconds of one minibatch of the host's stage, the bytes each
// stage boundary carries per minibatch (cut_bytes() of the stage's last layer: every activation
// produced before the boundary and consumed after it; the gradient going back is the same size)
// and the parameter bytes of each stage.
struct StageCosts {
  std::vector<std::size_t> first_host;        // per stage, and one past the last stage
  std::vector<double> forward_s, backward_s;  // per host used
  std::vector<double> boundary_bytes;         // per boundary (stages - 1)
  std::vector<double> parameter_bytes;        // per stage
  std::size_t stages() const { return first_host.empty() ? 0 : first_host.size() - 1; }
};
StageCosts stage_costs(const std::vector<LayerCost>& layers, const Partition& p,
                       const Conditions& c);

// The bandwidth each transfer gets under a configuration whose stage s starts at host
// first_host[s] (StageCosts::first_host), per ordered pair of hosts at a * hosts + b. Without
// routes: bandwidth_between. With routes: the route's narrowest link, and every shared link it
// crosses divided among the hosts that send across that link in the configuration (each sends
// its activations to the next stage's and its gradients to the previous stage's replicas that
// run its minibatches, round-robin; a host's transfers leave one at a time, so each holds at
// most one share) [assumed: all of them at once, the worst case; the run shares a link only
// among the transfers crossing it at that moment].
std::vector<double> transfer_bandwidths(const std::vector<std::size_t>& first_host,
                                        const Conditions& c);

// What a switch from `from` to `to` moves: for every host of `to`, the parameters of its new
// stage's layers that its stage in `from` did not hold, fetched from a host of the layer's old
// stage (replica i of the new stage fetches from replica i mod r of the old one, so the replicas
// of a new stage spread their reads over the old replicas). One entry per (source, destination)
// host pair, in host order.
struct Migration {
  std::size_t from_host = 0, to_host = 0;
  double parameter_bytes = 0;
};
std::vector<Migration> migrations(const std::vector<LayerCost>& layers, const Partition& from,
                                  const Partition& to);

// The same moves layer by layer (AutoPipe's layer-by-layer switch): one entry per layer a host
// of `to` lacks, from the same source as migrations(), in (destination host, layer) order.
struct LayerMove {
  std::size_t from_host = 0, to_host = 0, layer = 0;
  double parameter_bytes = 0;
};
std::vector<LayerMove> layer_moves(const std::vector<LayerCost>& layers, const Partition& from,
                                   const Partition& to);

// The parameter bytes of migrations(layers, from, to), summed.
double moved_parameter_bytes(const std::vector<LayerCost>& layers, const Partition& from,
                             const Partition& to);

}  // namespace mlsim::pipeline
