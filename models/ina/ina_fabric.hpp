#pragma once
// In-network aggregation as a service of the run's network, for jobs that come and go (the
// cluster model's detailed mode, docs/cluster.md "In-network aggregation"): the aggregator pools
// belong to the switches, not to a job. Every switch that some job aggregates at hosts one
// switch program over the scenario's Network backend (MessageNetwork, switch_program.hpp),
// built when its first job arrives and kept for the run: SwitchML's static partitions beside
// one shared pool run by ATP or DSA (the mixed-policy switch of docs/ina.md, job_dispatch.hpp),
// so two jobs aggregating at one switch contend for its aggregators.
//
//   - Aggregation switch [assumed]: the access switch (ToR) of the job's first worker in its
//     placement order (the PS's ToR); by default workers in other racks send to it across the
//     fabric, as the ina model's network path does with a two-rack topology.
//   - Two-level aggregation (`two_level`, ATP and DSA jobs only; docs/cluster.md): every other
//     ToR holding workers of the job runs the job's program too, completing an aggregator when
//     its own rack's workers are in and sending that one partial up to the root (the PS's ToR,
//     as ATP's paper puts the second level), which aggregates it as it aggregates its own
//     rack's gradients. What a rack's switch cannot aggregate (collision, eviction, a flush by
//     a retransmission) also goes up to the root, never straight to the PS [inferred], so the
//     root may still aggregate it. The PS's result releases the root's aggregator and goes
//     down once to each rack's switch, which releases its own and multicasts to its workers.
//     SwitchML is single-rack (its paper): its jobs keep one aggregation switch.
//   - ATP's and DSA's parameter server (parameter_server.hpp) is colocated with the first
//     worker [assumed, as the core's `ps` strategy colocates its servers].
//   - SwitchML: each switch's SwitchML memory is cut into `switchml_partitions` equal static
//     partitions [assumed]. A SwitchML job that finds every partition of its switch taken
//     waits, holding its GPUs, until one is freed (first come, first served): it cannot stream
//     its gradient without slots (GradientSync::when_ready holds the job's start).
//   - Memory split per switch: `switchml_memory` bytes to SwitchML's partitions and the rest to
//     the shared pool when the run has jobs of both kinds (default: half each [assumed]); all
//     of it to the one kind otherwise.
//   - DSA's priority (dsa_priority.hpp) ranks the run's training models by communication
//     intensity (one worker's gradient on the wire per iteration over the first worker host's
//     link speed, over the model's compute per iteration on the reference GPU [assumed: the
//     job's own hosts are not known before placement]), then per tensor as in the ina model.
//   - A job's packets to a switch or host that no route reaches any more (a failed link or
//     node) make the job fail (GradientSync::set_on_failed): the cluster requeues or drops it.
//     No loss here (the ina model's own study covers it); a job that stalls (a livelock of its
//     senders' retransmissions) is ended by the detailed mode's stall watchdog
//     (CommunicationParams::stall_timeout), reported and dropped.
//   - Job ids on the wire are the fabric's own, never reused (16 bits: at most 65535 jobs per
//     run), so a packet of a job that ended (killed, failed or finished) is dropped wherever it
//     arrives (`packets_after_abort`) and a job's end frees every aggregator it holds.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "models/ina/cluster_params.hpp"
#include "models/ina/counters.hpp"
#include "models/ina/dsa_priority.hpp"
#include "models/ina/ina_sync.hpp"
#include "models/ina/job_plan.hpp"
#include "models/ina/policy.hpp"
#include "models/training/gradient_sync.hpp"
#include "sim_core/network/network.hpp"
#include "sim_core/network/switch_program.hpp"
#include "sim_core/network/topology.hpp"
#include "sim_core/run/results.hpp"

namespace mlsim::ina {

// What one training model's jobs aggregate with: its policy, its plan (the packet format cut at
// its scheduler's partition) and its DSA priority per layer. A null plan: the model's jobs use
// another strategy.
struct FabricModel {
  PolicyKind policy = PolicyKind::kAtp;
  std::shared_ptr<const JobPlan> plan;
  JobPriority priority;
};

class InaFabric {
 public:
  // Of `params` the fabric reads the packet formats, the senders, timeouts, the switch latency,
  // the ECN threshold, aggregator_memory (per switch), switchml_memory and switchml_partitions;
  // its jobs, paths and loss are not used. `models[m].policy` over all models decides the memory
  // split; ATP and DSA models together are refused by the scenario reader. `engine`, `network`
  // and `topology` must outlive the fabric, and the fabric every job's strategy.
  InaFabric(Engine& engine, Network& network, const Topology& topology, ClusterParams params,
            std::vector<FabricModel> models);
  ~InaFabric();
  InaFabric(const InaFabric&) = delete;
  InaFabric& operator=(const InaFabric&) = delete;

  // The strategy of a job of model `model` on `workers` (host nodes, placement order), reporting
  // to `events`. Destroying it ends the job in the fabric (frees its aggregators and partition).
  std::unique_ptr<training::GradientSync> attach(std::size_t model, training::SyncEvents& events,
                                                 std::vector<NodeId> workers);

  // Sees every claim and release of every switch's pools (tests: single ownership); `pool` is
  // 0 for SwitchML's partitions, 1 for the shared pool.
  using PoolObserver = std::function<void(NodeId switch_node, int pool, const PoolEvent&)>;
  void set_pool_observer(PoolObserver f) { observer_ = std::move(f); }
  const InaCounters& counters() const { return counters_; }
  std::size_t switches() const { return switches_.size(); }
  // The aggregation switch of a job whose first worker is `host`.
  NodeId switch_of(NodeId host) const;
  // A host's ToR; a switch itself.
  NodeId rack_of(NodeId node) const;
  // Aggregators of one switch's shared pool and SwitchML pool (0 without); slots per job.
  std::size_t shared_units() const { return shared_units_; }
  std::size_t switchml_units() const { return switchml_units_; }
  std::uint32_t switchml_slots_per_job() const;
  void report(Results& out) const;

 private:
  struct Switch;
  struct Job;
  class HostEnd;
  class Strategy;
  Switch& switch_at(NodeId node);
  Job* find(std::uint16_t id);
  void send(NodeId from, NodeId to, const Packet& p, bool ecn_check);
  void at_host(NodeId host, const Packet& p);
  void detach(std::uint16_t id);
  void grant_waiting(Switch& s);

  Engine& engine_;
  Network& network_;
  const Topology& topology_;
  ClusterParams params_;
  std::vector<FabricModel> models_;
  std::vector<Bytes> packet_bytes_;  // by PolicyKind
  std::size_t shared_units_ = 0, switchml_units_ = 0;
  PolicyKind shared_kind_ = PolicyKind::kAtp;
  InaCounters counters_;
  std::unique_ptr<MessageNetwork<Packet>> messages_;
  std::map<NodeId, std::unique_ptr<Switch>> switches_;
  std::map<NodeId, std::unique_ptr<HostEnd>> hosts_;
  std::map<std::uint16_t, std::unique_ptr<Job>> jobs_;
  std::uint32_t next_id_ = 0;
  std::uint64_t jobs_attached_ = 0, jobs_waited_ = 0;
  double wait_s_ = 0;
  std::int64_t cross_rack_bytes_ = 0;  // of messages whose ends are under different ToRs
  PoolObserver observer_;
};

}  // namespace mlsim::ina
