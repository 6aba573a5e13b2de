#pragma once
// In-network aggregation: training jobs (workers and, for ATP and DSA, one PS each) on hosts
// around one programmable switch whose aggregator pool is run by a policy, the switch program.
//
// Packets move on one of two data paths (data_path.hpp): the model's own packet-level links on a
// one-switch star (packet_path.hpp: per-packet serialisation, latency, ECN from queue depth; the
// default, because INA's per-packet timing is the mechanism under study), or transfers of the
// scenario's network backend to the switch node that hosts the program (network_path.hpp).
// Packets may be lost (packet_loss.hpp); every policy recovers through its timeouts.
//
// Two-level aggregation (params.two_level, network path, ATP and DSA; aggregation_levels.hpp,
// the cluster model's implementation): the program on the switch node stays every job's root
// (or, params.root_at_ps_tor, each job's root is its PS's ToR, as in ATP's paper), and every
// other ToR holding workers of a job runs a program with its own pool too (the same aggregator
// memory per switch), completing its rack's partial and sending it up to the root.
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "models/ina/aggregation_levels.hpp"
#include "models/ina/cluster_params.hpp"
#include "models/ina/data_path.hpp"
#include "models/ina/ina_job.hpp"
#include "models/ina/job_dispatch.hpp"
#include "models/ina/parameter_server.hpp"
#include "models/ina/policy.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/hardware/compute.hpp"
#include "sim_core/network/network.hpp"
#include "sim_core/run/results.hpp"

namespace mlsim::ina {

class NetworkPath;

struct JobOutcome {
  std::string model;
  int workers = 0, iterations = 0;
  std::uint32_t priority = 0;          // DSA: rank by communication intensity (0 = least)
  double communication_intensity = 0;  // ideal comm time / compute time per iteration
  std::string gpus;                    // its workers' GPU types (topology.hardware)
  Time arrival, finish;                // finish: when it finished, or was aborted (failed)
  bool failed = false;                 // aborted by its stall watchdog (cluster_params.hpp)
  std::vector<Time> iteration_marks;
  Time jct() const { return finish - arrival; }
  double mean_iteration_s() const;
};

class InaCluster : public SwitchPorts, public HostEnds {
 public:
  // The network path (params.data_path) needs the scenario's `network` and `topology`; the
  // packet path builds its own links and needs neither. Worker w of job j runs on host (hosts of
  // jobs 0..j-1, one PS each) + w: topology host i (node i without a topology); its ops run on
  // `compute` on that host (its speed applies, also to the op in progress; null: the profile's
  // times as they are at speed 1, for tests of the aggregation alone). `compute` must outlive
  // the cluster. Each job is a training-core job (ina_job.hpp) whose gradients are synchronised
  // by in-network aggregation (ina_sync.hpp) in the order of the scheduler params.scheduler.
  InaCluster(Engine& engine, ClusterParams params, Network* network = nullptr,
             const Topology* topology = nullptr, Compute* compute = nullptr);
  ~InaCluster() override;

  // Schedules the job arrivals; run the engine afterwards.
  void start();
  // Every job completed.
  bool all_finished() const { return finished_jobs_ == jobs_.size(); }
  // Every job completed or was aborted (reported failed).
  bool all_ended() const { return finished_jobs_ + failed_jobs_ == jobs_.size(); }
  std::size_t failed_jobs() const { return failed_jobs_; }
  double progress() const;

  const InaCounters& stats() const { return counters_; }
  // The switch program when all jobs run one policy (tests); programs() in general: SwitchML's
  // first, then ATP's or DSA's shared pool.
  AggregationPolicy& policy() {
    MLSIM_CHECK(programs_.size() == 1, "jobs of several policies: use programs()");
    return *programs_.front().policy;
  }
  AggregationPolicy& program(std::size_t i) { return *programs_.at(i).policy; }
  std::size_t programs() const { return programs_.size(); }
  AggregationPolicy& policy_of(std::uint16_t job) { return *policy_of_job_.at(job); }
  // Two-level aggregation: the other switches' programs (every switch of a job's hierarchy
  // but the program's switch node: a rack's ToR, or with levels "two_level_ps_tor" a job's root),
  // by switch node; and a job's hierarchy.
  std::size_t rack_programs() const { return racks_.size(); }
  AggregationPolicy& rack_program(std::size_t i);
  NodeId rack_node(std::size_t i) const;
  const JobLevels& levels(std::uint16_t job) const { return levels_.at(job); }
  const std::vector<JobOutcome>& outcomes() const { return outcomes_; }
  // DSA's communication intensity of job j (dsa_priority.hpp): ideal comm / compute per iteration.
  double communication_intensity(std::size_t j) const { return intensity_.at(j); }
  InaJob& job(std::size_t j) { return *jobs_.at(j); }
  std::size_t pool_units() const { return programs_.front().policy->pool().size(); }
  // Packets per burst of the first program's jobs (SwitchML's in a mixed run).
  int burst_packets() const { return programs_.front().burst_packets; }
  // Total gradient values every worker of every job must receive (for exactly-once checks).
  std::int64_t expected_elements() const;
  // Bytes that crossed the PS ports, both directions.
  void report(Results& out) const;

