#pragma once
// Helpers shared by the cluster model's tests: a job source from a list, a run that collects
// every job's record, and the shipped GPU catalog.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "models/cluster/cluster_sim.hpp"
#include "models/cluster/communication_mode.hpp"
#include "sim_core/hardware/hardware.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "sim_core/run/events.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim::cluster::testing {

// The model's own list source (workload.jobs.list) over `jobs`, in submit order; user i is
// named "u<i>".
inline std::unique_ptr<JobSource> list_source(std::vector<JobSpec> jobs) {
  UserTable users;
  for (const JobSpec& j : jobs)
    while (users.names().size() <= static_cast<std::size_t>(j.user))
      users.index_of("u" + std::to_string(users.names().size()));
  return std::make_unique<ListJobSource>(std::move(jobs), std::move(users));
}

inline JobSpec job(double submit_s, int gpus, double work_s, int user = 0, TypeMask types = 0) {
  JobSpec j;
  j.submit = Time::from_seconds(submit_s);
  j.gpus = gpus;
  j.work = Time::from_seconds(work_s);
  j.user = user;
  j.types = types;
  return j;
}

// One GPU type at reference speed, `nodes` nodes of `gpus` GPUs.
inline ClusterParams one_type(int nodes, int gpus, Policy policy) {
  ClusterParams p;
  p.types = {{"ref", 1.0}};
  p.groups = {{0, nodes, gpus}};
  p.policy = policy;
  return p;
}

struct RunResult {
  std::vector<JobRecord> records;  // in order of leaving
  Results results;
  std::map<std::string, double> metrics() const { return results.metrics(); }
  const JobRecord& of(std::uint64_t id) const {
    for (const auto& r : records)
      if (r.spec.id == id) return r;
    throw std::runtime_error("no record for job " + std::to_string(id));
  }
};

// Pool node i is host i of a star (the network is not used); `events` (node failures) are played
// by the platform as the runner plays them, random failures drawing from the run's stream.
inline RunResult run(ClusterParams params, std::unique_ptr<JobSource> source,
                     std::uint64_t seed = 1, PlatformEvents events = {}) {
  int nodes = 0;
  for (const NodeGroup& g : params.groups) nodes += g.nodes;
  const Topology topo = build_topology(StarSpec{nodes, LinkSpec{Bandwidth{1e9}, Time::zero()}});
  events.failure_candidates = topo.hosts();
  Engine engine;
  FluidNetwork net(engine, topo, Sharing::kNone);
  LinkConditions links(topo, net);
  HostSpeeds speeds(topo.nodes().size());
  NodeHealth health(topo.nodes().size());
  EventScheduler scheduler(engine, PlatformState{links, speeds, health}, events,
                           RandomStream(seed, "events.random_failures"));
  ClusterSimulation sim(engine, std::move(params), std::move(source), seed, &health, topo.hosts());
  RunResult out;
  sim.set_observer([&](const JobRecord& r) { out.records.push_back(r); });
  scheduler.start();
  sim.start();
  engine.run();
  sim.report(out.results);
  return out;
}

inline RunResult run(ClusterParams params, std::vector<JobSpec> jobs, std::uint64_t seed = 1,
                     PlatformEvents events = {}) {
  return run(std::move(params), list_source(std::move(jobs)), seed, std::move(events));
}

// Host `node` fails at `at` and is repaired `repair` later: the events section's
// {"at": ..., "node": i, "up": false, "repair_after": ...}.
inline void fail_node(PlatformEvents& events, NodeId node, Time at, Time repair) {
  PlatformEvent e;
  e.at = at;
  e.change = EventChange::kNodeUp;
  e.nodes = {node};
  e.up = false;
  events.events.push_back(e);
  e.at = at + repair;
  e.up = true;
  events.events.push_back(e);
}

