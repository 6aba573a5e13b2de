#pragma once
// PipeDream's 1F1B schedule (asynchronous, weight stashing, no flush), with PipeDream's stage
// replication, and an exact timing model of it and of GPipe (estimate_pipeline).
//
// Order. Workers are hosts; stage s runs on r_s of them (partition.hpp). Minibatch m goes to
// replica m mod r_s of stage s (PipeDream's round-robin, msr-fiddle/pipedream
// runtime/communication.py, get_messaging_index). Each worker admits at most
//   limit = (W - 1 - hosts of the earlier stages) / r_s + 1
// of its minibatches in flight (forward done, backward not), W the hosts in use: PipeDream's
// warm-up count (runtime/runtime.py, RuntimeManager: num_warmup_minibatches) plus the one of
// the steady state; a straight pipeline of S stages gives stage s the limit S - s. A worker runs
// the forward of its next minibatch while fewer than `limit` are in flight and minibatches
// remain, otherwise the backward of its oldest one: warm-up, strict alternation, then the
// remaining backwards. It waits for the input of the op the order names (an activation from the
// previous stage, a gradient from the next) even when the other kind is ready, as PipeDream's
// runtime does.
//
// Timing (estimate_1f1b): each op starts when its worker is free and its input has arrived. A
// worker sends an activation forward after each forward and a gradient back after each backward
// (the last stage's backward follows its own forward); transfers leave a host one at a time, in
// the order the worker produced them (one NIC), taking bytes / bandwidth between the two hosts,
// and arrive one latency later. With routes (pipeline_costs.hpp Conditions::Routes: a server's
// uplink on a leaf-spine) the bandwidth is the route's narrowest link with every shared link on
// it divided among the configuration's hosts sending across it (transfer_bandwidths), and the
// latency the route's. The replicas of a stage all-reduce its parameters after their
// k-th backwards (data parallelism inside the stage, as PipeDream's DistributedDataParallel
// does): the all-reduce starts once every replica with a k-th minibatch has finished that
// backward and its NIC is free, takes a ring's time (ring_allreduce_seconds), and holds those
// replicas' GPUs and NICs until it ends (the weight update needs the summed gradient). The
// gradient for the previous stage leaves before the all-reduce. Transfers into a host are not
// serialised here (only out of it); the simulated run (pipeline_training.hpp) shares every link
// under the scenario's network backend.
#include <cstddef>

#include "models/pipeline/pipeline_costs.hpp"
#include "models/training/pipeline_schedule.hpp"

namespace mlsim::pipeline {

// The 1F1B order itself is the training core's (models/training/pipeline_schedule.hpp), which
// the run executes; this file times it.
using Op = training::StageOp;
using training::in_flight_limit;
using training::next_op_limited;
using training::replica_minibatches;

// The order of stage `stage` of a straight pipeline of `stages` (limit stages - stage).
inline Op next_op(std::size_t stage, std::size_t stages, std::size_t forwards,
                  std::size_t backwards, std::size_t minibatches) {
  return next_op_limited(stages - stage, forwards, backwards, minibatches);
}

// A ring all-reduce of `bytes` among hosts [first, first + n): 2(n - 1) steps, each moving
// bytes / n over the narrowest host link of the ring plus the longest hop latency
// (sim_core/collectives ring with one chunk and window 1). Zero for one host or no bytes.
double ring_allreduce_seconds(double bytes, std::size_t first, std::size_t n, const Conditions& c);

// The schedule a timing model times: the run's `system.schedule`.
struct ScheduleTiming {
  training::PipelineSchedule::Kind kind = training::PipelineSchedule::Kind::kOneFOneB;
  std::size_t group = 1;  // GPipe: micro-batches per flush of each worker (its own numbering)
};

// Seconds from the start until the last stage-0 worker finishes its last backward (and the
// all-reduce after it), under `schedule`. GPipe (the core's order, next_op_grouped): a worker
// runs every forward of its group, then the group's backwards; only the group's last backward
// hands the gradients over, so a replicated stage all-reduces once per group (its k-th round
// joins the replicas' k-th groups) and the next group's forwards wait for it; a stage of one
// host updates at once. Everything else (transfers, NICs, the ring) is timed as for 1F1B.
// Infinite for a GPipe configuration that deadlocks (the groups are each worker's own, so a stage
// with more replicas than the one before may wait for forwards held behind the earlier stage's
// flush); the planners never choose one.
double estimate_pipeline(const StageCosts& costs, const Conditions& c, std::size_t minibatches,
                         const ScheduleTiming& schedule);
inline double estimate_1f1b(const StageCosts& costs, const Conditions& c, std::size_t minibatches) {
  return estimate_pipeline(costs, c, minibatches, {});
}

// The steady state of a configuration under `schedule` (default 1F1B): the time per minibatch
// the timing model settles to over an endless run. Every event time of the schedule (an op's
// end, a transfer's arrival, an all-reduce's end) is the largest of earlier events plus a
// duration: a max-plus linear recurrence, whose event times per round grow, after a finite
// transient, by the same delta every `cycle` rounds (the mean of its critical cycle, so it is
// never below the bottleneck bound of bottleneck.hpp). A round is n minibatches: hosts used x
// the least common multiple of the replication factors under 1F1B (every worker runs the same
// ops each round), the flush group x that multiple under GPipe (whole flushes of every stage).
// steady_state times one endless run (every worker's order without the drain), extends it
// round by round and looks, after 4, 6, 8, 12, ... 128 rounds (kSteadyStateRounds), for the
// smallest cycle whose shift holds on every event from some round on (at least twice): seconds
// = delta / (cycle x n), periodic. A round's events are the schedule's whole state (no event
// waits on one more than a round back), so one such shift repeats forever; the result is exact
// up to the rounding of the run's sums (tolerance 1e-10 of its length). When 128 rounds show no
// period (cycles of nearly equal mean can take long to separate), seconds is the slope of the
// rounds' last events over the second half of that run, and periodic is false. Infinite for a
// GPipe configuration that deadlocks. On the shipped profiles almost every configuration the
// planners time is periodic after 1 to 3 rounds (docs/pipeline.md, "The steady state").
inline constexpr std::size_t kSteadyStateRounds[] = {4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128};
struct SteadyState {
  double seconds = 0;                // per minibatch
  bool periodic = false;             // false: the long run's slope, not a proven period
  std::size_t transient_rounds = 0;  // rounds before the periodic regime (periodic only)
  std::size_t cycle_rounds = 0;      // rounds per period (periodic only)
  std::size_t minibatches_per_round = 0;
  std::size_t rounds_simulated = 0;  // rounds of the run that decided
};
SteadyState steady_state(const std::vector<LayerCost>& layers, const Partition& p,
                         const Conditions& c, const ScheduleTiming& schedule = {});
// steady_state(...).seconds, what the planners minimise.
double steady_state_seconds(const std::vector<LayerCost>& layers, const Partition& p,
                            const Conditions& c, const ScheduleTiming& schedule = {});

}  // namespace mlsim::pipeline
