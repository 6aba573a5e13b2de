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

namespace {

// The switch node hosting the program on the network path: system.switch_node, or the
// topology's only switch (the scenario reader has checked either).
NodeId program_switch(const ClusterParams& p, const Topology& topology) {
  if (p.switch_node.empty()) {
    NodeId switch_node = 0;
    std::size_t switches = 0;
    for (NodeId n = 0; n < topology.nodes().size(); ++n)
      if (topology.node(n).kind == NodeKind::kSwitch) {
        switch_node = n;
        ++switches;
      }
    MLSIM_CHECK(switches == 1, "ina: no switch_node and not exactly one switch");
    return switch_node;
  }
  const auto found = topology.find(p.switch_node);
  MLSIM_CHECK(found.has_value(), "ina: unknown switch_node");
  return *found;
}

}  // namespace

// One switch of the two-level hierarchy (aggregation_levels.hpp) on the network path: the root
// (the program's switch node, its policy in programs_) or a rack's switch with its own policy.
class InaCluster::LevelSwitch final : public LevelPorts {
 public:
  LevelSwitch(InaCluster& cluster, NodeId node) : LevelPorts(node), cluster_(cluster) {}
  std::unique_ptr<AggregationPolicy> policy;  // a rack's own (null at the root)

  Time now() const override { return cluster_.engine_.now(); }
  int workers_of(std::uint16_t job) const override { return cluster_.jobs_[job]->workers(); }
  InaCounters& counters() override { return cluster_.counters_; }

 protected:
  const JobLevels* levels_of(std::uint16_t job) const override {
    const JobLevels& l = cluster_.levels_[job];
    return l.two_level() ? &l : nullptr;
  }
  std::int64_t packet_bytes_of(std::uint16_t job) const override {
    return cluster_.format_[job].packet_bytes.count;
  }
  void to_switch(NodeId sw, const Packet& p, bool down) override {
    cluster_.network_path_->between_switches(node(), sw, cluster_.ps_host(p.job), p, down);
  }
  void to_ps_host(const Packet& p) override {
    cluster_.network_path_->from_switch_at(node(), cluster_.ps_host(p.job), p,
                                           cluster_.lost(Hop::kSwitchToPs, p, 0));
  }
  void to_worker_host(const Packet& p, std::uint16_t w) override {
    cluster_.network_path_->from_switch_at(node(), cluster_.worker_host(p.job, w), p,
                                           cluster_.lost(Hop::kSwitchToWorker, p, w));
  }

