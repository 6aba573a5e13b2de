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

// Every event of a run: per pipeline minibatch m and stage s, when the op ends on its GPU (a
// backward before its stage's all-reduce) and when its transfer arrives (the activation at
// stage s + 1, the gradient at stage s - 1; the last stage's loss is ready, and stage 0's
// gradient is done, when the op ends), at events[(m S + s) 4 + {0, 1, 2, 3}] for the forward,
// its activation, the backward and its gradient; per stage and update u, when a replicated
// stage's all-reduce ends (allreduce[s][u]). They hold everything the schedule carries from one
// minibatch to the next: a GPU is free when its last op or all-reduce ends, a NIC when its
// last transfer leaves (one latency before it arrives) or its all-reduce ends.
struct Trace {
  std::vector<double> events;
  std::vector<std::vector<double>> allreduce;
  double& at(std::size_t m, std::size_t s, std::size_t S, std::size_t kind) {
    return events[(m * S + s) * 4 + kind];
  }
};
enum TraceEvent : std::size_t { kForwardEnd, kActivationIn, kBackwardEnd, kGradientIn };

// The timing model's run of a schedule. Finite (`minibatches` given): warm-up, steady state and
// drain of that many. Endless: every worker's order is the one of an endless run (no drain), and
// the run grows with `advance`, so that steady_state extends it round by round without starting
// over. Recording the Trace when `tracing`.
class Timing {
 public:
  Timing(const StageCosts& costs, const Conditions& c, const ScheduleTiming& schedule,
         std::optional<std::size_t> minibatches, bool tracing)
      : costs_(costs),
        c_(c),
        gpipe_(schedule.kind == training::PipelineSchedule::Kind::kGPipe),
        group_(gpipe_ ? schedule.group : 1),
        S_(costs.stages()),
        W_(costs.first_host.back()),
        M_(minibatches.value_or(kEndless)),
        tracing_(tracing) {
    MLSIM_CHECK(group_ > 0, "GPipe needs at least one micro-batch per flush");
    // With routes, each transfer's share of the shared links it crosses in this configuration.
    if (c.routed()) send_bandwidth_ = transfer_bandwidths(costs.first_host, c);
    // Per worker (host): its stage, replica index, replication, minibatch count and limit.
    for (std::size_t s = 0; s < S_; ++s) {
      const std::size_t r = costs.first_host[s + 1] - costs.first_host[s];
      for (std::size_t q = 0; q < r; ++q) {
        stage_.push_back(s);
        replica_.push_back(q);
        reps_.push_back(r);
        count_.push_back(replica_minibatches(q, r, M_));
        limit_.push_back(in_flight_limit(costs.first_host[s], r, W_));
      }
    }
    act_in_.resize(W_);
    grad_in_.resize(W_);
    fwd_.assign(W_, 0);
    bwd_.assign(W_, 0);
    gpu_free_.assign(W_, 0);
    nic_free_.assign(W_, 0);
    round_done_.resize(S_);
    round_end_.resize(S_);
    trace_.allreduce.resize(S_);
  }

  // Makes room for runs of up to `minibatches` without reallocating.
  void reserve(std::size_t minibatches) {
    for (std::size_t w = 0; w < W_; ++w) {
      const std::size_t n = replica_minibatches(replica_[w], reps_[w], minibatches);
      act_in_[w].reserve(n);
      grad_in_[w].reserve(n);
    }
    for (std::size_t s = 0; s < S_; ++s) {
      const std::size_t r = costs_.first_host[s + 1] - costs_.first_host[s];
      const std::size_t n = updates(replica_minibatches(0, r, minibatches));
      round_done_[s].reserve(n);
      round_end_[s].reserve(n);
      if (tracing_) trace_.allreduce[s].reserve(n);
    }
    if (tracing_) trace_.events.reserve(4 * S_ * minibatches);
  }

