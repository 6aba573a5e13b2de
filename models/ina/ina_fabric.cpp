#include "models/ina/ina_fabric.hpp"

#include <algorithm>
#include <deque>

#include "models/ina/aggregation_levels.hpp"
#include "models/ina/atp_policy.hpp"
#include "models/ina/dsa_policy.hpp"
#include "models/ina/parameter_server.hpp"
#include "models/ina/switchml_policy.hpp"
#include "sim_core/base/error.hpp"

namespace mlsim::ina {

struct InaFabric::Job {
  std::uint16_t id = 0;
  PolicyKind policy = PolicyKind::kAtp;
  NodeId sw = 0;  // the aggregation switch (the root under two-level aggregation)
  std::vector<NodeId> workers;
  // Two-level aggregation (aggregation_levels.hpp): the ToRs other than `sw` that hold workers
  // of the job; empty (one switch) otherwise.
  JobLevels levels;
  const JobLevels* two_level() const { return levels.two_level() ? &levels : nullptr; }
  NodeId ps_host = 0;
  Bytes packet_bytes;
  std::unique_ptr<InaSync> sync;
  std::unique_ptr<ParameterServer> ps;
  bool granted = false;  // holds a SwitchML partition (always true for ATP and DSA)
  std::function<void()> go;
  Time attached;
};

// One switch's program: SwitchML's partitions and/or the shared ATP or DSA pool, each packet to
// its job's policy (as job_dispatch.hpp, with jobs that come and go), routed by the job's
// aggregation levels (aggregation_levels.hpp).
struct InaFabric::Switch final : LevelPorts, SwitchProgram<Packet> {
  Switch(InaFabric& f, NodeId n) : LevelPorts(n), fabric(f) {}
  InaFabric& fabric;
  std::unique_ptr<SwitchMlPolicy> switchml;
  std::unique_ptr<AtpPolicy> shared;
  std::deque<std::uint16_t> waiting;  // SwitchML jobs waiting for a partition, in arrival order

  AggregationPolicy& policy_of(const Job& j) {
    if (j.policy == PolicyKind::kSwitchMl) return *switchml;
    return *shared;
  }
  Job& job(std::uint16_t id) const {
    Job* j = fabric.find(id);
    MLSIM_CHECK(j != nullptr, "a switch program acting for a job that ended");
    return *j;
  }
  // SwitchPorts
  Time now() const override { return fabric.engine_.now(); }
  int workers_of(std::uint16_t id) const override {
    return static_cast<int>(job(id).workers.size());
  }
  InaCounters& counters() override { return fabric.counters_; }
  // LevelPorts
  const JobLevels* levels_of(std::uint16_t id) const override { return job(id).two_level(); }
  std::int64_t packet_bytes_of(std::uint16_t id) const override {
    return job(id).packet_bytes.count;
  }
  void to_switch(NodeId sw, const Packet& p, bool down) override {
    fabric.send(node(), sw, p, /*ecn_check=*/down);
  }
  void to_ps_host(const Packet& p) override {
    fabric.send(node(), job(p.job).ps_host, p, /*ecn_check=*/false);
  }
  void to_worker_host(const Packet& p, std::uint16_t w) override {
    fabric.send(node(), job(p.job).workers.at(w), p, /*ecn_check=*/true);
  }
  // SwitchProgram
  void on_message(const Packet& p, NodeId from) override {
    Job* j = fabric.find(p.job);
    if (!j) {
      fabric.counters_.packets_after_abort += p.packets;  // its job ended meanwhile
      return;
    }
    policy_of(*j).on_message(p, from);
  }
  Time pipeline_latency() const override { return fabric.params_.switch_latency; }
};

class InaFabric::HostEnd final : public MessageReceiver<Packet> {
 public:
  HostEnd(InaFabric& fabric, NodeId node) : fabric_(fabric), node_(node) {}
  void on_message(const Packet& p, NodeId) override { fabric_.at_host(node_, p); }

