#pragma once
// Helpers shared by the cluster model's tests: a job source from a list, a run that collects
// every job's record, and the shipped GPU catalog.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "models/cluster/cluster_sim.hpp"
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

inline HardwareCatalog shipped_catalog() {
  std::ifstream in(std::filesystem::path(MLSIM_SOURCE_DIR) / "workloads/hardware/gpus.json");
  nlohmann::json doc = nlohmann::json::parse(in);
  JsonReader hw(doc["hardware"], "hardware");
  HardwareCatalog catalog;
  catalog.add_from_json(hw);
  return catalog;
}

}  // namespace mlsim::cluster::testing
