#pragma once
// Everything one in-network-aggregation run needs, typed (the scenario reader fills it; tests
// build it directly). Defaults are the papers' published figures (papers.md section 2); the
// [inferred] ones are modelling choices, documented in docs/ina.md.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/ina/data_path.hpp"
#include "models/ina/dsa_priority.hpp"
#include "models/ina/job_plan.hpp"
#include "models/ina/packet_loss.hpp"
#include "models/training/chunk.hpp"
#include "models/training/comm_scheduler.hpp"
#include "sim_core/base/time.hpp"
#include "sim_core/base/units.hpp"
#include "sim_core/hardware/dnn_profile.hpp"

namespace mlsim::ina {

enum class PolicyKind { kSwitchMl, kAtp, kDsa };
std::string_view policy_name(PolicyKind p);

struct JobSpec {
  std::string model;  // for output
  // The job's aggregation policy; empty: ClusterParams::policy. SwitchML jobs may share the
  // switch with ATP or DSA jobs (docs/ina.md, "Mixed policies").
  std::optional<PolicyKind> policy;
  std::shared_ptr<const DnnProfile> profile;
  int workers = 4;
  int iterations = 10;
  Time arrival;
  // Per worker, its layer times (the plan's layers) on the GPU topology.hardware puts on its host;
  // empty: the profile's times as measured (tests of the aggregation alone).
  std::vector<std::shared_ptr<const LayerTimes>> worker_times;
  std::string gpus;  // the workers' GPU types, for output
};

struct ClusterParams {
  PolicyKind policy = PolicyKind::kAtp;
  // The training core's communication scheduler (models/training/policies.cpp) that orders each
  // worker's ready gradients before they leave: "fifo" (the framework's order, whole layers as
  // they are produced; the default) or "bytescheduler" (chunks of scheduler_config.partition
  // values by layer priority within scheduler_config.credit values in flight; not with
  // SwitchML, whose slots stream chunks in production order).
  std::string scheduler = "fifo";
  training::SchedulerConfig scheduler_config;
  // Who orders ByteScheduler's chunks (training::Ordering, comm_scheduler.hpp; `scheduling`):
  // kJob (default): one order for the job, as ByteScheduler orders a collective [code:
  // bytedance/byteps@bytescheduler, bytescheduler/mxnet/horovod.py ScheduledOptimizer.__init__]:
  // worker 0's scheduler releases a chunk once every worker produced its layer, and it starts on
  // every worker at once. kEveryWorker: each worker's own credit, which deadlocks once workers
  // drift apart (each holds its credit for chunks that wait on a chunk the other has queued
  // behind its credit, or behind its sender's window). kRankZero: worker 0 paces, the others
  // send each chunk when produced, as over a PS (mxnet/kvstore.py); their packets then wait in
  // aggregators, and their windows fill, with chunks worker 0 sends last. Both are kept for the
  // tests and docs/cluster.md, "ByteScheduler over ATP". FIFO needs none (every worker's
  // framework order is its backward order).
  training::Ordering ordering = training::Ordering::kJob;
  // How packets move (data_path.hpp): the model's own packet links on a star, or transfers of
  // the scenario's network backend to the switch node `switch_node` (by name; empty = the
  // topology's only switch).
  DataPathKind data_path = DataPathKind::kPacket;
  std::string switch_node;
  // Host <-> ToR links (every worker and PS has its own port) and the switch pipeline.
  Bandwidth link_bandwidth{12.5e9};   // 100 Gbps
  Time link_latency = Time::ns(500);  // [inferred] propagation + NIC, one way per hop
  Time switch_latency = Time::ns(400);
  double ecn_threshold_bytes = 100'000;  // [inferred] switch egress queue depth that marks ECN
  // Register memory given to aggregation; each policy cuts it into its own aggregators.
  Bytes aggregator_memory{20000 * 248};
  // Packet formats: ATP 62 int32 values per packet in a 308-byte packet; SwitchML 256 values
  // (1024-byte payload) with the same 60-byte header [inferred: header size].
  int atp_values_per_packet = 62;
  int switchml_values_per_packet = 256;
  Bytes header_bytes{60};
  // Batched mode: one event carries a burst of about `burst_values` gradient values
  // (k = max(1, burst_values / values_per_packet) packets); 1 = packet-accurate.
  int burst_values = 1;
  // ATP senders: 12 threads, each with a window capped at 100 packets, +1500 B per ACK,
  // halved on ECN [src: ATP client code]; initial window = cap [inferred].
  int sender_threads = 12;
  double window_cap_packets_per_thread = 100;
  double window_increase_bytes = 1500;
  Time atp_timeout = Time::ms(1);        // [inferred] between ATP's 50 ms initial and 0.2 ms
  Time switchml_timeout = Time::ms(10);  // SwitchML client default
  int switchml_partitions = 0;           // 0 = number of (SwitchML) jobs [inferred]
  // With SwitchML and ATP/DSA jobs on one switch: the register bytes for SwitchML's partitions
  // (the rest is the shared pool); 0 = the SwitchML jobs' equal share per job [inferred].
  Bytes switchml_memory{0};
  bool selective_retransmission = true;  // DSA
  // ATP's two-level aggregation (aggregation_levels.hpp): ATP/DSA jobs spanning racks aggregate
  // first at each rack's ToR, then at the job's root switch: the PS's ToR in the cluster
  // model's fabric (system.ina.levels), `switch_node` on the ina model's network path
  // (system.levels).
  bool two_level = false;
  // The ina model's root under two_level: the program's `switch_node` for every job
  // (system.levels "two_level"), or each job's PS's ToR ("two_level_ps_tor"), ATP's paper's
  // second level (docs/ina.md "Two-level aggregation").
  bool root_at_ps_tor = false;
  // DSA's control-plane priority (dsa_priority.hpp): per tensor (job intensity, then layers
  // nearer the input) or per job.
  DsaPriorityKind dsa_priority = DsaPriorityKind::kTensor;
  // A job in which nothing happens for this long (no compute op ends, no worker receives a new
  // result: e.g. its hosts are cut off from the switch by failed links) is aborted and reported
  // failed, as a training framework's collective watchdog kills a hung job. Default 10 min:
  // PyTorch ProcessGroupNCCL's default collective timeout (pytorch/pytorch PR 110947). The
  // systems' own senders never give up (SwitchML's client doubles its timeout, ATP resends).
  Time stall_timeout = Time::s(600);
  // Bytes of gradient payload per second a PS sums, one packet after another (the collective
  // layer's host.ps_aggregation, docs/collectives.md); 0 = summing is free (the default: no
  // source gives ATP's PS rate, so the shipped study keeps a free PS).
  Bandwidth ps_aggregation{0};
  bool include_input_layers = false;  // PipeDream's Input node is data loading
  // Packet loss per wire packet per hop (packet_loss.hpp); 0 = lossless links. `loss_rule`
  // (tests) picks lost packets by hand instead. `seed` seeds the "ina.loss" stream.
  double loss_rate = 0;
  PacketLoss::Rule loss_rule;
  std::uint64_t seed = 1;
  // > 0: report the aggregator occupancy per interval of this width (series
  // "aggregator_occupancy").
  Time occupancy_interval = Time::zero();
  std::vector<JobSpec> jobs;
};

}  // namespace mlsim::ina
