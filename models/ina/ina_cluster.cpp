#include "models/ina/ina_cluster.hpp"

#include <algorithm>
#include <map>

#include "models/ina/atp_policy.hpp"
#include "models/ina/dsa_policy.hpp"
#include "models/ina/network_path.hpp"
#include "models/ina/packet_path.hpp"
#include "models/ina/switchml_policy.hpp"
#include "models/training/policies.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/base/stats.hpp"

namespace mlsim::ina {

std::string_view policy_name(PolicyKind p) {
  switch (p) {
    case PolicyKind::kSwitchMl:
      return "switchml";
    case PolicyKind::kAtp:
      return "atp";
    case PolicyKind::kDsa:
      return "dsa";
  }
  return "?";
}

double JobOutcome::mean_iteration_s() const {
  if (iteration_marks.size() < 2) return 0;
  return (iteration_marks.back() - iteration_marks.front()).seconds() /
         static_cast<double>(iteration_marks.size() - 1);
}

struct InaCluster::OwnCompute {
  explicit OwnCompute(Engine& engine, std::size_t nodes)
      : speeds(nodes), hardware(nodes), compute(engine, hardware, speeds, costs) {}
  HostSpeeds speeds;
  NodeHardware hardware;
  CostModel costs;
  Compute compute;
};

InaCluster::InaCluster(Engine& engine, ClusterParams params, Network* network,
                       const Topology* topology, Compute* compute)
    : engine_(engine),
      params_(std::move(params)),
      loss_(params_.loss_rate, params_.seed, params_.loss_rule) {
  const ClusterParams& p = params_;
  if (p.jobs.empty()) throw InputError("workload.jobs", "no jobs");
  const bool switchml = p.policy == PolicyKind::kSwitchMl;
  values_per_packet_ = switchml ? p.switchml_values_per_packet : p.atp_values_per_packet;
  burst_packets_ = std::max(1, p.burst_values / values_per_packet_);
  packet_bytes_ = Bytes{p.header_bytes.count + 4LL * values_per_packet_};
  const std::int64_t aggregator_bytes = 4LL * values_per_packet_;

  const int jobs = static_cast<int>(p.jobs.size());
  if (switchml) {
    const int partitions = p.switchml_partitions > 0 ? p.switchml_partitions : jobs;
    if (partitions < jobs)
      throw InputError("system.switchml.partitions",
                       "fewer SwitchML partitions than jobs is not modelled");
    // Each slot has a shadow copy: 2 aggregators of one packet's payload.
    const std::int64_t slots = p.aggregator_memory.count / (2 * aggregator_bytes);
    const std::int64_t slot_units = slots / burst_packets_;
    if (slot_units / partitions < 1)
      throw InputError("system.aggregator_memory",
                       "too little memory for one SwitchML slot (burst) per job: " +
                           std::to_string(slots) + " slots, " + std::to_string(partitions) +
                           " partitions, bursts of " + std::to_string(burst_packets_));
    policy_ = std::make_unique<SwitchMlPolicy>(*this, static_cast<std::size_t>(slot_units),
                                               partitions, jobs);
  } else {
    const std::int64_t units = p.aggregator_memory.count / aggregator_bytes / burst_packets_;
    if (units < 1)
      throw InputError("system.aggregator_memory", "too little memory for one aggregator");
    if (p.policy == PolicyKind::kDsa)
      policy_ = std::make_unique<DsaPolicy>(*this, static_cast<std::size_t>(units));
    else
      policy_ = std::make_unique<AtpPolicy>(*this, static_cast<std::size_t>(units));
  }

  policy_->set_pipeline_latency(p.switch_latency);
  if (p.occupancy_interval > Time::zero()) policy_->pool().record_intervals(p.occupancy_interval);

  if (switchml && p.scheduler != "fifo")
    throw InputError("system.scheduler",
                     "SwitchML streams a job's chunks through its slots in production order; "
                     "only the framework's \"fifo\" order is modelled with it");
  if (p.scheduler_config.partition > 0 && p.scheduler_config.partition < values_per_packet_)
    throw InputError("system.partition",
                     "a chunk smaller than one packet's " + std::to_string(values_per_packet_) +
                         " values is not modelled (a packet carries one chunk)");
  const training::SchedulerFactory& make_scheduler =
      training::training_policies().schedulers.get(p.scheduler, "system.scheduler").value;

  SenderConfig sender;
  sender.packet_bytes = static_cast<double>(packet_bytes_.count);
  sender.max_window_packets = p.sender_threads * p.window_cap_packets_per_thread;
  sender.initial_window_packets = sender.max_window_packets;
  sender.increase_bytes_per_ack = p.window_increase_bytes;
  sender.retransmission_timeout = switchml ? p.switchml_timeout : p.atp_timeout;
  sender.stall_timeout = p.stall_timeout;

  // Plans, shared between jobs of the same profile; communication intensity for DSA's priority.
  std::map<const DnnProfile*, std::shared_ptr<const JobPlan>> plans;
  std::vector<std::shared_ptr<const JobPlan>> job_plans;
  for (const JobSpec& spec : p.jobs) {
    PlanOptions o;
    o.values_per_packet = values_per_packet_;
    o.burst_packets = burst_packets_;
    o.include_input_layers = p.include_input_layers;
    o.partition = p.scheduler_config.partition;
    auto& plan = plans[spec.profile.get()];
    if (!plan) plan = std::make_shared<const JobPlan>(make_job_plan(*spec.profile, o));
    job_plans.push_back(plan);
    const double comm = static_cast<double>(plan->packets()) *
                        static_cast<double>(packet_bytes_.count) / p.link_bandwidth.bytes_per_s;
    // Synchronous training: an iteration's compute is its slowest worker's (their GPUs may
    // differ).
    double compute_s = spec.worker_times.empty() ? plan->compute().seconds() : 0;
    for (const auto& times : spec.worker_times) {
      Time t;
      for (const OpTimes& op : *times) t += op.forward + op.backward;
      compute_s = std::max(compute_s, t.seconds());
    }
    intensity_.push_back(comm / std::max(1e-12, compute_s));
  }
  // Control-plane priority (DSA) [inferred]: jobs ranked by communication intensity, the most
  // communication-intensive highest; equal intensities share a rank.
  std::vector<double> distinct = intensity_;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());

