#include "models/cluster/cluster_sim.hpp"

#include <algorithm>
#include <cmath>

#include "sim_core/base/error.hpp"

namespace mlsim::cluster {
namespace {

// Bounded slowdown's threshold: jobs shorter than this count as this long, so that a 1-second job
// waiting a minute does not dominate a user's average (Feitelson's usual 10 s).
constexpr double kSlowdownFloorS = 10.0;

enum SeriesColumn : std::size_t { kAllocatedFraction = 0, kQueuedJobs = 1, kUpFraction = 2 };

}  // namespace

ClusterSimulation::ClusterSimulation(Engine& engine, ClusterParams params,
                                     std::unique_ptr<JobSource> source, std::uint64_t seed,
                                     NodeHealth* nodes, std::vector<NodeId> hosts)
    : engine_(engine),
      params_(std::move(params)),
      source_(std::move(source)),
      pool_(params_.types, params_.groups),
      fair_share_(params_.fair_share_half_life),
      type_rng_(seed, "cluster.gpu_types"),
      hosts_(hosts),
      series_("gpu_utilisation", {"allocated_fraction", "queued_jobs", "up_fraction"},
              params_.series_interval) {
  MLSIM_CHECK(params_.estimate_factor >= 1.0, "estimates must not be shorter than runtimes");
  pool_.set_racks(params_.racks);
  series_.set(Time::zero(), kUpFraction, 1.0);
  if (nodes)
    nodes->on_change([this, hosts = std::move(hosts)](NodeId host, bool up) {
      const auto it = std::find(hosts.begin(), hosts.end(), host);
      const auto node = static_cast<int>(it - hosts.begin());
      if (it == hosts.end() || node >= pool_.node_count()) return;  // not a pool node
      up ? on_node_repair(node) : on_node_failure(node);
    });
}

void ClusterSimulation::start() {
  pull_next_arrival();
}

bool ClusterSimulation::work_left() const {
  return !source_done_ || !queue_.empty() || !running_.empty();
}

double ClusterSimulation::progress() const {
  const std::uint64_t total = source_->total();
  return total == 0 ? 1.0 : static_cast<double>(finished_ + dropped_) / static_cast<double>(total);
}

void ClusterSimulation::pull_next_arrival() {
  std::optional<JobSpec> job = source_->next();
  if (!job) {
    source_done_ = true;
    return;
  }
  const Time at = std::max(job->submit, engine_.now());
  // A JobSpec and `this` exceed the engine's inline callback storage (48 bytes): one small
  // allocation per job, freed when it arrives.
  engine_.schedule_at(at, [this, spec = std::make_shared<JobSpec>(*job)] { on_arrival(*spec); });
}

void ClusterSimulation::on_arrival(JobSpec job) {
  ++submitted_;
  pull_next_arrival();
  if (runner_) runner_->admit(job);
  Queued q{std::move(job), 0, std::nullopt};
  TypeMask mask = q.spec.types;
  if (mask == 0 && params_.flexible_types) mask = pool_.all_types();
  if (mask == 0) {
    // Pinned to one type, drawn in proportion to GPUs among the types large enough for the job.
    std::int64_t weight = 0;
    for (std::size_t t = 0; t < pool_.types().size(); ++t)
      if (pool_.total_gpus_of(static_cast<int>(t)) >= q.spec.gpus)
        weight += pool_.total_gpus_of(static_cast<int>(t));
    if (weight > 0) {
      auto draw = static_cast<std::int64_t>(type_rng_.below(static_cast<std::uint64_t>(weight)));
      for (std::size_t t = 0; t < pool_.types().size(); ++t) {
        const int g = pool_.total_gpus_of(static_cast<int>(t));
        if (g < q.spec.gpus) continue;
        if (draw < g) {
          mask = TypeMask{1} << t;
          break;
        }
        draw -= g;
      }
    }
  }
  q.spec.types = mask;
  bool fits_somewhere = false;
  for (std::size_t t = 0; t < pool_.types().size(); ++t)
    if ((mask & (TypeMask{1} << t)) &&
        pool_.capacity_of(static_cast<int>(t), q.spec.gpus_per_node) >= q.spec.gpus)
      fits_somewhere = true;
  if (!fits_somewhere) {
    drop(q, "asks for more GPUs than any accepted GPU type has");
    return;
  }
  if (params_.user_gpu_quota > 0 && q.spec.gpus > params_.user_gpu_quota) {
    drop(q, "asks for more GPUs than its user's quota");
    return;
  }
  // A job whose GPUs' memory limits its hosts: dropped here only when no spread of it over the
  // whole cluster (every node up and empty) fits; otherwise it waits until one does.
  if (placement_limited(q.spec) && !spread_fits(q.spec, pool_.gpus_per_node())) {
    drop(q,
         "no placement on any number of hosts of an accepted GPU type has GPU memory for its "
         "pipeline's stages (workload.training.models[].pipeline.memory)");
    return;
  }
  account(engine_.now());
  queue_.push(std::move(q));
  series_.set(engine_.now(), kQueuedJobs, static_cast<double>(queue_.size()));
  request_pass();
}

void ClusterSimulation::request_pass() {
  if (pass_pending_) return;
  pass_pending_ = true;
  // After every other event at this instant, so simultaneous arrivals and ends are seen together.
  engine_.schedule_at(engine_.now(), [this] {
    pass_pending_ = false;
    pass();
  });
}

bool ClusterSimulation::eligible(const Queued& q) const {
  if (q.held) return false;
  return params_.user_gpu_quota == 0 ||
         fair_share_.allocated(q.spec.user) + q.spec.gpus <= params_.user_gpu_quota;
}

bool ClusterSimulation::runs_on(const JobSpec& job, const Placement& p) const {
  std::vector<NodeId> hosts;
  for (const Slice& s : p.slices) {
    MLSIM_CHECK(static_cast<std::size_t>(s.node) < hosts_.size(),
                "the detailed mode needs the topology host of every pool node");
    hosts.push_back(hosts_[static_cast<std::size_t>(s.node)]);
  }
  return runner_->runs_on(job, hosts);
}

// The accepted types of `job`, fastest first (ties: lower index), as place() prefers them.
namespace {
std::vector<int> accepted_fastest_first(const NodePool& pool, TypeMask accepted) {
  std::vector<int> types;
  for (std::size_t t = 0; t < pool.types().size(); ++t)
    if (accepted & (TypeMask{1} << t)) types.push_back(static_cast<int>(t));
  std::stable_sort(types.begin(), types.end(), [&](int a, int b) {
    return pool.types()[static_cast<std::size_t>(a)].time_factor <
           pool.types()[static_cast<std::size_t>(b)].time_factor;
  });
  return types;
}
}  // namespace

Placement ClusterSimulation::placement_for(const JobSpec& job, bool* spread) const {
  if (spread) *spread = false;
  Placement p = pool_.place(job.gpus, job.types, job.gpus_per_node);
  if (!p.ok() || !placement_limited(job) || runs_on(job, p)) return p;
  if (spread) *spread = true;
  const int most = std::min(job.gpus, pool_.node_count());
  for (int t : accepted_fastest_first(pool_, job.types)) {
    if (t != p.type) {
      Placement own = pool_.place_on_type(job.gpus, t);
      if (!own.ok()) continue;  // not enough GPUs of this type free: no spread either
      if (runs_on(job, own)) return own;
    }
    for (int hosts = 1; hosts <= most; ++hosts) {
      Placement s = pool_.place_spread(job.gpus, t, hosts);
      if (s.ok() && runs_on(job, s)) return s;
    }
  }
  if (spread) *spread = false;
  return {};
}

bool ClusterSimulation::spread_fits(const JobSpec& job, const std::vector<int>& free) const {
  const int most = std::min(job.gpus, pool_.node_count());
  for (int t : accepted_fastest_first(pool_, job.types))
    for (int hosts = 1; hosts <= most; ++hosts) {
      const Placement s = pool_.spread(free, job.gpus, t, hosts);
      if (s.ok() && runs_on(job, s)) return true;
    }
  return false;
}

Time ClusterSimulation::runtime_on(const JobSpec& job, int type) const {
  const double f = pool_.types()[static_cast<std::size_t>(type)].time_factor;
  const Time t = f == 1.0 ? job.work : Time::from_seconds_ceil(job.work.seconds() * f);
  return std::max(t, Time::ns(1));
}

Time ClusterSimulation::estimate_on(const JobSpec& job, int type) const {
  const Time run = runtime_on(job, type);
  const Time est = params_.estimate_factor == 1.0
                       ? run
                       : Time::from_seconds_ceil(run.seconds() * params_.estimate_factor);
  return startup() + std::max(est, run);
}

void ClusterSimulation::pass() {
  const Time now = engine_.now();
  fair_share_.advance(now);
  std::vector<std::uint64_t> started;
  const Queued* head = nullptr;  // the blocked job holding the reservation
  std::optional<Time> shadow;    // its reservation
  // Per node: GPUs free at the shadow time beyond the running and backfilled jobs. Per node,
  // not per type, so that the head fits at its reservation by placement's own rules (a job
  // taking tp GPUs from each host needs whole hosts' worth free, NodePool::fits).
  std::vector<int> spare;
  int tested = 0;
  // A job the runner limits by memory fits only where some spread of it would run
  // (placement_for finds one then).
  auto head_fits = [&](const std::vector<int>& free) {
    if (!pool_.fits(free, head->spec.gpus, head->spec.types, head->spec.gpus_per_node))
      return false;
    return !placement_limited(head->spec) || spread_fits(head->spec, free);
  };
  auto start = [&](Queued& q, const Placement& p, bool spread) {
    spread_for_memory_ += spread ? 1 : 0;
    start_job(q, p);
    started.push_back(q.spec.id);
  };

  // Returns false to end the pass.
  auto consider = [&](Queued& q) -> bool {
    if (!eligible(q)) return true;  // over its user's quota: skipped, blocks no one
    bool spread = false;
    if (!head) {
      const Placement p = placement_for(q.spec, &spread);
      if (p.ok()) {
        start(q, p, spread);
        return true;
      }
      if (params_.policy == Policy::kFcfs) return false;
      // Reservation: release the running jobs in order of estimated end until the job fits.
      head = &q;
      spare = pool_.free_per_node();
      std::vector<const Running*> by_end;
      for (const auto& [id, r] : running_) by_end.push_back(&r);
      std::stable_sort(by_end.begin(), by_end.end(), [](const Running* a, const Running* b) {
        return a->estimated_end < b->estimated_end;
      });
      for (const Running* r : by_end) {
        if (shadow && r->estimated_end > *shadow) break;
        for (const Slice& s : r->placement.slices)
          if (pool_.node_up(s.node)) spare[static_cast<std::size_t>(s.node)] += s.gpus;
        if (!shadow && head_fits(spare)) shadow = r->estimated_end;
      }
      if (shadow && !q.first_reservation) q.first_reservation = *shadow;
      return true;
    }
    // Backfill.
    if (++tested > params_.backfill_depth) return false;
    const Placement p = placement_for(q.spec, &spread);
    if (!p.ok()) return true;
    if (shadow && now + estimate_on(q.spec, p.type) > *shadow) {
      // Still running at the reservation: only if the reserved job fits beside it, on the
      // nodes this placement leaves (the placement it gets now; another one is not searched).
      std::vector<int> after = spare;
      NodePool::take_out(after, p);
      if (!head_fits(after)) return true;
      spare = std::move(after);
    }
    // Without a reservation (the head cannot fit before a repair) anything that fits may start.
    start(q, p, spread);
    return true;
  };
  if (params_.order == Order::kFairShare)
    queue_.visit_fair_share(fair_share_, consider);
  else
    queue_.visit_submit_order(consider);
  for (std::uint64_t id : started) queue_.erase(id);
  series_.set(now, kQueuedJobs, static_cast<double>(queue_.size()));
}

void ClusterSimulation::account(Time now) {
  const double dt = (now - area_last_).seconds();
  allocated_area_ += pool_.allocated_gpus() * dt;
  if (!queue_.empty()) {
    queued_seconds_ += dt;
    allocated_while_queued_area_ += pool_.allocated_gpus() * dt;
  }
  area_last_ = now;
}

void ClusterSimulation::allocated_changed() {
  const Time now = engine_.now();
  series_.set(now, kAllocatedFraction,
              static_cast<double>(pool_.allocated_gpus()) / pool_.total_gpus());
}

void ClusterSimulation::start_job(Queued job, const Placement& p) {
  const Time now = engine_.now();
  account(now);
  pool_.allocate(p);
  allocated_changed();
  fair_share_.add_rate(job.spec.user, job.spec.gpus);
  if (job.first_reservation && now > *job.first_reservation) ++reservations_missed_;
  Running r;
  r.start = now;
  r.useful_start = now + startup();
  r.end = r.useful_start + runtime_on(job.spec, p.type);
  r.estimated_end = now + estimate_on(job.spec, p.type);
  r.placement = p;
  const std::uint64_t id = job.spec.id;
  r.job = std::move(job);
  if (runner_)
    r.end_event = engine_.schedule_at(r.useful_start, [this, id] { start_useful_work(id); });
  else
    r.end_event = engine_.schedule_at(r.end, [this, id] { on_end(id); });
  running_.emplace(id, std::move(r));
}

void ClusterSimulation::start_useful_work(std::uint64_t id) {
  Running& r = running_.at(id);
  std::vector<NodeId> hosts;
  std::vector<int> gpus;
  for (const Slice& s : r.placement.slices) {
    MLSIM_CHECK(static_cast<std::size_t>(s.node) < hosts_.size(),
                "the detailed mode needs the topology host of every pool node");
    hosts.push_back(hosts_[static_cast<std::size_t>(s.node)]);
    gpus.push_back(s.gpus);
  }
  if (runner_->start(
          r.job.spec, hosts, gpus, r.placement.type, [this, id] { on_end(id); },
          [this, id](JobRunner::Failure why) { on_job_failed(id, why); })) {
    r.end_event = {};
    r.simulated = true;
    return;
  }
  r.end_event = engine_.schedule_at(r.end, [this, id] { on_end(id); });
}

void ClusterSimulation::on_end(std::uint64_t id) {
  auto it = running_.find(id);
  MLSIM_CHECK(it != running_.end(), "end of a job that is not running");
  Running r = std::move(it->second);
  running_.erase(it);
  const Time now = engine_.now();
  r.end = now;  // a job the runner simulated ends when its last iteration does
  fair_share_.advance(now);
  account(now);
  pool_.release(r.placement);
  allocated_changed();
  fair_share_.add_rate(r.job.spec.user, -r.job.spec.gpus);

  ++finished_;
  last_end_ = std::max(last_end_, now);
  const double gpus = r.job.spec.gpus;
  const double run_s = (r.end - r.useful_start).seconds();
  useful_gpu_seconds_ += gpus * run_s;
  startup_gpu_seconds_ += gpus * (r.useful_start - r.start).seconds();
  const double wait_s = (r.start - r.job.spec.submit).seconds();
  const double jct_s = (now - r.job.spec.submit).seconds();
  wait_.add(wait_s);
  jct_.add(jct_s);
  const auto u = static_cast<std::size_t>(r.job.spec.user);
  if (users_.size() <= u) users_.resize(u + 1);
  UserStats& us = users_[u];
  ++us.jobs;
  us.gpu_seconds += gpus * run_s;
  us.wait_seconds += wait_s;
  us.bounded_slowdown_sum += std::max(1.0, jct_s / std::max(run_s, kSlowdownFloorS));

  if (observer_) {
    JobRecord rec;
    rec.spec = r.job.spec;
    rec.finished = true;
    rec.start = r.start;
    rec.end = now;
    rec.type = r.placement.type;
    rec.slices = r.placement.slices;
    rec.first_reservation = r.job.first_reservation;
    rec.restarts = r.job.restarts;
    observer_(rec);
  }
  request_pass();
}

void ClusterSimulation::drop(const Queued& q, const std::string& reason) {
  ++dropped_;
  if (observer_) {
    JobRecord rec;
    rec.spec = q.spec;
    rec.drop_reason = reason;
    rec.first_reservation = q.first_reservation;
    rec.restarts = q.restarts;
    observer_(rec);
  }
}

void ClusterSimulation::on_node_failure(int node) {
  // Failures after the work is done do not count (the platform's events may go on).
  if (!work_left() || !pool_.node_up(node)) return;
  const Time now = engine_.now();
  ++failures_;
  fair_share_.advance(now);
  account(now);
  pool_.set_up(node, false);
  std::vector<std::uint64_t> hit;
  for (const auto& [id, r] : running_)
    for (const Slice& s : r.placement.slices)
      if (s.node == node) {
        hit.push_back(id);
        break;
      }
  for (std::uint64_t id : hit) interrupt(id, "its node failed", false);
  allocated_changed();
  series_.set(now, kUpFraction, static_cast<double>(pool_.up_gpus()) / pool_.total_gpus());
  series_.set(now, kQueuedJobs, static_cast<double>(queue_.size()));
  request_pass();
}

void ClusterSimulation::on_job_failed(std::uint64_t id, JobRunner::Failure why) {
  // The runner has freed the job; the cluster treats it as a node failure's job, except that a
  // requeued one waits for the links to change, and a stalled one is dropped (its
  // communication would stall again).
  const Time now = engine_.now();
  fair_share_.advance(now);
  account(now);
  auto it = running_.find(id);
  MLSIM_CHECK(it != running_.end() && it->second.simulated, "a failure of a job not simulated");
  it->second.simulated = false;  // nothing left to kill
  if (why == JobRunner::Failure::kNoMemory) {
    interrupt(id,
              "no configuration of its pipeline's stages fits the GPU memory of the hosts it was "
              "placed on (workload.training.models[].pipeline.memory)",
              false, /*drop=*/true);
  } else if (why == JobRunner::Failure::kStalled) {
    interrupt(id,
              "stalled: nothing happened in its training for system.stall_timeout (no compute "
              "op ended, no chunk came back): a livelock or deadlock of its communication",
              false, /*drop=*/true);
  } else {
    interrupt(id,
              "a transfer of its gradient synchronisation failed (no route left between its hosts)",
              true);
  }
  allocated_changed();
  series_.set(now, kQueuedJobs, static_cast<double>(queue_.size()));
  request_pass();
}

void ClusterSimulation::interrupt(std::uint64_t id, const std::string& reason, bool hold,
                                  bool drop_it) {
  const Time now = engine_.now();
  auto it = running_.find(id);
  MLSIM_CHECK(it != running_.end(), "a failure of a job that is not running");
  Running r = std::move(it->second);
  running_.erase(it);
  if (r.simulated)
    runner_->kill(id);  // its collectives in flight and its ops in progress are cancelled
  else
    engine_.cancel(r.end_event);
  pool_.release(r.placement);
  fair_share_.add_rate(r.job.spec.user, -r.job.spec.gpus);
  // Everything the job held its GPUs for is lost: it restarts from the beginning.
  lost_gpu_seconds_ += r.job.spec.gpus * (now - r.start).seconds();
  ++restarts_;
  ++r.job.restarts;
  if (drop_it || !params_.requeue_on_failure) {
    drop(r.job, reason);
  } else {
    r.job.first_reservation.reset();
    r.job.held = hold;
    held_ += hold ? 1 : 0;
    queue_.push(std::move(r.job));
  }
}

void ClusterSimulation::on_links_changed() {
  if (held_ == 0) return;
  held_ = 0;
  queue_.visit_submit_order([](Queued& q) {
    q.held = false;
    return true;
  });
  request_pass();
}

void ClusterSimulation::on_node_repair(int node) {
  if (pool_.node_up(node)) return;  // its failure came after the work was done
  pool_.set_up(node, true);
  if (work_left())
    series_.set(engine_.now(), kUpFraction,
                static_cast<double>(pool_.up_gpus()) / pool_.total_gpus());
  request_pass();
}

void ClusterSimulation::report(Results& out) const {
  // Without a time limit the run ends with the last job; a repair after it does not count.
  const Time end = work_left() ? std::max(last_end_, engine_.now()) : last_end_;
  const std::uint64_t unfinished = queue_.size() + running_.size();
  out.set_metric("jobs_submitted", static_cast<double>(submitted_));
  out.set_metric("jobs_finished", static_cast<double>(finished_));
  out.set_metric("jobs_dropped", static_cast<double>(dropped_));
  out.set_metric("jobs_unfinished", static_cast<double>(unfinished));
  out.set_summary("queue_delay", wait_.summary(), "_s");
  out.set_summary("jct", jct_.summary(), "_s");
  out.set_metric("makespan_s", end.seconds());
  const double capacity = static_cast<double>(pool_.total_gpus()) * end.seconds();
  const double allocated = allocated_area_ + pool_.allocated_gpus() * (end - area_last_).seconds();
  out.set_metric("gpu_allocated_mean", capacity > 0 ? allocated / capacity : 0);
  out.set_metric("gpu_utilisation_mean", capacity > 0 ? useful_gpu_seconds_ / capacity : 0);
  // While jobs wait: the share of the GPUs in use. Below 1 means idle GPUs beside waiting jobs
  // (head-of-line blocking, type pinning, fragmentation, failed nodes); the whole-run mean is
  // dominated by the trace's longest jobs running alone at the end.
  out.set_metric("gpu_allocated_while_queued",
                 queued_seconds_ > 0
                     ? allocated_while_queued_area_ / (queued_seconds_ * pool_.total_gpus())
                     : 0);
  out.set_metric("queue_nonempty_hours", queued_seconds_ / 3600);
  out.set_metric("useful_gpu_hours", useful_gpu_seconds_ / 3600);
  out.set_metric("startup_gpu_hours", startup_gpu_seconds_ / 3600);
  out.set_metric("lost_gpu_hours", lost_gpu_seconds_ / 3600);
  out.set_metric("node_failures", static_cast<double>(failures_));
  out.set_metric("job_restarts", static_cast<double>(restarts_));
  out.set_metric("reservations_missed", static_cast<double>(reservations_missed_));
  out.set_metric("installed_gpus", pool_.total_gpus());
  if (runner_ && runner_->limits_placement())
    out.set_metric("jobs_spread_for_memory", static_cast<double>(spread_for_memory_));

  // Jain's index over users of their mean bounded slowdown: 1 when every user waits alike
  // relative to the length of their jobs.
  double sum = 0, sum_sq = 0;
  int n = 0;
  nlohmann::json users = nlohmann::json::array();
  const auto& names = source_->users().names();
  for (std::size_t u = 0; u < users_.size(); ++u) {
    const UserStats& s = users_[u];
    if (s.jobs == 0) continue;
    const double sd = s.bounded_slowdown_sum / static_cast<double>(s.jobs);
    sum += sd;
    sum_sq += sd * sd;
    ++n;
    users.push_back(
        {{"user", u < names.size() ? names[u] : std::to_string(u)},
         {"jobs", s.jobs},
         {"gpu_hours", s.gpu_seconds / 3600},
         {"gpu_share", useful_gpu_seconds_ > 0 ? s.gpu_seconds / useful_gpu_seconds_ : 0},
         {"mean_wait_s", s.wait_seconds / static_cast<double>(s.jobs)},
         {"mean_bounded_slowdown", sd}});
  }
  out.set_metric("users", n);
  out.set_metric("jain_fairness_slowdown", n > 0 && sum_sq > 0 ? sum * sum / (n * sum_sq) : 1.0);
  out.details()["users"] = std::move(users);
  IntervalSeries series = series_;
  // The series may have seen a failure after the last job ended (before a later arrival that was
  // dropped); it ends with its last change then.
  out.add_series(series.finish(std::max(end, series.last_change())));
  if (runner_) runner_->report(out);
}

}  // namespace mlsim::cluster
