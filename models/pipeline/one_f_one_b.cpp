#include "models/pipeline/one_f_one_b.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
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

namespace {

// Every event of a run by stage s and pipeline minibatch m: when the op ends on its GPU (a
// backward before its stage's all-reduce), when its transfer arrives (the activation at stage
// s + 1, the gradient at stage s - 1), and per stage and update u when a replicated stage's
// all-reduce ends. They hold everything the schedule carries from one minibatch to the next: a
// GPU is free when its last op or all-reduce ends, a NIC when its last transfer leaves (one
// latency before it arrives) or its all-reduce ends.
struct Trace {
  std::vector<std::vector<double>> forward, activation, backward, gradient, allreduce;
};

// estimate_pipeline, recording every event into `trace` when it is given.
double simulate(const StageCosts& costs, const Conditions& c, std::size_t minibatches,
                const ScheduleTiming& schedule, Trace* trace) {
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
  if (trace) {
    for (auto* events : {&trace->forward, &trace->activation, &trace->backward, &trace->gradient})
      events->assign(S, std::vector<double>(M, unknown));
    trace->allreduce.assign(S, {});
    for (std::size_t s = 0; s < S; ++s) trace->allreduce[s].assign(round_end[s].size(), unknown);
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
          if (trace) trace->forward[s][m] = done;
          if (s + 1 < S) {
            const auto [to, k_to] = worker_of(s + 1, m);
            act_in[to][k_to] = send(w, to, costs.boundary_bytes[s], done);
            if (trace) trace->activation[s][m] = act_in[to][k_to];
          } else {
            grad_in[w][k] = done;  // the loss is computed where the forward ends
          }
        } else {
          const std::size_t k = bwd[w], m = replica[w] + k * reps[w];
          if (std::isnan(grad_in[w][k])) break;
          const double done = std::max(gpu_free[w], grad_in[w][k]) + costs.backward_s[w];
          ++bwd[w];
          if (trace) trace->backward[s][m] = done;
          if (s > 0) {
            const auto [to, k_to] = worker_of(s - 1, m);
            grad_in[to][k_to] = send(w, to, costs.boundary_bytes[s - 1], done);
            if (trace) trace->gradient[s][m] = grad_in[to][k_to];
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
              if (trace) trace->allreduce[s][u] = finish;
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

}  // namespace

double estimate_pipeline(const StageCosts& costs, const Conditions& c, std::size_t minibatches,
                         const ScheduleTiming& schedule) {
  return simulate(costs, c, minibatches, schedule, nullptr);
}

namespace {

// The round vectors of a traced run: round k lists every event of minibatches [k n, (k + 1) n)
// and the all-reduces of their updates (u per `group` minibatches of a replica), in one order.
std::vector<std::vector<double>> round_vectors(const Trace& t, const StageCosts& costs,
                                               std::size_t rounds, std::size_t n,
                                               std::size_t group) {
  const std::size_t S = costs.stages();
  std::vector<std::vector<double>> x(rounds);
  for (std::size_t k = 0; k < rounds; ++k) {
    std::vector<double>& v = x[k];
    for (std::size_t s = 0; s < S; ++s) {
      for (std::size_t m = k * n; m < (k + 1) * n; ++m) {
        v.push_back(t.forward[s][m]);
        v.push_back(t.backward[s][m]);
        if (s + 1 < S) v.push_back(t.activation[s][m]);
        if (s > 0) v.push_back(t.gradient[s][m]);
      }
      const std::size_t r = costs.first_host[s + 1] - costs.first_host[s];
      if (r == 1) continue;  // a stage of one host reduces nothing
      const std::size_t per_round = n / (r * group);
      for (std::size_t u = k * per_round; u < (k + 1) * per_round; ++u)
        v.push_back(t.allreduce[s][u]);
    }
  }
  return x;
}

// The delta by which every event of round b follows the same event of round a, if there is one
// (within `tolerance`).
std::optional<double> uniform_shift(const std::vector<double>& a, const std::vector<double>& b,
                                    double tolerance) {
  const double delta = b.front() - a.front();
  for (std::size_t i = 1; i < a.size(); ++i)
    if (std::abs(b[i] - a[i] - delta) > tolerance) return std::nullopt;
  return delta;
}

}  // namespace

SteadyState steady_state(const std::vector<LayerCost>& layers, const Partition& p,
                         const Conditions& c, const ScheduleTiming& schedule) {
  const StageCosts costs = stage_costs(layers, p, c);
  std::size_t lcm = 1;
  for (std::size_t s = 0; s < p.stages(); ++s) lcm = std::lcm(lcm, p.replication(s));
  const bool gpipe = schedule.kind == training::PipelineSchedule::Kind::kGPipe;
  const std::size_t group = gpipe ? schedule.group : 1;
  MLSIM_CHECK(group > 0, "GPipe needs at least one micro-batch per flush");
  SteadyState out;
  out.minibatches_per_round = gpipe ? group * lcm : p.hosts_used() * lcm;
  const std::size_t n = out.minibatches_per_round;
  for (const std::size_t rounds : kSteadyStateRounds) {
    out.rounds_simulated = rounds;
    // One round more than searched: 1F1B's drain changes only the last `hosts used`
    // minibatches' events (a worker's order departs from the endless one after its last
    // forward), GPipe's nothing (whole flushes).
    Trace trace;
    out.seconds = simulate(costs, c, (rounds + 1) * n, schedule, &trace);
    if (std::isinf(out.seconds)) return out;  // a GPipe configuration that deadlocks
    const auto x = round_vectors(trace, costs, rounds, n, group);
    // An event's time is a sum of op and transfer times rounded once per addition, far less
    // than this tolerance, which is far less than any op of the shipped profiles.
    const double tolerance = 1e-10 * *std::max_element(x.back().begin(), x.back().end());
    // The smallest cycle of rounds, and the earliest round from which every round (two at
    // least) is the round one cycle before shifted by one delta. A round's events are the
    // schedule's whole state (no op waits on one more than `hosts used` minibatches back), and
    // the max-plus recurrence they follow commutes with a shift, so one exact shift repeats
    // forever; the second check guards against the tolerance.
    for (std::size_t cycle = 1; cycle + 2 <= rounds; ++cycle) {
      std::optional<double> delta;
      std::size_t from = rounds - cycle;
      for (std::size_t k = rounds - cycle; k-- > 0;) {
        const auto d = uniform_shift(x[k], x[k + cycle], tolerance);
        if (!d || (delta && std::abs(*d - *delta) > tolerance)) break;
        if (!delta) delta = d;
        from = k;
      }
      if (rounds - cycle - from >= 2) {
        out.seconds = *delta / static_cast<double>(cycle * n);
        out.periodic = true;
        out.transient_rounds = from;
        out.cycle_rounds = cycle;
        return out;
      }
    }
    // Not periodic within the longest run: the slope of the rounds' last events over its
    // second half.
    const auto last = [&](std::size_t k) { return *std::max_element(x[k].begin(), x[k].end()); };
    const std::size_t a = rounds / 2, b = rounds - 1;
    out.seconds = (last(b) - last(a)) / static_cast<double>((b - a) * n);
  }
  return out;
}

double steady_state_seconds(const std::vector<LayerCost>& layers, const Partition& p,
                            const Conditions& c, const ScheduleTiming& schedule) {
  return steady_state(layers, p, c, schedule).seconds;
}

}  // namespace mlsim::pipeline