  // Runs every op of minibatches below `horizon` that waits for nothing from `horizon` on.
  void advance(std::size_t horizon) {
    horizon = std::min(horizon, M_);
    for (std::size_t w = 0; w < W_; ++w) {
      const std::size_t n = replica_minibatches(replica_[w], reps_[w], horizon);
      act_in_[w].resize(n, stage_[w] == 0 ? 0.0 : kUnknown);  // stage 0 reads its own data
      grad_in_[w].resize(n, kUnknown);
    }
    for (std::size_t s = 0; s < S_; ++s) {
      const std::size_t r = costs_.first_host[s + 1] - costs_.first_host[s];
      const std::size_t n = updates(replica_minibatches(0, r, horizon));
      round_done_[s].resize(n, 0);
      round_end_[s].resize(n, 0);
      if (tracing_) trace_.allreduce[s].resize(n, kUnknown);
    }
    if (tracing_) trace_.events.resize(4 * S_ * horizon, kUnknown);
    horizon_ = horizon;
    run();
  }

  // When stage 0's workers are done (a finite run advanced to its end); infinite for a GPipe
  // configuration that never finishes.
  double end() const {
    double end = 0;
    for (std::size_t w = 0; w < W_; ++w) {
      const bool stuck = bwd_[w] != count_[w] || std::isnan(gpu_free_[w]);
      // GPipe's groups are each worker's own: a stage with more replicas than the one before
      // can wait, before its first backward, for forwards the earlier stage runs only after
      // its group's backwards. Such a configuration never finishes.
      if (stuck && gpipe_) return std::numeric_limits<double>::infinity();
      MLSIM_CHECK(!stuck, "1F1B estimate deadlocked");
      if (stage_[w] == 0) end = std::max(end, gpu_free_[w]);
    }
    return end;
  }

  const Trace& trace() const { return trace_; }
  bool gpipe() const { return gpipe_; }

 private:
  static constexpr std::size_t kEndless = std::numeric_limits<std::size_t>::max() / 4;
  static constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();

  // Weight updates of a worker with n minibatches: one per backward (1F1B), one per group.
  std::size_t updates(std::size_t n) const { return (n + group_ - 1) / group_; }

  // Arrival time of a transfer from worker `from` to worker `to` handed to `from`'s NIC at t.
  double send(std::size_t from, std::size_t to, double bytes, double t) {
    const double start = std::max(t, nic_free_[from]);
    const double bandwidth = send_bandwidth_.empty() ? c_.bandwidth_between(from, to)
                                                     : send_bandwidth_[from * c_.host_count() + to];
    nic_free_[from] = start + bytes / bandwidth;
    return nic_free_[from] + c_.latency_between(from, to);
  }

  // The worker running minibatch m of stage s, and m's index among that worker's minibatches.
  std::pair<std::size_t, std::size_t> worker_of(std::size_t s, std::size_t m) const {
    const std::size_t r = costs_.first_host[s + 1] - costs_.first_host[s];
    return {costs_.first_host[s] + m % r, m / r};
  }

  void record(std::size_t m, std::size_t s, TraceEvent kind, double t) {
    if (tracing_) trace_.at(m, s, S_, kind) = t;
  }

  void run() {
    for (bool progress = true; progress;) {
      progress = false;
      for (std::size_t w = 0; w < W_; ++w) {
        const std::size_t s = stage_[w];
        for (;;) {
          if (std::isnan(gpu_free_[w])) break;  // in an all-reduce not yet priced
          const Op op = gpipe_ ? training::next_op_grouped(group_, fwd_[w], bwd_[w], count_[w])
                               : next_op_limited(limit_[w], fwd_[w], bwd_[w], count_[w]);
          if (op == Op::kNone) break;
          if (op == Op::kForward) {
            const std::size_t k = fwd_[w], m = replica_[w] + k * reps_[w];
            if (m >= horizon_ || std::isnan(act_in_[w][k])) break;
            const double done = std::max(gpu_free_[w], act_in_[w][k]) + costs_.forward_s[w];
            gpu_free_[w] = done;
            ++fwd_[w];
            double arrival = done;
            if (s + 1 < S_) {
              const auto [to, k_to] = worker_of(s + 1, m);
              act_in_[to][k_to] = arrival = send(w, to, costs_.boundary_bytes[s], done);
            } else {
              grad_in_[w][k] = done;  // the loss is computed where the forward ends
            }
            record(m, s, kForwardEnd, done);
            record(m, s, kActivationIn, arrival);
          } else {
            const std::size_t k = bwd_[w], m = replica_[w] + k * reps_[w];
            if (std::isnan(grad_in_[w][k])) break;
            const double done = std::max(gpu_free_[w], grad_in_[w][k]) + costs_.backward_s[w];
            ++bwd_[w];
            double arrival = done;
            if (s > 0) {
              const auto [to, k_to] = worker_of(s - 1, m);
              grad_in_[to][k_to] = arrival = send(w, to, costs_.boundary_bytes[s - 1], done);
            }
            record(m, s, kBackwardEnd, done);
            record(m, s, kGradientIn, arrival);
            gpu_free_[w] = done;
            if (reps_[w] > 1 && (!gpipe_ || training::ends_group(group_, k, count_[w])))
              join_allreduce(w, k, done);
          }
          progress = true;
        }
      }
    }
  }