 private:
  InaCluster& cluster_;
};

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
  const int jobs = static_cast<int>(p.jobs.size());
  // Each job's aggregation policy (its own `policy`, else system.policy) and packet format.
  std::vector<int> jobs_of(3, 0);  // by PolicyKind
  for (const JobSpec& spec : p.jobs) {
    const PolicyKind kind = spec.policy.value_or(p.policy);
    const bool switchml = kind == PolicyKind::kSwitchMl;
    Format f;
    f.policy = kind;
    f.values_per_packet = switchml ? p.switchml_values_per_packet : p.atp_values_per_packet;
    f.burst_packets = std::max(1, p.burst_values / f.values_per_packet);
    f.packet_bytes = Bytes{p.header_bytes.count + 4LL * f.values_per_packet};
    format_.push_back(f);
    ++jobs_of[static_cast<std::size_t>(kind)];
  }
  const int switchml_jobs = jobs_of[static_cast<std::size_t>(PolicyKind::kSwitchMl)];
  const int shared_jobs = jobs - switchml_jobs;
  if (jobs_of[static_cast<std::size_t>(PolicyKind::kAtp)] > 0 &&
      jobs_of[static_cast<std::size_t>(PolicyKind::kDsa)] > 0)
    throw InputError("workload.jobs",
                     "ATP and DSA jobs on one switch are not modelled (one shared-pool program "
                     "per switch); SwitchML jobs may share the switch with either");
  const bool mixed = switchml_jobs > 0 && shared_jobs > 0;
  // The register memory: all of it to the one policy, or, with SwitchML beside ATP/DSA,
  // system.switchml.memory (default: the SwitchML jobs' equal share per job) for SwitchML's
  // static partitions and the rest for the shared pool [inferred: how a switch running both
  // programs splits its registers is not in papers.md; each job's equal share is the neutral
  // choice].
  std::int64_t switchml_memory = switchml_jobs > 0 ? p.aggregator_memory.count : 0;
  if (mixed) {
    switchml_memory = p.switchml_memory.count > 0
                          ? p.switchml_memory.count
                          : p.aggregator_memory.count * switchml_jobs / jobs;
    if (switchml_memory >= p.aggregator_memory.count)
      throw InputError("system.switchml.memory",
                       "leaves no aggregator memory for the ATP/DSA jobs' shared pool");
    if (p.occupancy_interval > Time::zero())
      throw InputError("system.occupancy_interval",
                       "the occupancy series of a switch shared by SwitchML and ATP/DSA jobs "
                       "(two pools) is not reported");
  } else if (p.switchml_memory.count > 0) {
    throw InputError("system.switchml.memory",
                     "only for a workload with both SwitchML and ATP/DSA jobs (the SwitchML "
                     "share of the aggregator memory)");
  }
  // Two-level aggregation (aggregation_levels.hpp; the scenario reader refuses it on the packet
  // path, with loss and with SwitchML, and names the paths): each job's hierarchy, as the
  // network path places the job's hosts, under its root: the program's switch node, or (ATP's
  // paper) the ToR of the job's PS, which is placed after the job's workers.
  if (p.two_level) {
    if (p.data_path != DataPathKind::kNetwork || !network || !topology)
      throw InputError("system.levels", "two_level needs system.data_path \"network\"");
    if (switchml_jobs > 0)
      throw InputError("system.levels",
                       "two_level is for ATP and DSA jobs: SwitchML aggregates at one switch "
                       "(static slots per job, no PS to send a rack's partial on to)");
    if (loss_.enabled())
      throw InputError("system.loss_rate", "loss is not modelled with two_level aggregation");
    const NodeId program_node = program_switch(p, *topology);
    std::size_t host = 0;
    bool spans = false;
    for (const JobSpec& spec : p.jobs) {
      std::vector<NodeId> tors;
      for (int w = 0; w < spec.workers; ++w)
        tors.push_back(tor_of(*topology, topology->hosts().at(host + static_cast<std::size_t>(w))));
      host += static_cast<std::size_t>(spec.workers);
      const NodeId root =
          p.root_at_ps_tor ? tor_of(*topology, topology->hosts().at(host)) : program_node;
      ++host;
      levels_.emplace_back(root, tors);
      spans |= levels_.back().two_level();
    }
    if (!spans)
      throw InputError("system.levels",
                       p.root_at_ps_tor
                           ? "two_level needs racks: every job's workers sit under its PS's ToR"
                           : "two_level needs racks: no job has a worker under a ToR other than '" +
                                 topology->node(program_node).name + "', the program's switch");
    // The program's switch keeps its pool (programs_) whether it is a job's root, a job's rack
    // or neither (levels "two_level_ps_tor" with no job placed under it).
    root_ = std::make_unique<LevelSwitch>(*this, program_node);
  } else {
    levels_.resize(p.jobs.size());
  }
  policy_of_job_.assign(p.jobs.size(), nullptr);
  if (switchml_jobs > 0) {
    const Format& f = *std::find_if(format_.begin(), format_.end(), [](const Format& x) {
      return x.policy == PolicyKind::kSwitchMl;
    });
    const std::int64_t aggregator_bytes = 4LL * f.values_per_packet;
    const int partitions = p.switchml_partitions > 0 ? p.switchml_partitions : switchml_jobs;
    if (partitions < switchml_jobs)
      throw InputError("system.switchml.partitions",
                       "fewer SwitchML partitions than jobs is not modelled");
    // Each slot has a shadow copy: 2 aggregators of one packet's payload.
    const std::int64_t slots = switchml_memory / (2 * aggregator_bytes);
    const std::int64_t slot_units = slots / f.burst_packets;
    if (slot_units / partitions < 1)
      throw InputError(mixed ? "system.switchml.memory" : "system.aggregator_memory",
                       "too little memory for one SwitchML slot (burst) per job: " +
                           std::to_string(slots) + " slots, " + std::to_string(partitions) +
                           " partitions, bursts of " + std::to_string(f.burst_packets));
    programs_.push_back({std::make_unique<SwitchMlPolicy>(
                             *this, static_cast<std::size_t>(slot_units), partitions, jobs),
                         f.burst_packets, aggregator_bytes});
  }
  if (shared_jobs > 0) {
    const Format& f = *std::find_if(format_.begin(), format_.end(), [](const Format& x) {
      return x.policy != PolicyKind::kSwitchMl;
    });
    const std::int64_t aggregator_bytes = 4LL * f.values_per_packet;
    const std::int64_t units =
        (p.aggregator_memory.count - switchml_memory) / aggregator_bytes / f.burst_packets;
    if (units < 1)
      throw InputError("system.aggregator_memory", "too little memory for one aggregator");
    const auto make = [&](SwitchPorts& ports) -> std::unique_ptr<AggregationPolicy> {
      if (f.policy == PolicyKind::kDsa)
        return std::make_unique<DsaPolicy>(ports, static_cast<std::size_t>(units));
      return std::make_unique<AtpPolicy>(ports, static_cast<std::size_t>(units));
    };
    programs_.push_back({make(root_ ? static_cast<SwitchPorts&>(*root_) : *this), f.burst_packets,
                         aggregator_bytes});
    // Each other switch of a job's hierarchy (a rack's ToR, or with levels "two_level_ps_tor" a
    // root other than the program's switch): the same register memory, its own pool [assumed,
    // as the cluster model's fabric: every ToR has its aggregators]. A switch is one program
    // whatever it is for each job: its LevelPorts act per job as root or rack.
    const NodeId program_node = root_ ? root_->node() : 0;
    for (const JobLevels& l : levels_) {
      std::vector<NodeId> nodes = l.lower;
      nodes.push_back(l.root);
      for (const NodeId n : nodes) {
        if (!root_ || n == program_node) continue;
        auto& s = racks_[n];
        if (s) continue;
        s = std::make_unique<LevelSwitch>(*this, n);
        s->policy = make(*s);
        s->policy->set_pipeline_latency(p.switch_latency);
      }
    }
  }
  for (Program& prog : programs_) {
    prog.policy->set_pipeline_latency(p.switch_latency);
    if (p.occupancy_interval > Time::zero())
      prog.policy->pool().record_intervals(p.occupancy_interval);
  }
  for (std::size_t j = 0; j < p.jobs.size(); ++j)
    policy_of_job_[j] =
        root_ ? &policy_at(levels_[j].root)
              : (format_[j].policy == PolicyKind::kSwitchMl ? programs_.front() : programs_.back())
                    .policy.get();
  SwitchProgram<Packet>* program = programs_.front().policy.get();
  if (mixed) {
    dispatch_ = std::make_unique<JobDispatch>(policy_of_job_, p.switch_latency);
    program = dispatch_.get();
  }

  if (switchml_jobs > 0 && p.scheduler != "fifo")
    throw InputError("system.scheduler",
                     "SwitchML streams a job's chunks through its slots in production order; "
                     "only the framework's \"fifo\" order is modelled with it");
  for (const Format& f : format_)
    if (p.scheduler_config.partition > 0 && p.scheduler_config.partition < f.values_per_packet)
      throw InputError("system.partition",
                       "a chunk smaller than one packet's " + std::to_string(f.values_per_packet) +
                           " values is not modelled (a packet carries one chunk)");
  const training::SchedulerFactory& make_scheduler =
      training::training_policies().schedulers.get(p.scheduler, "system.scheduler").value;

  SenderConfig sender;
  sender.max_window_packets = p.sender_threads * p.window_cap_packets_per_thread;
  sender.initial_window_packets = sender.max_window_packets;
  sender.increase_bytes_per_ack = p.window_increase_bytes;
  sender.stall_timeout = p.stall_timeout;

  // Plans, shared between jobs of the same profile; communication intensity for DSA's priority.
  std::map<std::pair<const DnnProfile*, int>, std::shared_ptr<const JobPlan>> plans;
  std::vector<std::shared_ptr<const JobPlan>> job_plans;
  for (std::size_t j = 0; j < p.jobs.size(); ++j) {
    const JobSpec& spec = p.jobs[j];
    const Format& f = format_[j];
    PlanOptions o;
    o.values_per_packet = f.values_per_packet;
    o.burst_packets = f.burst_packets;
    o.include_input_layers = p.include_input_layers;
    o.partition = p.scheduler_config.partition;
    auto& plan = plans[{spec.profile.get(), f.values_per_packet}];
    if (!plan) plan = std::make_shared<const JobPlan>(make_job_plan(*spec.profile, o));
    job_plans.push_back(plan);
    const double comm = static_cast<double>(plan->packets()) *
                        static_cast<double>(f.packet_bytes.count) / p.link_bandwidth.bytes_per_s;
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
  // DSA's control-plane priority (dsa_priority.hpp): by communication intensity, then (per
  // tensor) layers nearer the input.
  std::vector<std::uint32_t> layer_counts;
  for (const auto& plan : job_plans)
    layer_counts.push_back(static_cast<std::uint32_t>(plan->layers.size()));
  const DsaPriorities priorities(p.dsa_priority, intensity_, layer_counts);

  std::size_t hosts = 0;
  for (const JobSpec& spec : p.jobs) hosts += static_cast<std::size_t>(spec.workers) + 1;
  if (!compute) {
    own_compute_ =
        std::make_unique<OwnCompute>(engine_, topology ? topology->nodes().size() : hosts);
    compute = &own_compute_->compute;
  }
  hosts = 0;
  std::vector<Bytes> host_packet_bytes;  // each host's job's packet size
  for (int j = 0; j < jobs; ++j) {
    const JobSpec& spec = p.jobs[static_cast<std::size_t>(j)];
    const JobPlan& plan = *job_plans[static_cast<std::size_t>(j)];
    const auto id = static_cast<std::uint16_t>(j);
    host_base_.push_back(hosts);
    hosts += static_cast<std::size_t>(spec.workers) + 1;
    for (int w = 0; w <= spec.workers; ++w)
      host_role_.push_back({id, static_cast<std::uint16_t>(w)});
    const Format& f = format_[static_cast<std::size_t>(j)];
    SenderConfig s = sender;
    s.packet_bytes = static_cast<double>(f.packet_bytes.count);
    s.retransmission_timeout =
        f.policy == PolicyKind::kSwitchMl ? p.switchml_timeout : p.atp_timeout;
    s.slot_window = policy_of_job_[static_cast<std::size_t>(j)]->slot_window(id);
    for (int w = 0; w <= spec.workers; ++w) host_packet_bytes.push_back(f.packet_bytes);
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
    // The framework's FIFO sends each worker's layers in its backward order, the same on every
    // worker: the ordering is ByteScheduler's only.
    const training::Ordering ordering =
        p.scheduler == "fifo" ? training::Ordering::kEveryWorker : p.ordering;
    jobs_.push_back(std::make_unique<InaJob>(
        engine_, *compute, id, job_plans[static_cast<std::size_t>(j)], std::move(core),
        make_scheduler, p.scheduler_config, ordering,
        priorities.of_job(static_cast<std::size_t>(j)), s, counters_,
        [this](const Packet& q) { send_from_worker(q); },
        [this](InaJob& done) { job_finished(done); }));
    servers_.push_back(std::make_unique<ParameterServer>(
        id, spec.workers, f.policy == PolicyKind::kDsa && p.selective_retransmission,
        // A result can go missing only under loss or, on the network path, when a failed link
        // leaves no route; only then must the PS answer retransmissions of finished chunks.
        /*answer_late_resends=*/loss_.enabled() || p.data_path == DataPathKind::kNetwork,
        [this](const Packet& q) { send_from_ps(q); }, counters_));
  }
  ps_busy_until_.assign(jobs_.size(), Time::zero());
  if (p.data_path == DataPathKind::kPacket) {
    path_ = std::make_unique<PacketPath>(engine_, *this, *program, p.link_bandwidth, p.link_latency,
                                         std::move(host_packet_bytes), p.ecn_threshold_bytes);
  } else {
    MLSIM_CHECK(network && topology, "the ina network path without a network");
    MLSIM_CHECK(topology->hosts().size() >= hosts, "ina: fewer topology hosts than placed");
    const NodeId switch_node = program_switch(p, *topology);
    std::vector<NodeId> host_nodes(topology->hosts().begin(),
                                   topology->hosts().begin() + static_cast<std::ptrdiff_t>(hosts));
    auto path = std::make_unique<NetworkPath>(engine_, *network, *topology, switch_node,
                                              std::move(host_nodes), *this, *program,
                                              std::move(host_packet_bytes), p.ecn_threshold_bytes);
    for (auto& [node, rack] : racks_) path->host_program(node, *rack->policy);
    network_path_ = path.get();
    path_ = std::move(path);
  }
}