  std::size_t hosts = 0;
  for (const JobSpec& spec : p.jobs) hosts += static_cast<std::size_t>(spec.workers) + 1;
  if (!compute) {
    own_compute_ =
        std::make_unique<OwnCompute>(engine_, topology ? topology->nodes().size() : hosts);
    compute = &own_compute_->compute;
  }
  hosts = 0;
  for (int j = 0; j < jobs; ++j) {
    const JobSpec& spec = p.jobs[static_cast<std::size_t>(j)];
    const JobPlan& plan = *job_plans[static_cast<std::size_t>(j)];
    const auto id = static_cast<std::uint16_t>(j);
    const auto rank =
        static_cast<std::uint8_t>(std::lower_bound(distinct.begin(), distinct.end(),
                                                   intensity_[static_cast<std::size_t>(j)]) -
                                  distinct.begin());
    host_base_.push_back(hosts);
    hosts += static_cast<std::size_t>(spec.workers) + 1;
    for (int w = 0; w <= spec.workers; ++w)
      host_role_.push_back({id, static_cast<std::uint16_t>(w)});
    SenderConfig s = sender;
    s.slot_window = policy_->slot_window(id);
    // The core job: the plan's layers, one host per worker, each worker's layer times on its
    // host's GPU (or the profile's, as measured).
    training::JobSpec core;
    for (const LayerPlan& l : plan.layers) core.parameters.push_back(l.elements);
    core.iterations = static_cast<std::size_t>(spec.iterations);
    MLSIM_CHECK(
        spec.worker_times.empty() || static_cast<int>(spec.worker_times.size()) == spec.workers,
        "one layer-time table per worker");
    for (int w = 0; w < spec.workers; ++w) {
      const std::size_t h = host_base_.back() + static_cast<std::size_t>(w);
      core.workers.push_back(topology ? topology->hosts().at(h) : static_cast<NodeId>(h));
      std::vector<training::LayerTimes> times;
      if (spec.worker_times.empty()) {
        for (const LayerPlan& l : plan.layers) times.push_back({l.forward, l.backward});
      } else {
        const LayerTimes& t = *spec.worker_times[static_cast<std::size_t>(w)];
        MLSIM_CHECK(t.size() == plan.layers.size(), "a time per layer of the plan");
        for (const OpTimes& op : t) times.push_back({op.forward, op.backward});
      }
      core.times.push_back(std::move(times));
    }
    jobs_.push_back(std::make_unique<InaJob>(
        engine_, *compute, id, job_plans[static_cast<std::size_t>(j)], std::move(core),
        make_scheduler, p.scheduler_config, rank, s, counters_,
        [this](const Packet& q) { send_from_worker(q); },
        [this](InaJob& done) { job_finished(done); }));
    servers_.push_back(std::make_unique<ParameterServer>(
        id, spec.workers, p.policy == PolicyKind::kDsa && p.selective_retransmission,
        // A result can go missing only under loss or, on the network path, when a failed link
        // leaves no route; only then must the PS answer retransmissions of finished chunks.
        /*answer_late_resends=*/loss_.enabled() || p.data_path == DataPathKind::kNetwork,
        [this](const Packet& q) { send_from_ps(q); }, counters_));
  }
  ps_busy_until_.assign(jobs_.size(), Time::zero());
  if (p.data_path == DataPathKind::kPacket) {
    path_ = std::make_unique<PacketPath>(engine_, *this, *policy_, hosts, p.link_bandwidth,
                                         p.link_latency, packet_bytes_, p.ecn_threshold_bytes);
  } else {
    MLSIM_CHECK(network && topology, "the ina network path without a network");
    MLSIM_CHECK(topology->hosts().size() >= hosts, "ina: fewer topology hosts than placed");
    NodeId switch_node = 0;
    if (p.switch_node.empty()) {
      std::size_t switches = 0;
      for (NodeId n = 0; n < topology->nodes().size(); ++n)
        if (topology->node(n).kind == NodeKind::kSwitch) {
          switch_node = n;
          ++switches;
        }
      MLSIM_CHECK(switches == 1, "ina: no switch_node and not exactly one switch");
    } else {
      const auto found = topology->find(p.switch_node);
      MLSIM_CHECK(found.has_value(), "ina: unknown switch_node");
      switch_node = *found;
    }
    std::vector<NodeId> host_nodes(topology->hosts().begin(),
                                   topology->hosts().begin() + static_cast<std::ptrdiff_t>(hosts));
    path_ = std::make_unique<NetworkPath>(engine_, *network, *topology, switch_node,
                                          std::move(host_nodes), *this, *policy_, packet_bytes_,
                                          p.ecn_threshold_bytes);
  }
}