  // Worker w waits, after its k-th backward (ending at `done`), for the round's all-reduce
  // among the replicas that have a u-th update.
  void join_allreduce(std::size_t w, std::size_t k, double done) {
    const std::size_t s = stage_[w], u = k / group_, first = costs_.first_host[s];
    gpu_free_[w] = kUnknown;
    std::size_t members = 0;
    for (std::size_t q = 0; q < reps_[w]; ++q)
      members += updates(replica_minibatches(q, reps_[w], M_)) > u ? 1 : 0;
    round_end_[s][u] = std::max({round_end_[s][u], done, nic_free_[w]});
    if (++round_done_[s][u] == members) {
      const double finish =
          round_end_[s][u] + ring_allreduce_seconds(costs_.parameter_bytes[s], first, members, c_);
      for (std::size_t q = 0; q < members; ++q) {
        gpu_free_[first + q] = finish;
        nic_free_[first + q] = finish;
      }
      if (tracing_) trace_.allreduce[s][u] = finish;
    }
  }

  const StageCosts& costs_;
  const Conditions& c_;
  bool gpipe_;
  std::size_t group_, S_, W_, M_, horizon_ = 0;
  bool tracing_;
  std::vector<std::size_t> stage_, replica_, reps_, count_, limit_;
  std::vector<double> send_bandwidth_;  // transfer_bandwidths; empty without routes
  // Arrival of a worker's k-th minibatch's activation (from the previous stage) and gradient
  // (from the next).
  std::vector<std::vector<double>> act_in_, grad_in_;
  std::vector<std::size_t> fwd_, bwd_;
  // gpu_free is unknown while a worker waits for its stage's all-reduce.
  std::vector<double> gpu_free_, nic_free_;
  // Per stage and update u: replicas done with their u-th update's backward, and the latest
  // such time.
  std::vector<std::vector<std::size_t>> round_done_;
  std::vector<std::vector<double>> round_end_;
  Trace trace_;
};

}  // namespace

double estimate_pipeline(const StageCosts& costs, const Conditions& c, std::size_t minibatches,
                         const ScheduleTiming& schedule) {
  Timing run(costs, c, schedule, minibatches, /*tracing=*/false);
  run.advance(minibatches);
  return run.end();
}

namespace {

// The rounds of a traced run (n minibatches each; a replicated stage of r hosts all-reduces n /
// (r group) times per round).
class Rounds {
 public:
  Rounds(const Trace& t, const StageCosts& costs, std::size_t n, std::size_t group)
      : t_(t), costs_(costs), n_(n), group_(group), per_round_(4 * costs.stages() * n) {}

  // Whether some event of round k never happened: a deadlock (a worker stuck at one op runs
  // none of its later ones, and every round holds ops of every worker).
  bool unfinished(std::size_t k) const {
    const auto nan = [](double t) { return std::isnan(t); };
    const auto first = t_.events.begin() + static_cast<std::ptrdiff_t>(k * per_round_);
    bool out = std::any_of(first, first + static_cast<std::ptrdiff_t>(per_round_), nan);
    each_allreduce(k, [&](double t) { out = out || nan(t); });
    return out;
  }