 private:
  InaFabric& fabric_;
  NodeId node_;
};

// The job's strategy as the training core sees it: the fabric's InaSync for the job, and the
// job's end in the fabric when it is destroyed.
class InaFabric::Strategy final : public training::GradientSync {
 public:
  Strategy(InaFabric& fabric, Job& job) : fabric_(fabric), job_(job), id_(job.id) {
    job_.sync->set_on_failed([this] { report_failure(); });
  }
  ~Strategy() override { fabric_.detach(id_); }
  Strategy(const Strategy&) = delete;
  Strategy& operator=(const Strategy&) = delete;

  Entry entry() const override { return job_.sync->entry(); }
  bool one_tensor_at_a_time() const override { return job_.sync->one_tensor_at_a_time(); }
  bool layout_matters() const override { return job_.sync->layout_matters(); }
  void set_partition(std::int64_t partition) override { job_.sync->set_partition(partition); }
  void start(std::size_t owner, const training::Chunk& chunk) override {
    job_.sync->start(owner, chunk);
  }
  std::int64_t bytes_sent() const override { return job_.sync->bytes_sent(); }
  std::int64_t bytes_delivered() const override { return job_.sync->bytes_delivered(); }
  std::uint64_t messages() const override { return job_.sync->messages(); }
  std::uint64_t failed_transfers() const override { return job_.sync->failed_transfers(); }
  std::uint64_t timeouts() const override { return job_.sync->timeouts(); }
  void when_ready(std::function<void()> go) override {
    job_.sync->set_started(fabric_.engine_.now());
    if (job_.granted)
      go();
    else
      job_.go = std::move(go);
  }