InaCluster::~InaCluster() = default;

void InaCluster::start() {
  for (auto& job : jobs_) {
    InaJob* j = job.get();
    engine_.schedule_at(params_.jobs[j->id()].arrival, [this, j] {
      policy_->job_started(j->id());
      j->start();
    });
  }
}

double InaCluster::progress() const {
  double done = 0, total = 0;
  for (const auto& j : jobs_) {
    total += j->iterations();
    done += j->finished() || j->failed()
                ? j->iterations()
                : static_cast<double>(
                      std::max<std::size_t>(j->core().iteration_starts().size(), 1) - 1);
  }
  return total > 0 ? done / total : 1;
}

std::int64_t InaCluster::expected_elements() const {
  std::int64_t n = 0;
  for (const auto& j : jobs_) n += j->plan().elements() * j->workers() * j->iterations();
  return n;
}

bool InaCluster::lost(Hop hop, const Packet& p, std::uint16_t to) {
  if (!loss_.lost(hop, p, to)) return false;
  counters_.lost_packets += p.packets;
  return true;
}

void InaCluster::send_from_worker(const Packet& p) {
  path_->to_switch(worker_host(p.job, p.worker), p, /*forwarded=*/false,
                   lost(Hop::kWorkerToSwitch, p, 0));
}