  // The largest event time of round k.
  double latest(std::size_t k) const {
    const auto first = t_.events.begin() + static_cast<std::ptrdiff_t>(k * per_round_);
    double out = *std::max_element(first, first + static_cast<std::ptrdiff_t>(per_round_));
    each_allreduce(k, [&](double t) { out = std::max(out, t); });
    return out;
  }

  // The delta by which every event of round b follows the same event of round a, if there is
  // one (within `tolerance`).
  std::optional<double> shift(std::size_t a, std::size_t b, double tolerance) const {
    const double* x = t_.events.data() + a * per_round_;
    const double* y = t_.events.data() + b * per_round_;
    const double delta = y[0] - x[0];
    for (std::size_t i = 1; i < per_round_; ++i)
      if (std::abs(y[i] - x[i] - delta) > tolerance) return std::nullopt;
    for (std::size_t s = 0; s < costs_.stages(); ++s) {
      const std::size_t r = costs_.first_host[s + 1] - costs_.first_host[s], u = n_ / (r * group_);
      if (r == 1) continue;  // a stage of one host reduces nothing
      for (std::size_t i = 0; i < u; ++i)
        if (std::abs(t_.allreduce[s][b * u + i] - t_.allreduce[s][a * u + i] - delta) > tolerance)
          return std::nullopt;
    }
    return delta;
  }

 private:
  template <class F>
  void each_allreduce(std::size_t k, F f) const {
    for (std::size_t s = 0; s < costs_.stages(); ++s) {
      const std::size_t r = costs_.first_host[s + 1] - costs_.first_host[s], u = n_ / (r * group_);
      if (r > 1)
        for (std::size_t i = k * u; i < (k + 1) * u; ++i) f(t_.allreduce[s][i]);
    }
  }

  const Trace& t_;
  const StageCosts& costs_;
  std::size_t n_, group_, per_round_;
};

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
  Timing run(costs, c, schedule, std::nullopt, /*tracing=*/true);
  run.reserve((kSteadyStateRounds[2] + 1) * n);  // most configurations settle by then
  for (const std::size_t rounds : kSteadyStateRounds) {
    out.rounds_simulated = rounds;
    // One round more than searched: a 1F1B backward follows forwards of up to `hosts used`
    // minibatches after it in its worker's order, a GPipe backward only forwards of its own
    // flush (inside the round).
    run.advance((rounds + 1) * n);
    const Rounds x(run.trace(), costs, n, group);
    if (x.unfinished(rounds - 1)) {
      // GPipe's groups are each worker's own: a stage with more replicas than the one before
      // can wait for forwards the earlier stage runs only after its group's backwards.
      MLSIM_CHECK(gpipe, "1F1B estimate deadlocked");
      out.seconds = std::numeric_limits<double>::infinity();
      return out;
    }
    // An event's time is a sum of op and transfer times rounded once per addition, far less
    // than this tolerance, which is far less than any op of the shipped profiles.
    const double tolerance = 1e-10 * x.latest(rounds - 1);
    // The smallest cycle of rounds, and the earliest round from which every round (two at
    // least) is the round one cycle before shifted by one delta. A round's events are the
    // schedule's whole state (no op waits on an event more than a round back), and the
    // max-plus recurrence they follow commutes with a shift, so one exact shift repeats
    // forever; the second check guards against the tolerance.
    for (std::size_t cycle = 1; cycle + 2 <= rounds; ++cycle) {
      std::optional<double> delta;
      std::size_t from = rounds - cycle;
      for (std::size_t k = rounds - cycle; k-- > 0;) {
        const auto d = x.shift(k, k + cycle, tolerance);
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
    const std::size_t a = rounds / 2, b = rounds - 1;
    out.seconds = (x.latest(b) - x.latest(a)) / static_cast<double>((b - a) * n);
  }
  return out;
}

double steady_state_seconds(const std::vector<LayerCost>& layers, const Partition& p,
                            const Conditions& c, const ScheduleTiming& schedule) {
  return steady_state(layers, p, c, schedule).seconds;
}

}  // namespace mlsim::pipeline
