#pragma once
// How a placed job's useful work is timed. Without a runner (the job-level mode) a job runs for
// its trace runtime scaled to the GPU type it got. A runner (the detailed mode,
// communication_mode.hpp) may instead simulate the job on the hosts its placement gave it, and
// say when it ends.
#include <cstdint>
#include <functional>
#include <span>

#include "models/cluster/job.hpp"
#include "sim_core/network/topology.hpp"
#include "sim_core/run/results.hpp"

namespace mlsim::cluster {

class JobRunner {
 public:
  virtual ~JobRunner() = default;
  // At arrival, in submit order whatever the scheduling policy: settles what the job will run
  // (its model, its iterations), so that every policy runs the same jobs.
  virtual void admit(JobSpec& job) = 0;
  // Why a simulated job could not go on: a transfer of its gradient synchronisation found no
  // route (a link or switch down), nothing happened in it for the stall timeout (a livelock
  // or deadlock of its communication: retrying it would stall again), or no configuration of a
  // planned pipeline's stages fits its hosts' GPU memory (docs/cluster.md, "Pipeline-parallel
  // jobs"; dropped, like a stalled job).
  enum class Failure { kNoRoute, kStalled, kNoMemory };
  // The job's useful work starts now on `hosts` (one per node of its placement, in placement
  // order), `gpus[i]` of them on hosts[i], with GPUs of pool type `type`. Returns false when the
  // runner does not simulate this job (the cluster then times it as the job-level mode does); else
  // calls, once and from an engine event, either `done` when the job ends or `failed` when it
  // cannot go on. The runner has freed the job when it calls `failed`; the cluster then applies its
  // failure policy (requeue or drop) as for a node failure to kNoRoute, and drops a kStalled or
  // kNoMemory job.
  virtual bool start(const JobSpec& job, std::span<const NodeId> hosts, std::span<const int> gpus,
                     int type, std::function<void()> done, std::function<void(Failure)> failed) = 0;
  // Ends a job it simulates now, unfinished (a node of its placement failed): its work in
  // flight is cancelled and neither `done` nor `failed` runs afterwards. Not from inside the
  // runner's own callbacks.
  virtual void kill(std::uint64_t id) = 0;
  virtual void report(Results& out) const = 0;
};

}  // namespace mlsim::cluster
