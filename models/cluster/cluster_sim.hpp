#pragma once
// The shared-cluster simulation: jobs arrive from a JobSource, wait in one queue, and a scheduler
// pass (after every arrival, completion, failure and repair) starts what it can on the NodePool.
//
//   fcfs           strict order: the first job that does not fit blocks everything behind it.
//   easy_backfill  EASY: the first blocked job gets a reservation (the earliest time it fits,
//                  from the running jobs' estimated ends); later jobs start now only if they do
//                  not delay it (they end, by estimate, before the reservation, or leave it
//                  room beside them). "Fits" counts free GPUs per node, by placement's own rules
//                  (NodePool::fits: a job taking tp GPUs from each host needs whole hosts).
// SING-like options (docs/cluster.md, [inferred]): fair-share ordering (decayed per-user usage),
// per-user GPU quotas, flexible GPU types (a job accepts every type of the pool), start-up cost
// with or without pre-initialised environments. Nodes fail and are repaired through the platform
// (NodeHealth, driven by the scenario's `events` section): pool node i is topology host i; the jobs
// on a failed node are killed and requeued (or dropped).
//
// Memory: the queued and running jobs and per-user totals; a finished job leaves only its
// contribution to the statistics.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "models/cluster/fair_share.hpp"
#include "models/cluster/interval_series.hpp"
#include "models/cluster/job_queue.hpp"
#include "models/cluster/job_runner.hpp"
#include "models/cluster/job_source.hpp"
#include "models/cluster/node_pool.hpp"
#include "sim_core/base/stats.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/engine/random.hpp"
#include "sim_core/hardware/node_health.hpp"
#include "sim_core/run/results.hpp"

namespace mlsim::cluster {

enum class Policy { kFcfs, kEasyBackfill };
enum class Order { kSubmit, kFairShare };

struct ClusterParams {
  std::vector<GpuType> types;
  std::vector<NodeGroup> groups;
  Policy policy = Policy::kFcfs;
  Order order = Order::kSubmit;
  // User estimate of a job's runtime = its true runtime x this (>= 1: estimates never short).
  double estimate_factor = 1.0;
  // Backfill looks at this many jobs behind the blocked one per pass (Slurm: bf_max_job_test).
  int backfill_depth = 100;
  Time fair_share_half_life = Time::zero();  // 0: usage never decays
  int user_gpu_quota = 0;                    // 0: no quota
  // Jobs that name no type accept every type (true) or are pinned to one type drawn with
  // probability proportional to the type's GPUs among those large enough (false).
  bool flexible_types = false;
  Time startup_cold = Time::zero();  // environment set-up before useful work
  Time startup_warm = Time::zero();  // the same with a pre-initialised environment
  bool preinitialised = false;
  bool requeue_on_failure = true;  // false: a job hit by a failure is dropped
  // Rack-local placement (NodePool::set_racks): per pool node, its rack; empty = off.
  std::vector<int> racks;
  Time series_interval = Time::s(3600);
};

// What happened to one job, handed to the optional observer (tests) when it leaves.
struct JobRecord {
  JobSpec spec;
  bool finished = false;  // false: dropped
  std::string drop_reason;
  Time start, end;  // of the last (successful) attempt
  int type = -1;
  std::vector<Slice> slices;
  std::optional<Time> first_reservation;
  int restarts = 0;
};

class ClusterSimulation {
 public:
  // With `nodes`, failures and repairs of host `hosts[i]` fail and repair pool node i (the
  // simulation subscribes; `nodes` must outlive it).
  ClusterSimulation(Engine& engine, ClusterParams params, std::unique_ptr<JobSource> source,
                    std::uint64_t seed, NodeHealth* nodes = nullptr,
                    std::vector<NodeId> hosts = {});

  void start();
  double progress() const;
  void report(Results& out) const;

  void set_observer(std::function<void(const JobRecord&)> f) { observer_ = std::move(f); }
  // The detailed mode: `runner` (which must outlive the simulation) times the jobs it simulates
  // on the topology hosts their placement gives them (pool node i = hosts[i]). Set before
  // start(). A node failure kills the simulated jobs on the node (JobRunner::kill); a job whose
  // communication fails is requeued or dropped as a node failure's jobs are, and a requeued one
  // waits for the next on_links_changed().
  void set_runner(JobRunner* runner) { runner_ = runner; }
  // The links changed (a failure or a repair, of a link or a node): jobs held after a
  // communication failure may be placed again.
  void on_links_changed();
  const NodePool& pool() const { return pool_; }
  std::size_t queued() const { return queue_.size(); }
  std::size_t running() const { return running_.size(); }