  // SwitchPorts
  Time now() const override { return engine_.now(); }
  int workers_of(std::uint16_t job) const override { return jobs_[job]->workers(); }
  void to_ps(const Packet& p) override;
  void multicast(const Packet& p) override;
  void to_worker(const Packet& p, std::uint16_t w) override;
  InaCounters& counters() override { return counters_; }
  // HostEnds: a burst reached host h (a worker or a PS).
  void at_host(std::size_t host, const Packet& p) override;

 private:
  std::size_t worker_host(std::uint16_t job, std::uint16_t w) const { return host_base_[job] + w; }
  std::size_t ps_host(std::uint16_t job) const {
    return host_base_[job] + static_cast<std::size_t>(jobs_[job]->workers());
  }
  // Draws the loss of a packet on `hop` (counting it); `to` is the receiving worker.
  bool lost(Hop hop, const Packet& p, std::uint16_t to);
  void send_from_worker(const Packet& p);
  // Every policy that holds aggregators of `job`: the root's and its racks' switches'.
  template <typename F>
  void for_each_policy_of(std::uint16_t job, F f);
  // Two-level aggregation: the program on switch `node` (the program's switch node or another).
  AggregationPolicy& policy_at(NodeId node);
  void send_from_ps(const Packet& p);
  void job_finished(InaJob& job);

  Engine& engine_;
  ClusterParams params_;
  PacketLoss loss_;
  // Each job's policy and packet format.
  struct Format {
    PolicyKind policy = PolicyKind::kAtp;
    int values_per_packet = 0, burst_packets = 1;
    Bytes packet_bytes;
  };
  std::vector<Format> format_;
  InaCounters counters_;
  // The switch programs: one policy, or SwitchML's partitions beside ATP's or DSA's shared pool
  // (then dispatch_ hands each packet to its job's policy).
  struct Program {
    std::unique_ptr<AggregationPolicy> policy;
    int burst_packets = 1;
    std::int64_t aggregator_bytes = 0;  // one packet's payload
  };
  std::vector<Program> programs_;
  std::vector<AggregationPolicy*> policy_of_job_;
  std::unique_ptr<JobDispatch> dispatch_;
  struct OwnCompute;  // the platform's Compute at speed 1, when the caller gives none
  std::unique_ptr<OwnCompute> own_compute_;
  std::vector<std::unique_ptr<InaJob>> jobs_;
  std::vector<double> intensity_;
  std::vector<std::unique_ptr<ParameterServer>> servers_;
  std::vector<Time> ps_busy_until_;  // per job: when its PS has summed what it received
  std::vector<std::size_t> host_base_;
  // Host h -> (job, worker index; the job's worker count = its PS).
  struct HostRole {
    std::uint16_t job = 0, index = 0;
  };
  std::vector<HostRole> host_role_;
  std::unique_ptr<DataPath> path_;
  // Two-level aggregation: per job its hierarchy (one switch when it spans no rack), the
  // program's switch node (`root_`: every job's root unless levels "two_level_ps_tor") and each
  // other switch as SwitchPorts with its own program, and the network path.
  class LevelSwitch;
  std::vector<JobLevels> levels_;
  std::unique_ptr<LevelSwitch> root_;
  std::map<NodeId, std::unique_ptr<LevelSwitch>> racks_;
  NetworkPath* network_path_ = nullptr;
  std::vector<JobOutcome> outcomes_;
  std::size_t finished_jobs_ = 0, failed_jobs_ = 0;
  Time last_finish_;
};

}  // namespace mlsim::ina