InaCluster::~InaCluster() = default;

void InaCluster::start() {
  for (auto& job : jobs_) {
    InaJob* j = job.get();
    engine_.schedule_at(params_.jobs[j->id()].arrival, [this, j] {
      for_each_policy_of(j->id(), [&](AggregationPolicy& a) { a.job_started(j->id()); });
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
  const bool dropped = lost(Hop::kWorkerToSwitch, p, 0);
  const JobLevels& l = levels_[p.job];
  if (root_)  // to the worker's own ToR first (the root itself when the job spans no rack)
    network_path_->to_switch_at(worker_host(p.job, p.worker), l.first_switch(p.worker), p, dropped);
  else
    path_->to_switch(worker_host(p.job, p.worker), p, /*forwarded=*/false, dropped);
}

template <typename F>
void InaCluster::for_each_policy_of(std::uint16_t job, F f) {
  f(*policy_of_job_[job]);
  for (const NodeId rack : levels_[job].lower) f(policy_at(rack));
}

AggregationPolicy& InaCluster::policy_at(NodeId node) {
  MLSIM_CHECK(root_, "a switch's program outside two-level aggregation");
  if (node == root_->node()) return *programs_.back().policy;  // no SwitchML under two levels
  return *racks_.at(node)->policy;
}

AggregationPolicy& InaCluster::rack_program(std::size_t i) {
  MLSIM_CHECK(i < racks_.size(), "no such rack program");
  return *std::next(racks_.begin(), static_cast<std::ptrdiff_t>(i))->second->policy;
}

NodeId InaCluster::rack_node(std::size_t i) const {
  MLSIM_CHECK(i < racks_.size(), "no such rack program");
  return std::next(racks_.begin(), static_cast<std::ptrdiff_t>(i))->first;
}

void InaCluster::to_ps(const Packet& p) {
  MLSIM_CHECK(policy_of_job_[p.job]->uses_parameter_server(), "a policy without PS sent to the PS");
  // Fallback traffic: everything but the aggregates the switch completed itself.
  count_ps_fallback(counters_, p, jobs_[p.job]->workers(), format_[p.job].packet_bytes.count);
  path_->from_switch(ps_host(p.job), p, lost(Hop::kSwitchToPs, p, 0));
}

void InaCluster::send_from_ps(const Packet& p) {
  const bool dropped = lost(Hop::kPsToSwitch, p, 0);
  if (root_)  // to the job's root
    network_path_->to_switch_at(ps_host(p.job), levels_[p.job].root, p, dropped);
  else
    path_->to_switch(ps_host(p.job), p, /*forwarded=*/true, dropped);
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
    const double payload = 4.0 * format_[role.job].values_per_packet * p.packets;
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
  for_each_policy_of(job.id(), [&](AggregationPolicy& a) {
    if (job.failed())
      a.job_aborted(job.id());
    else
      a.job_finished(job.id());
  });
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
  const AggregatorSlots& pool = programs_.front().policy->pool();
  if (programs_.size() == 1) {
    out.set_metric("aggregators",
                   static_cast<double>(pool.size() * static_cast<std::size_t>(burst_packets())));
    out.set_metric("aggregator_occupancy_mean", pool.mean_occupancy(end));
    out.set_metric("aggregator_idle_reserved_mean", pool.mean_idle_reserved(end));
    out.set_metric("aggregator_occupancy_peak", pool.peak_occupancy());
    // Switch-memory utilisation: the time-averaged share of aggregator memory held by a chunk
    // (aggregator_idle_reserved_mean is the part of it that is complete and only waiting).
    out.set_metric("switch_memory_utilisation", pool.mean_occupancy(end));
  } else {
    // SwitchML's partitions and the shared pool: the means weighted by their register bytes;
    // each pool's own figures under its policy's name (the peak of the sum is not tracked).
    double bytes = 0, held = 0, idle = 0, aggregators = 0;
    for (const Program& prog : programs_) {
      const AggregatorSlots& q = prog.policy->pool();
      const double b = static_cast<double>(q.size()) * prog.burst_packets *
                       static_cast<double>(prog.aggregator_bytes);
      bytes += b;
      held += b * q.mean_occupancy(end);
      idle += b * q.mean_idle_reserved(end);
      aggregators += static_cast<double>(q.size()) * prog.burst_packets;
      const std::string name(prog.policy->name());
      out.set_metric(name + "_aggregator_occupancy_mean", q.mean_occupancy(end));
      out.set_metric(name + "_aggregator_occupancy_peak", q.peak_occupancy());
      out.set_metric(name + "_aggregator_memory_bytes", b);
    }
    out.set_metric("aggregators", aggregators);
    out.set_metric("aggregator_occupancy_mean", held / bytes);
    out.set_metric("aggregator_idle_reserved_mean", idle / bytes);
    out.set_metric("switch_memory_utilisation", held / bytes);
  }
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
  out.set_metric("burst_packets", burst_packets());
  if (root_) {
    // Two levels: the figures above are the program's switch's pool (every job's root unless
    // levels "two_level_ps_tor"); the other switches' own.
    double occupancy = 0, idle = 0;
    for (const auto& [node, rack] : racks_) {
      occupancy += rack->policy->pool().mean_occupancy(end);
      idle += rack->policy->pool().mean_idle_reserved(end);
    }
    const auto racks = static_cast<double>(racks_.size());
    out.set_metric("rack_switches", racks);
    out.set_metric("rack_aggregator_occupancy_mean", occupancy / racks);
    out.set_metric("rack_aggregator_idle_reserved_mean", idle / racks);
    out.set_metric("upward_packets", static_cast<double>(c.upward_packets));
    out.details()["levels"] = params_.root_at_ps_tor ? "two_level_ps_tor" : "two_level";
  }
  out.details()["jobs"] = std::move(table);
  if (const auto iv = programs_.size() == 1 ? pool.intervals(end) : std::nullopt) {
    // One row per interval, stamped with its start.
    TimeSeries s{"aggregator_occupancy", {"occupancy", "idle_reserved"}, {}};
    for (std::size_t k = 0; k < iv->occupancy.size(); ++k)
      s.add(Time::ns(static_cast<std::int64_t>(k) * iv->width.count_ns()),
            {iv->occupancy[k], iv->idle_reserved[k]});
    out.add_series(std::move(s));
  }
  std::string names;
  for (const Program& prog : programs_)
    names += (names.empty() ? "" : "+") + std::string(prog.policy->name());
  out.details()["policy"] = names;
}

}  // namespace mlsim::ina