// A Megatron model whose kernels are fixed times (no cost provider needed): one layer per
// stage, per micro-batch attention forward `forward_s` and backward `backward_s`, `grads` bytes
// of gradients per GPU, `activation` bytes per micro-batch's activation (and TP all-reduce).
inline TrainingModel megatron_test_model(int tp, int pp, int dp, int micro_batches,
                                         double forward_s, double backward_s, std::int64_t grads,
                                         std::int64_t activation = 0) {
  auto mg = std::make_shared<MegatronModel>();
  llm_training::ParallelLayout& l = mg->params.layout;
  l.tp = tp;
  l.pp = pp;
  l.dp = dp;
  l.micro_batches = micro_batches;
  l.layers_per_stage = 1;
  l.activation = Bytes{activation};
  l.first_stage_grads = l.middle_stage_grads = l.last_stage_grads = Bytes{grads};
  mg->params.executor.mode = workload::CommunicationMode::kNetwork;  // no launch, no latency
  mg->kernels.attention_forward = {FixedWork{Time::from_seconds(forward_s)}};
  mg->kernels.attention_backward = {FixedWork{Time::from_seconds(backward_s)}};
  // One sequence a micro-batch, the global batch M x dp: a job of tp pp dp GPUs runs M
  // micro-batches a replica (MegatronModel::layout_for), others as many as split it.
  mg->params.micro_batch = 1;
  mg->params.global_batch = micro_batches * dp;
  mg->stage_s_per_micro_batch = forward_s + backward_s;
  TrainingModel t;
  t.name =
      "megatron_tp" + std::to_string(tp) + "_pp" + std::to_string(pp) + "_dp" + std::to_string(dp);
  t.scheduler = "megatron";
  t.sync = "all_reduce";
  t.reference_iteration_s = (forward_s + backward_s) * micro_batches;
  t.megatron = std::move(mg);
  return t;
}

// The same Megatron model with its jobs on the training core (`megatron.core: "training"`,
// MegatronCoreJob) instead of the execution graph.
inline TrainingModel on_training_core(TrainingModel t) {
  auto mg = std::make_shared<MegatronModel>(*t.megatron);
  mg->core = llm_training::Core::kTraining;
  t.name += "_core";
  t.megatron = std::move(mg);
  return t;
}

// Every host of `topology` gets `gpus` GPUs of a GPU that runs fixed work only, joined by a
// 1e12 B/s intra_node link with no latency (what a Megatron job's executor needs).
inline void set_megatron_test_hosts(NodeHardware& hardware, const Topology& topology, int gpus) {
  static const GpuSpec gpu = [] {
    GpuSpec g;
    g.name = "fixed-work-gpu";
    return g;
  }();
  for (NodeId h : topology.hosts())
    hardware.set_host(h,
                      HostHardware{.gpu = &gpu,
                                   .gpus = gpus,
                                   .nic = nullptr,
                                   .intra_node = IntraNodeLink{.fabric = IntraNodeFabric::kNvSwitch,
                                                               .bandwidth = Bandwidth{1e12},
                                                               .latency = Time::zero(),
                                                               .source = "test"}});
}

// What the network delivers for one finished iteration of a Megatron test model's job of
// `gpus` GPUs on its own hosts (one rank of tp GPUs per host): every pipeline message (2 per
// micro-batch and boundary and replica, tp copies of the activation) and each stage's ring
// all-reduce over dp hosts (2 (dp - 1) steps of S / dp from each of dp hosts, S = tp x the gradient
// bytes).
inline std::int64_t megatron_test_bytes_per_iteration(const MegatronModel& m, int gpus) {
  const llm_training::ParallelLayout l = m.layout_for(gpus);
  const std::int64_t messages = 2 * (l.pp - 1) * l.micro_batches * l.dp;
  const std::int64_t ring = l.dp > 1 ? 2 * (l.dp - 1) * l.tp * l.first_stage_grads.count : 0;
  return messages * l.tp * l.activation.count + l.pp * ring;
}

// The same job's messages and collectives per iteration: messages, all collectives (TP
// all-reduces inside each rank: 4 per layer and micro-batch; one DP all-reduce per stage), and
// those through the network (every message and DP all-reduce: each rank has a host of its own).
struct MegatronTestCounts {
  std::uint64_t messages = 0, collectives = 0, network = 0;
};
inline MegatronTestCounts megatron_test_counts(const MegatronModel& m, int gpus) {
  const llm_training::ParallelLayout l = m.layout_for(gpus);
  MegatronTestCounts c;
  c.messages = static_cast<std::uint64_t>(2 * (l.pp - 1) * l.micro_batches * l.dp);
  const std::uint64_t dp = l.dp > 1 ? static_cast<std::uint64_t>(l.pp) : 0;
  c.collectives =
      (l.tp > 1 ? static_cast<std::uint64_t>(l.pp * l.dp * l.micro_batches * 4) : 0) + dp;
  c.network = c.messages + dp;
  return c;
}

inline HardwareCatalog shipped_catalog() {
  std::ifstream in(std::filesystem::path(MLSIM_SOURCE_DIR) / "workloads/hardware/gpus.json");
  nlohmann::json doc = nlohmann::json::parse(in);
  JsonReader hw(doc["hardware"], "hardware");
  HardwareCatalog catalog;
  catalog.add_from_json(hw);
  return catalog;
}

}  // namespace mlsim::cluster::testing