void InaCluster::to_ps(const Packet& p) {
  MLSIM_CHECK(policy_->uses_parameter_server(), "a policy without PS sent to the PS");
  // Fallback traffic: everything but the aggregates the switch completed itself.
  const bool complete_aggregate =
      p.kind == PacketKind::kPartial && p.bitmap == full_bitmap(jobs_[p.job]->workers());
  if (!complete_aggregate)
    counters_.ps_fallback_bytes += static_cast<std::uint64_t>(p.packets) * packet_bytes_.count;
  path_->from_switch(ps_host(p.job), p, lost(Hop::kSwitchToPs, p, 0));
}

void InaCluster::send_from_ps(const Packet& p) {
  path_->to_switch(ps_host(p.job), p, /*forwarded=*/true, lost(Hop::kPsToSwitch, p, 0));
}

void InaCluster::multicast(const Packet& p) {
  for (int w = 0; w < jobs_[p.job]->workers(); ++w) to_worker(p, static_cast<std::uint16_t>(w));
}

void InaCluster::to_worker(const Packet& p, std::uint16_t w) {
  path_->from_switch(worker_host(p.job, w), p, lost(Hop::kSwitchToWorker, p, w));
}

void InaCluster::at_host(std::size_t host, const Packet& p) {
  const HostRole role = host_role_[host];
  InaJob& job = *jobs_[role.job];
  if (job.failed()) {
    counters_.packets_after_abort += p.packets;  // in flight when the job was aborted
    return;
  }
  if (role.index == job.workers()) {
    ParameterServer* ps = servers_[role.job].get();
    if (params_.ps_aggregation.bytes_per_s <= 0) {
      ps->on_packet(p);
      return;
    }
    // The PS sums each packet's payload at its rate, one after another, before it counts.
    const double payload = 4.0 * values_per_packet_ * p.packets;
    Time& busy = ps_busy_until_[role.job];
    busy = std::max(busy, engine_.now()) +
           Time::from_seconds_ceil(payload / params_.ps_aggregation.bytes_per_s);
    engine_.schedule_at(busy, [ps, p] { ps->on_packet(p); });
  } else if (p.kind == PacketKind::kResult) {
    job.sync().on_result(role.index, p);
  } else {
    job.sync().on_resend_request(role.index, p);
  }
}

void InaCluster::job_finished(InaJob& job) {
  if (job.failed())
    policy_->job_aborted(job.id());
  else
    policy_->job_finished(job.id());
  JobOutcome o;
  const JobSpec& spec = params_.jobs[job.id()];
  o.model = spec.model;
  o.workers = job.workers();
  o.iterations = job.iterations();
  o.priority = job.priority();
  o.communication_intensity = intensity_[job.id()];
  o.gpus = spec.gpus;
  o.arrival = spec.arrival;
  o.finish = job.finished_at();
  o.iteration_marks = job.iteration_marks();
  o.failed = job.failed();
  outcomes_.push_back(std::move(o));
  if (job.failed()) {
    ++failed_jobs_;
    return;
  }
  ++finished_jobs_;
  last_finish_ = std::max(last_finish_, job.finished_at());
}

