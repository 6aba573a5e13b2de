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
  // jobs"; dropped, like a stalled job; the cluster asks runs_on() first, so it sees this only
  // from a runner that answers runs_on() otherwise than its start()).
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
  // Whether the job's GPU memory limits the hosts it can run on (a planned pipeline under
  // `pipeline.memory`, communication_mode.hpp): the cluster then asks runs_on() of every
  // placement it would start the job on, and spreads the job over other hosts when the answer is
  // no (cluster_sim.hpp). False by default.
  virtual bool placement_limited(const JobSpec& /*job*/) const { return false; }
  // Whether the job can run on `hosts` (in placement order): for a placement-limited job,
  // whether some configuration of its stages fits those hosts' GPU memory. True by default.
  virtual bool runs_on(const JobSpec& /*job*/, std::span<const NodeId> /*hosts*/) const {
    return true;
  }
  // Whether placement_limited() can be true for some job of the run (the cluster's metric of
  // spread placements is reported only then).
  virtual bool limits_placement() const { return false; }
  // Ends a job it simulates now, unfinished (a node of its placement failed): its work in
  // flight is cancelled and neither `done` nor `failed` runs afterwards. Not from inside the
  // runner's own callbacks.
  virtual void kill(std::uint64_t id) = 0;
  virtual void report(Results& out) const = 0;
};

}  // namespace mlsim::cluster