 private:
  using Queued = QueuedJob;
  struct Running {
    Queued job;
    Placement placement;
    Time start, useful_start, end, estimated_end;
    EventHandle end_event;   // the start-up's end with a runner, else the job's end
    bool simulated = false;  // the runner times it (its end_event is then empty)
  };
  struct UserStats {
    std::uint64_t jobs = 0;
    double gpu_seconds = 0;  // useful work on the GPUs it got
    double wait_seconds = 0;
    double bounded_slowdown_sum = 0;
  };

  void pull_next_arrival();
  void on_arrival(JobSpec job);
  void request_pass();
  void pass();
  bool eligible(const Queued& q) const;
  // Where the job starts now: place()'s placement, unless the runner says the job cannot run on
  // those hosts (JobRunner::runs_on: a pipeline whose stages fit its GPUs' memory on no
  // configuration of them); then, over its accepted types from the fastest, that type's own
  // placement and the job spread over 1, 2, ... nodes of it (NodePool::place_spread), the first
  // the runner accepts (`spread` set when it is not place()'s). !ok(): the job waits.
  Placement placement_for(const JobSpec& job, bool* spread = nullptr) const;
  // Whether a job the runner limits would run on some spread of its GPUs over nodes with
  // `free[n]` free GPUs (an accepted type, any number of nodes).
  bool spread_fits(const JobSpec& job, const std::vector<int>& free) const;
  bool placement_limited(const JobSpec& job) const {
    return runner_ != nullptr && job.gpus_per_node == 0 && runner_->placement_limited(job);
  }
  bool runs_on(const JobSpec& job, const Placement& p) const;
  void start_job(Queued job, const Placement& p);
  void start_useful_work(std::uint64_t id);
  void on_end(std::uint64_t id);
  void on_node_failure(int node);
  void on_job_failed(std::uint64_t id, JobRunner::Failure why);
  // Ends a running job unfinished (its work is lost) and requeues or drops it by the policy;
  // `hold`: a requeued job waits for on_links_changed(); `drop_it`: dropped whatever the policy.
  void interrupt(std::uint64_t id, const std::string& reason, bool hold, bool drop_it = false);
  void on_node_repair(int node);
  bool work_left() const;
  void drop(const Queued& q, const std::string& reason);
  Time runtime_on(const JobSpec& job, int type) const;
  Time estimate_on(const JobSpec& job, int type) const;
  Time startup() const {
    return params_.preinitialised ? params_.startup_warm : params_.startup_cold;
  }
  void allocated_changed();
  // Integrates the allocated GPUs (and, while the queue is not empty, the time and the GPUs in
  // use) up to `now`; call before any change to the allocation or the queue.
  void account(Time now);

  Engine& engine_;
  ClusterParams params_;
  std::unique_ptr<JobSource> source_;
  NodePool pool_;
  FairShare fair_share_;
  RandomStream type_rng_;
  std::function<void(const JobRecord&)> observer_;
  JobRunner* runner_ = nullptr;
  std::vector<NodeId> hosts_;  // pool node -> topology host

  JobQueue queue_;
  std::map<std::uint64_t, Running> running_;  // by job id
  bool pass_pending_ = false;
  bool source_done_ = false;

  // Statistics.
  std::uint64_t submitted_ = 0, finished_ = 0, dropped_ = 0, restarts_ = 0, failures_ = 0;
  std::size_t held_ = 0;  // queued jobs held after a communication failure
  std::uint64_t reservations_missed_ = 0;
  std::uint64_t spread_for_memory_ = 0;  // jobs started on a spread placement (placement_for)
  LogHistogram wait_, jct_;
  std::vector<UserStats> users_;
  double useful_gpu_seconds_ = 0, startup_gpu_seconds_ = 0, lost_gpu_seconds_ = 0;
  double allocated_area_ = 0;  // GPU-seconds allocated
  Time area_last_ = Time::zero();
  double queued_seconds_ = 0, allocated_while_queued_area_ = 0;
  Time last_end_ = Time::zero();
  IntervalSeries series_;
};

}  // namespace mlsim::cluster