void InaCluster::report(Results& out) const {
  const Time end = last_finish_;
  ExactQuantiles jct, iteration;
  nlohmann::json table = nlohmann::json::array();
  for (const JobOutcome& o : outcomes_) {
    // A failed job has no completion time; its iterations before the abort still count.
    if (!o.failed) jct.add(o.jct().seconds());
    // (A failed job's marks are its iteration starts, without the finish.)
    for (std::size_t i = 1; i < o.iteration_marks.size(); ++i)
      iteration.add((o.iteration_marks[i] - o.iteration_marks[i - 1]).seconds());
    table.push_back({{"model", o.model},
                     {"status", o.failed ? "failed" : "finished"},
                     {"workers", o.workers},
                     {"iterations", o.iterations},
                     {"priority", o.priority},
                     {"communication_intensity", o.communication_intensity},
                     {"gpus", o.gpus},
                     {"arrival_s", o.arrival.seconds()},
                     {"finish_s", o.finish.seconds()},
                     {"jct_s", o.failed ? nlohmann::json() : nlohmann::json(o.jct().seconds())},
                     {"mean_iteration_s", o.mean_iteration_s()}});
  }
  out.set_summary("jct", jct.summary(), "_s");
  out.set_summary("iteration_time", iteration.summary(), "_s");
  out.set_metric("jobs_finished", static_cast<double>(finished_jobs_));
  out.set_metric("jobs_failed", static_cast<double>(failed_jobs_));
  out.set_metric("jobs_total", static_cast<double>(jobs_.size()));
  out.set_metric("makespan_s", last_finish_.seconds());
  const AggregatorSlots& pool = policy_->pool();
  out.set_metric("aggregators",
                 static_cast<double>(pool.size() * static_cast<std::size_t>(burst_packets_)));
  out.set_metric("aggregator_occupancy_mean", pool.mean_occupancy(end));
  out.set_metric("aggregator_idle_reserved_mean", pool.mean_idle_reserved(end));
  out.set_metric("aggregator_occupancy_peak", pool.peak_occupancy());
  // Switch-memory utilisation: the time-averaged share of aggregator memory held by a chunk
  // (aggregator_idle_reserved_mean is the part of it that is complete and only waiting).
  out.set_metric("switch_memory_utilisation", pool.mean_occupancy(end));
  const InaCounters& c = counters_;
  out.set_metric("gradient_packets", static_cast<double>(c.gradient_packets));
  out.set_metric("retransmitted_packets", static_cast<double>(c.retransmitted_packets));
  out.set_metric("timeouts", static_cast<double>(c.timeouts));
  out.set_metric("collision_packets", static_cast<double>(c.collision_packets));
  out.set_metric("fallback_packets", static_cast<double>(c.fallback_packets));
  out.set_metric("ps_fallback_bytes", static_cast<double>(c.ps_fallback_bytes));
  out.set_metric("preemptions", static_cast<double>(c.preemptions));
  out.set_metric("resend_requests", static_cast<double>(c.resend_requests));
  out.set_metric("wrong_sums", static_cast<double>(c.wrong_sums));
  out.set_metric("duplicate_results", static_cast<double>(c.duplicate_results));
  out.set_metric("lost_packets", static_cast<double>(c.lost_packets));
  out.set_metric("packets_after_abort", static_cast<double>(c.packets_after_abort));
  if (params_.data_path == DataPathKind::kNetwork) {
    out.set_metric("undelivered_packets", static_cast<double>(path_->undelivered_packets()));
    out.details()["data_path"] = "network";
  }
  out.set_metric("late_results", static_cast<double>(c.late_results));
  out.set_metric("late_retransmissions", static_cast<double>(c.late_retransmissions));
  out.set_metric("result_reanswers", static_cast<double>(c.result_reanswers));
  out.set_metric("burst_packets", burst_packets_);
  out.details()["jobs"] = std::move(table);
  if (const auto iv = pool.intervals(end)) {
    // One row per interval, stamped with its start.
    TimeSeries s{"aggregator_occupancy", {"occupancy", "idle_reserved"}, {}};
    for (std::size_t k = 0; k < iv->occupancy.size(); ++k)
      s.add(Time::ns(static_cast<std::int64_t>(k) * iv->width.count_ns()),
            {iv->occupancy[k], iv->idle_reserved[k]});
    out.add_series(std::move(s));
  }
  out.details()["policy"] = std::string(policy_->name());
}

}  // namespace mlsim::ina
