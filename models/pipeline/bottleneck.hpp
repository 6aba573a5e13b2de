#pragma once
// The bottleneck time of a configuration: the decomposable part of the 1F1B timing model
// (one_f_one_b.hpp), a sum of nothing but per-stage terms, so a dynamic program can minimise it
// exactly (dp_planner.hpp) and branch and bound can prune with it (autopipe_planner.hpp).
//
// In the timing model every host is two resources, its GPU (forward, backward) and its NIC
// (sends leave one at a time, each at the smaller of the two ends' bandwidths), and a replicated
// stage's all-reduce holds both on every replica until it ends. Stage [i, j) on hosts [h, h + r)
// gives each replica x, per round of r minibatches (one each), GPU work T_x(i, j) (its forward
// plus backward at its speed now) and NIC work N_x = (A(i - 1) + A(j - 1)) / B_x (the gradient
// back when i > 0, the activation forward when j < n; A(l) the bytes of a cut after layer l,
// LayerCost::cut_bytes: every activation made up to l and consumed after it,
// B_x the host's own access bandwidth), then the ring all-reduce R of the stage's parameters
// (ring_allreduce_seconds) once per u of its minibatches (u = 1 under 1F1B, GPipe's group).
// Hence the stage cannot go faster than
//   stage(i, j, h, r) = (max over x of max(T_x, N_x) + R / u) / r   seconds per minibatch,
// and the configuration's bottleneck time is the largest stage term. It is a lower bound on
// steady_state_seconds of the same configuration: the full objective adds what couples stages
// (a stage waiting for its neighbours' activations and gradients through the in-flight limit,
// latency, warm-up and drain of GPipe's flushes, the all-reduce waiting for the slowest replica).
// It charges a send at the sender's own bandwidth, where the timing model uses the smaller of
// both ends' (the same when the hosts' bandwidths are equal), so that a stage's term needs only
// its own hosts. Receiving costs nothing, as in the timing model (only sends are serialised).
// With routes (Conditions::Routes: shared links such as a server's uplink), N_x charges the
// gradient at the fastest route from x to any host before the stage and the activation at the
// fastest to any host after it, each shared link on such a route divided among the stage's
// replicas all of whose routes that way cross it: still at most what the timing model charges
// (transfer_bandwidths divides a shared link among every host sending across it), and still a
// term of the stage's own placement, so the DP stays exact for it. So a stage whose every
// activation leaves its server over one uplink is charged A / uplink per minibatch however many
// replicas it has.
#include <cstddef>
#include <vector>

#include "models/pipeline/one_f_one_b.hpp"
#include "models/pipeline/pipeline_costs.hpp"

namespace mlsim::pipeline {

class Bottleneck {
 public:
  // `layers`, `c` must outlive this.
  Bottleneck(const std::vector<LayerCost>& layers, const Conditions& c,
             const ScheduleTiming& schedule = {});

  // The term of stage [i, j) on hosts [h, h + r) (see the header), seconds per minibatch.
  double stage(std::size_t i, std::size_t j, std::size_t h, std::size_t r) const;
  // The largest stage term of `p`.
  double of(const Partition& p) const;

  std::size_t layers() const { return layers_.size(); }
  std::size_t hosts() const { return c_.host_count(); }

 private:
  const std::vector<LayerCost>& layers_;
  const Conditions& c_;
  double per_update_;                      // minibatches of a replica per all-reduce
  std::vector<std::vector<double>> time_;  // per host: forward + backward of layers [0, j)
  std::vector<double> params_;             // parameter bytes of layers [0, j)
  // With routes, per stage placement [h, h + r) and replica x at (h H + r - 1) H + x: the
  // fastest its sends can leave (see bound_route_bandwidths): forward and backward when the
  // stage sends both ways, backward when it ends the model.
  void bound_route_bandwidths();
  std::vector<double> forward_bw_, backward_bw_, backward_only_bw_;
};

}  // namespace mlsim::pipeline
