#include "models/pipeline/one_f_one_b.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "sim_core/base/error.hpp"

namespace mlsim::pipeline {

double ring_allreduce_seconds(double bytes, std::size_t first, std::size_t n, const Conditions& c) {
  if (n <= 1 || bytes <= 0) return 0;  // nothing to reduce (the run skips the collective too)
  double bandwidth = std::numeric_limits<double>::infinity(), latency = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t a = first + i, b = first + (i + 1) % n;
    bandwidth = std::min(bandwidth, c.bandwidth_between(a, b));
    latency = std::max(latency, c.latency_between(a, b));
  }
  const double steps = 2.0 * static_cast<double>(n - 1);
  return steps * (bytes / static_cast<double>(n) / bandwidth + latency);
}

double estimate_pipeline(const StageCosts& costs, const Conditions& c, std::size_t minibatches,
                         const ScheduleTiming& schedule) {
  const bool gpipe = schedule.kind == training::PipelineSchedule::Kind::kGPipe;
  const std::size_t group = gpipe ? schedule.group : 1;
  MLSIM_CHECK(group > 0, "GPipe needs at least one micro-batch per flush");
  // Weight updates of a worker with n minibatches: one per backward (1F1B), one per group.
  auto updates = [&](std::size_t n) { return (n + group - 1) / group; };
  const std::size_t S = costs.stages(), W = costs.first_host.back(), M = minibatches;
  const double unknown = std::numeric_limits<double>::quiet_NaN();
  // Per worker (host): its stage, replica index, replication, minibatch count and limit.
  std::vector<std::size_t> stage(W), replica(W), reps(W), count(W), limit(W);
  for (std::size_t s = 0; s < S; ++s) {
    const std::size_t r = costs.first_host[s + 1] - costs.first_host[s];
    for (std::size_t q = 0; q < r; ++q) {
      const std::size_t w = costs.first_host[s] + q;
      stage[w] = s;
      replica[w] = q;
      reps[w] = r;
      count[w] = replica_minibatches(q, r, M);
      limit[w] = in_flight_limit(costs.first_host[s], r, W);
    }
  }
  // Arrival of a worker's k-th minibatch's activation (from the previous stage) and gradient
  // (from the next).
  std::vector<std::vector<double>> act_in(W), grad_in(W);
  for (std::size_t w = 0; w < W; ++w) {
    act_in[w].assign(count[w], stage[w] == 0 ? 0.0 : unknown);  // stage 0 reads its own data
    grad_in[w].assign(count[w], unknown);
  }
  std::vector<std::size_t> fwd(W, 0), bwd(W, 0);
  // gpu_free is unknown while a worker waits for its stage's all-reduce.
  std::vector<double> gpu_free(W, 0), nic_free(W, 0);
  // Per stage and round k: replicas done with their k-th backward, and the latest such time.
  std::vector<std::vector<std::size_t>> round_done(S);
  std::vector<std::vector<double>> round_end(S);
  for (std::size_t s = 0; s < S; ++s) {
    const std::size_t r = costs.first_host[s + 1] - costs.first_host[s];
    round_done[s].assign(updates(replica_minibatches(0, r, M)), 0);
    round_end[s].assign(updates(replica_minibatches(0, r, M)), 0);
  }
  // Arrival time of a transfer from worker `from` to worker `to` handed to `from`'s NIC at t.
  auto send = [&](std::size_t from, std::size_t to, double bytes, double t) {
    const double start = std::max(t, nic_free[from]);
    nic_free[from] = start + bytes / c.bandwidth_between(from, to);
    return nic_free[from] + c.latency_between(from, to);
  };
  // The worker running minibatch m of stage s, and m's index among that worker's minibatches.
  auto worker_of = [&](std::size_t s, std::size_t m) {
    const std::size_t r = costs.first_host[s + 1] - costs.first_host[s];
    return std::pair{costs.first_host[s] + m % r, m / r};
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (std::size_t w = 0; w < W; ++w) {
      const std::size_t s = stage[w];
      for (;;) {
        if (std::isnan(gpu_free[w])) break;  // in an all-reduce not yet priced
        const Op op = gpipe ? training::next_op_grouped(group, fwd[w], bwd[w], count[w])
                            : next_op_limited(limit[w], fwd[w], bwd[w], count[w]);
        if (op == Op::kNone) break;
        if (op == Op::kForward) {
          const std::size_t k = fwd[w], m = replica[w] + k * reps[w];
          if (std::isnan(act_in[w][k])) break;
          const double done = std::max(gpu_free[w], act_in[w][k]) + costs.forward_s[w];
          gpu_free[w] = done;
          ++fwd[w];
          if (s + 1 < S) {
            const auto [to, k_to] = worker_of(s + 1, m);
            act_in[to][k_to] = send(w, to, costs.boundary_bytes[s], done);
          } else {
            grad_in[w][k] = done;  // the loss is computed where the forward ends
          }
        } else {
          const std::size_t k = bwd[w], m = replica[w] + k * reps[w];
          if (std::isnan(grad_in[w][k])) break;
          const double done = std::max(gpu_free[w], grad_in[w][k]) + costs.backward_s[w];
          ++bwd[w];
          if (s > 0) {
            const auto [to, k_to] = worker_of(s - 1, m);
            grad_in[to][k_to] = send(w, to, costs.boundary_bytes[s - 1], done);
          }
          gpu_free[w] = done;
          if (reps[w] > 1 && (!gpipe || training::ends_group(group, k, count[w]))) {
            // Wait for the round's all-reduce among the replicas that have a u-th update.
            const std::size_t u = k / group;
            gpu_free[w] = unknown;
            const std::size_t first = costs.first_host[s];
            std::size_t members = 0;
            for (std::size_t q = 0; q < reps[w]; ++q)
              members += updates(replica_minibatches(q, reps[w], M)) > u ? 1 : 0;
            round_end[s][u] = std::max({round_end[s][u], done, nic_free[w]});
            if (++round_done[s][u] == members) {
              const double finish =
                  round_end[s][u] +
                  ring_allreduce_seconds(costs.parameter_bytes[s], first, members, c);
              for (std::size_t q = 0; q < members; ++q) {
                gpu_free[first + q] = finish;
                nic_free[first + q] = finish;
              }
            }
          }
        }
        progress = true;
      }
    }
  }
  double end = 0;  // when stage 0's workers are done
  for (std::size_t w = 0; w < W; ++w) {
    const bool stuck = bwd[w] != count[w] || std::isnan(gpu_free[w]);
    // GPipe's groups are each worker's own: a stage with more replicas than the one before can
    // wait, before its first backward, for forwards the earlier stage runs only after its
    // group's backwards. Such a configuration never finishes.
    if (stuck && gpipe) return std::numeric_limits<double>::infinity();
    MLSIM_CHECK(!stuck, "1F1B estimate deadlocked");
    if (stage[w] == 0) end = std::max(end, gpu_free[w]);
  }
  return end;
}

double steady_state_seconds(const std::vector<LayerCost>& layers, const Partition& p,
                            const Conditions& c, const ScheduleTiming& schedule) {
  const StageCosts costs = stage_costs(layers, p, c);
  std::size_t rounds = 1;
  for (std::size_t s = 0; s < p.stages(); ++s) rounds = std::lcm(rounds, p.replication(s));
  const bool gpipe = schedule.kind == training::PipelineSchedule::Kind::kGPipe;
  const std::size_t n = gpipe ? schedule.group * rounds : p.hosts_used() * rounds;
  const std::size_t lo = 2 * n, hi = gpipe ? 4 * n : 6 * n;
  const double t_hi = estimate_pipeline(costs, c, hi, schedule);
  if (std::isinf(t_hi)) return t_hi;  // a GPipe configuration that never finishes
  return (t_hi - estimate_pipeline(costs, c, lo, schedule)) / static_cast<double>(hi - lo);
}

}  // namespace mlsim::pipeline