 private:
  InaFabric& fabric_;
  Job& job_;  // owned by the fabric until this strategy is destroyed
  std::uint16_t id_;
};

InaFabric::InaFabric(Engine& engine, Network& network, const Topology& topology,
                     ClusterParams params, std::vector<FabricModel> models)
    : engine_(engine),
      network_(network),
      topology_(topology),
      params_(std::move(params)),
      models_(std::move(models)) {
  MLSIM_CHECK(!models_.empty(), "an INA fabric without models");
  bool switchml = false, atp = false, dsa = false;
  for (const FabricModel& m : models_) {
    if (!m.plan) continue;  // a model of another strategy
    switchml |= m.policy == PolicyKind::kSwitchMl;
    atp |= m.policy == PolicyKind::kAtp;
    dsa |= m.policy == PolicyKind::kDsa;
  }
  MLSIM_CHECK(!(atp && dsa), "ATP and DSA on one switch (one shared-pool program per switch)");
  shared_kind_ = dsa ? PolicyKind::kDsa : PolicyKind::kAtp;
  const ClusterParams& p = params_;
  for (const int values : {p.switchml_values_per_packet, p.atp_values_per_packet})
    packet_bytes_.push_back(Bytes{p.header_bytes.count + 4LL * values});
  packet_bytes_.push_back(packet_bytes_.back());  // DSA: ATP's format
  const auto burst = [&](int values) { return std::max(1, p.burst_values / values); };
  // The register memory of every switch: split between SwitchML's partitions and the shared
  // pool when the run has both (switchml_memory, default half [assumed]); else all to one.
  const bool both = switchml && (atp || dsa);
  const std::int64_t memory = p.aggregator_memory.count;
  const std::int64_t switchml_memory =
      !switchml
          ? 0
          : (both ? (p.switchml_memory.count > 0 ? p.switchml_memory.count : memory / 2) : memory);
  if (switchml) {
    const std::int64_t slot_bytes = 2 * 4LL * p.switchml_values_per_packet;  // + shadow copy
    switchml_units_ = static_cast<std::size_t>(switchml_memory / slot_bytes /
                                               burst(p.switchml_values_per_packet));
    const int partitions = std::max(1, p.switchml_partitions);
    if (switchml_units_ / static_cast<std::size_t>(partitions) < 1)
      throw InputError("system.ina.switchml_memory",
                       "too little memory for one SwitchML slot (burst) per partition");
  }
  if (atp || dsa) {
    const std::int64_t left = memory - switchml_memory;
    shared_units_ = static_cast<std::size_t>(std::max<std::int64_t>(
        0, left / (4LL * p.atp_values_per_packet) / burst(p.atp_values_per_packet)));
    if (shared_units_ < 1)
      throw InputError("system.ina.aggregator_memory",
                       "leaves no aggregator for the ATP/DSA jobs' shared pool");
  }
  messages_ = std::make_unique<MessageNetwork<Packet>>(engine_, network_, topology_);
  messages_->on_undelivered([this](const Packet& q, NodeId, NodeId) {
    counters_.lost_packets += q.packets;  // undelivered: no route left
    if (Job* j = find(q.job)) j->sync->transfer_failed();
  });
}

InaFabric::~InaFabric() = default;

std::uint32_t InaFabric::switchml_slots_per_job() const {
  return static_cast<std::uint32_t>(
      switchml_units_ / static_cast<std::size_t>(std::max(1, params_.switchml_partitions)));
}

NodeId InaFabric::rack_of(NodeId node) const {
  return topology_.node(node).kind == NodeKind::kHost ? switch_of(node) : node;
}

NodeId InaFabric::switch_of(NodeId host) const {
  return tor_of(topology_, host);
}

InaFabric::Switch& InaFabric::switch_at(NodeId node) {
  auto it = switches_.find(node);
  if (it != switches_.end()) return *it->second;
  auto s = std::make_unique<Switch>(*this, node);
  if (switchml_units_ > 0) {
    s->switchml = std::make_unique<SwitchMlPolicy>(*s, switchml_units_,
                                                   std::max(1, params_.switchml_partitions), 0);
    s->switchml->pool().set_observer([this, node](const PoolEvent& e) {
      if (observer_) observer_(node, 0, e);
    });
  }
  if (shared_units_ > 0) {
    if (shared_kind_ == PolicyKind::kDsa)
      s->shared = std::make_unique<DsaPolicy>(*s, shared_units_);
    else
      s->shared = std::make_unique<AtpPolicy>(*s, shared_units_);
    s->shared->pool().set_observer([this, node](const PoolEvent& e) {
      if (observer_) observer_(node, 1, e);
    });
  }
  for (AggregationPolicy* policy : {static_cast<AggregationPolicy*>(s->switchml.get()),
                                    static_cast<AggregationPolicy*>(s->shared.get())})
    if (policy) policy->set_pipeline_latency(params_.switch_latency);
  messages_->host(node, *s);
  return *switches_.emplace(node, std::move(s)).first->second;
}

InaFabric::Job* InaFabric::find(std::uint16_t id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second.get();
}

std::unique_ptr<training::GradientSync> InaFabric::attach(std::size_t model,
                                                          training::SyncEvents& events,
                                                          std::vector<NodeId> workers) {
  const FabricModel& m = models_.at(model);
  MLSIM_CHECK(m.plan != nullptr, "attaching a job whose model does not aggregate in the network");
  MLSIM_CHECK(workers.size() >= 1 && workers.size() <= 32, "an INA job needs 1..32 workers");
  if (next_id_ > 0xffff)
    throw InputError("workload.jobs",
                     "more than 65536 jobs with in-network aggregation in one run (the packets' "
                     "16-bit job id)");
  auto job = std::make_unique<Job>();
  job->id = static_cast<std::uint16_t>(next_id_++);
  job->policy = m.policy;
  job->sw = switch_of(workers.front());
  job->workers = std::move(workers);
  if (params_.two_level && m.policy != PolicyKind::kSwitchMl) {
    // Rack-local first level (ATP, docs/cluster.md): every ToR that holds workers of the job.
    std::vector<NodeId> tors;
    for (const NodeId w : job->workers) tors.push_back(switch_of(w));
    job->levels = JobLevels(job->sw, tors);
    for (const NodeId l : job->levels.lower) switch_at(l);
  }
  job->ps_host = job->workers.front();  // colocated with the first worker [assumed]
  job->packet_bytes = packet_bytes_[static_cast<std::size_t>(m.policy)];
  job->attached = engine_.now();
  Switch& s = switch_at(job->sw);
  for (const NodeId h : job->workers) {
    if (hosts_.count(h)) continue;
    auto end = std::make_unique<HostEnd>(*this, h);
    messages_->attach(h, *end);
    hosts_.emplace(h, std::move(end));
  }
  const bool switchml = m.policy == PolicyKind::kSwitchMl;
  SenderConfig sender;
  sender.max_window_packets = params_.sender_threads * params_.window_cap_packets_per_thread;
  sender.initial_window_packets = sender.max_window_packets;
  sender.increase_bytes_per_ack = params_.window_increase_bytes;
  sender.packet_bytes = static_cast<double>(job->packet_bytes.count);
  sender.retransmission_timeout = switchml ? params_.switchml_timeout : params_.atp_timeout;
  sender.slot_window = switchml ? switchml_slots_per_job() : 0;
  const std::uint16_t id = job->id;
  job->sync = std::make_unique<InaSync>(
      engine_, events, id, m.plan, static_cast<int>(job->workers.size()), m.priority, sender,
      counters_, [this, id](const Packet& q) {
        Job& j = *find(id);
        send(j.workers[q.worker], j.two_level() ? j.levels.first_switch(q.worker) : j.sw, q,
             /*ecn_check=*/false);
      });
  if (!switchml)
    job->ps = std::make_unique<ParameterServer>(
        id, static_cast<int>(job->workers.size()),
        m.policy == PolicyKind::kDsa && params_.selective_retransmission,
        // Lossless, and a job whose packets find no route fails: a finished chunk's result
        // always arrives, so late retransmissions need no answer (parameter_server.hpp).
        /*answer_late_resends=*/false,
        [this, id](const Packet& q) {
          Job& j = *find(id);
          send(j.ps_host, j.sw, q, /*ecn_check=*/false);
        },
        counters_);
  ++jobs_attached_;
  Job& j = *jobs_.emplace(id, std::move(job)).first->second;
  if (!switchml) {
    j.granted = true;
  } else if (s.waiting.empty() && s.switchml->has_free_partition()) {
    s.switchml->job_started(id);
    j.granted = true;
  } else {
    s.waiting.push_back(id);
    ++jobs_waited_;
  }
  return std::make_unique<Strategy>(*this, j);
}

void InaFabric::detach(std::uint16_t id) {
  auto it = jobs_.find(id);
  MLSIM_CHECK(it != jobs_.end(), "detaching an unknown INA job");
  Job& j = *it->second;
  Switch& s = *switches_.at(j.sw);
  j.sync->abort();  // its senders' timers
  if (j.granted) {
    // Frees whatever it still holds (every aggregator, its SwitchML partition); later packets
    // of the job are dropped where they arrive.
    s.policy_of(j).job_aborted(id);
    for (const NodeId l : j.levels.lower) switches_.at(l)->policy_of(j).job_aborted(id);
  } else {
    s.waiting.erase(std::find(s.waiting.begin(), s.waiting.end(), id));
  }
  jobs_.erase(it);
  grant_waiting(s);
}

void InaFabric::grant_waiting(Switch& s) {
  while (!s.waiting.empty() && s.switchml->has_free_partition()) {
    const std::uint16_t id = s.waiting.front();
    s.waiting.pop_front();
    Job& j = *find(id);
    s.switchml->job_started(id);
    j.granted = true;
    wait_s_ += (engine_.now() - j.attached).seconds();
    // From an event: the caller may be inside another job's teardown.
    engine_.schedule_in(Time::zero(), [this, id] {
      Job* job = find(id);
      if (!job || !job->go) return;  // ended meanwhile, or not started by its runner yet
      std::function<void()> go = std::move(job->go);
      job->go = nullptr;
      job->sync->set_started(engine_.now());
      go();
    });
  }
}

void InaFabric::send(NodeId from, NodeId to, const Packet& p, bool ecn_check) {
  Packet q = p;
  if (ecn_check && messages_->egress_backlog_bytes(from, to) > params_.ecn_threshold_bytes)
    q.ecn = true;
  const Job* j = find(p.job);
  MLSIM_CHECK(j != nullptr, "sending for a job that ended");
  const Bytes bytes{j->packet_bytes.count * p.packets};
  if (rack_of(from) != rack_of(to)) cross_rack_bytes_ += bytes.count;
  messages_->send(from, to, bytes, q);
}

void InaFabric::at_host(NodeId host, const Packet& p) {
  Job* j = find(p.job);
  if (!j) {
    counters_.packets_after_abort += p.packets;  // in flight when its job ended
    return;
  }
  if (p.kind == PacketKind::kGradient || p.kind == PacketKind::kPartial) {
    MLSIM_CHECK(j->ps && host == j->ps_host, "a parameter-server packet at a host without one");
    j->ps->on_packet(p);
    return;
  }
  const auto it = std::find(j->workers.begin(), j->workers.end(), host);
  MLSIM_CHECK(it != j->workers.end(), "a result at a host that is not the job's");
  const auto w = static_cast<std::uint16_t>(it - j->workers.begin());
  if (p.kind == PacketKind::kResult)
    j->sync->on_result(w, p);
  else
    j->sync->on_resend_request(w, p);
}

void InaFabric::report(Results& out) const {
  const Time now = engine_.now();
  double shared_occupancy = 0, switchml_occupancy = 0, shared_peak = 0;
  std::size_t shared = 0, switchml = 0;
  for (const auto& [node, s] : switches_) {
    if (s->shared) {
      shared_occupancy += s->shared->pool().mean_occupancy(now);
      shared_peak = std::max(shared_peak, s->shared->pool().peak_occupancy());
      ++shared;
    }
    if (s->switchml) {
      switchml_occupancy += s->switchml->pool().mean_occupancy(now);
      ++switchml;
    }
  }
  out.set_metric("ina_switches", static_cast<double>(switches_.size()));
  out.set_metric("ina_jobs", static_cast<double>(jobs_attached_));
  out.set_metric("ina_shared_pool_aggregators", static_cast<double>(shared_units_));
  out.set_metric("ina_switchml_slots_per_job", static_cast<double>(switchml_slots_per_job()));
  // Over the switches that hosted a program, each time-averaged from its first job to the end.
  out.set_metric("ina_shared_occupancy_mean",
                 shared ? shared_occupancy / static_cast<double>(shared) : 0);
  out.set_metric("ina_shared_occupancy_peak", shared_peak);
  out.set_metric("ina_switchml_occupancy_mean",
                 switchml ? switchml_occupancy / static_cast<double>(switchml) : 0);
  out.set_metric("ina_jobs_waited_for_partition", static_cast<double>(jobs_waited_));
  out.set_metric("ina_partition_wait_s", wait_s_);
  const InaCounters& c = counters_;
  out.set_metric("ina_gradient_packets", static_cast<double>(c.gradient_packets));
  out.set_metric("ina_aggregated_packets", static_cast<double>(c.aggregated_packets));
  out.set_metric("ina_collision_packets", static_cast<double>(c.collision_packets));
  out.set_metric("ina_fallback_packets", static_cast<double>(c.fallback_packets));
  out.set_metric("ina_ps_fallback_bytes", static_cast<double>(c.ps_fallback_bytes));
  out.set_metric("ina_preemptions", static_cast<double>(c.preemptions));
  out.set_metric("ina_retransmitted_packets", static_cast<double>(c.retransmitted_packets));
  out.set_metric("ina_timeouts", static_cast<double>(c.timeouts));
  out.set_metric("ina_wrong_sums", static_cast<double>(c.wrong_sums));
  out.set_metric("ina_duplicate_results", static_cast<double>(c.duplicate_results));
  out.set_metric("ina_undelivered_packets", static_cast<double>(c.lost_packets));
  out.set_metric("ina_packets_after_end", static_cast<double>(c.packets_after_abort));
  out.set_metric("ina_upward_packets", static_cast<double>(c.upward_packets));
  out.set_metric("ina_cross_rack_bytes", static_cast<double>(cross_rack_bytes_));
}

}  // namespace mlsim::ina
