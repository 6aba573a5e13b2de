#include "sim_core/network/crossval/cross_validation.hpp"

#include <functional>
#include <memory>

#include "sim_core/base/error.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "sim_core/scenario/json_reader.hpp"
#ifdef MLSIM_HAVE_SIMGRID
#include "sim_core/network/simgrid/simgrid_backend.hpp"
#endif
#ifdef MLSIM_HAVE_NS3
#include "sim_core/network/ns3/ns3_backend.hpp"
#endif

namespace mlsim::crossval {
namespace {

// 10 Gb/s links with 1 us of latency everywhere.
constexpr Bandwidth kLink{1.25e9};
constexpr Time kLatency = Time::us(1);
constexpr LinkSpec kLinkSpec{kLink, kLatency};

constexpr std::int64_t kOneFlowBytes = 1'000'000;
constexpr std::int64_t kIncastBytes = 256'000;  // per sender
constexpr int kRingHosts = 16;
constexpr std::int64_t kRingBytes = 1'600'000;   // all-reduced buffer: 100 kB chunks
constexpr std::int64_t kAllToAllBytes = 32'000;  // per pair

// Records completions in start order.
class Tracker {
 public:
  explicit Tracker(Engine& engine) : engine_(engine) {}
  std::size_t add() {
    outcome_.finished.push_back(Time::zero());
    outcome_.failed.push_back(false);
    return outcome_.finished.size() - 1;
  }
  void done(std::size_t i, const TransferResult& r) {
    outcome_.finished[i] = r.finished;
    outcome_.failed[i] = r.failed;
    if (r.finished > outcome_.makespan) outcome_.makespan = r.finished;
  }
  // Starts a transfer whose completion is recorded, then runs `then`.
  void send(Network& net, NodeId src, NodeId dst, Bytes bytes, std::uint64_t label,
            std::function<void()> then = {}) {
    const std::size_t i = add();
    auto then_ptr = std::make_shared<std::function<void()>>(std::move(then));
    net.start_transfer(
        src, dst, bytes,
        [this, i, then_ptr](const TransferResult& r) {
          done(i, r);
          if (*then_ptr) (*then_ptr)();
        },
        label);
  }
  Outcome take() {
    outcome_.engine_events = engine_.events_processed();
    return std::move(outcome_);
  }

 private:
  Engine& engine_;
  Outcome outcome_;
};

Topology star(int hosts) {
  return build_topology(StarSpec{hosts, kLinkSpec});
}

// h0 - s0 - s1 - s2 - s3 - h3 with h1 on s1 and h2 on s2: the long flow h0 -> h3 crosses the
// three inter-switch links, each short flow h_i -> h_{i+1} one of them.
Topology parking_lot() {
  Topology t;
  std::vector<NodeId> hosts, switches;
  for (int i = 0; i < 4; ++i) hosts.push_back(t.add_node("h" + std::to_string(i), NodeKind::kHost));
  for (int i = 0; i < 4; ++i)
    switches.push_back(t.add_node("s" + std::to_string(i), NodeKind::kSwitch));
  for (int i = 0; i < 4; ++i)
    t.add_duplex_link(hosts[i], switches[i], Bandwidth{4 * kLink.bytes_per_s}, kLatency);
  for (int i = 0; i < 3; ++i) t.add_duplex_link(switches[i], switches[i + 1], kLink, kLatency);
  return t;
}

Topology leaf_spine() {
  LeafSpineSpec s;
  s.leaves = 4;
  s.hosts_per_leaf = 4;
  s.spines = 2;
  s.oversubscription = 4;
  s.host_link = kLinkSpec;
  s.uplink_latency = kLatency;
  return build_topology(s);
}

Topology topology_for(const std::string& name) {
  if (name == "one_flow") return star(2);
  if (name == "two_flows") return star(3);
  if (name == "incast_8to1") return star(9);
  if (name == "parking_lot") return parking_lot();
  if (name == "ring_allreduce_16") return build_topology(RingSpec{kRingHosts, kLinkSpec});
  if (name == "leaf_spine_all_to_all") return leaf_spine();
  throw InputError("scenario", "unknown cross-validation scenario \"" + name + "\"");
}

// Ring all-reduce: 2(n-1) steps; in each, host i sends one chunk (S/n) to host i+1. Host i starts
// step s once it has received step s-1 from host i-1 and its own step s-1 send is delivered.
class RingAllReduce {
 public:
  RingAllReduce(Network& net, Tracker& tracker, const std::vector<NodeId>& hosts, Bytes total)
      : net_(net),
        tracker_(tracker),
        hosts_(hosts),
        chunk_{total.count / static_cast<std::int64_t>(hosts.size())},
        steps_(2 * (static_cast<int>(hosts.size()) - 1)),
        received_(hosts.size(), -1),
        delivered_(hosts.size(), -1),
        next_step_(hosts.size(), 0) {}

  void start() {
    for (std::size_t i = 0; i < hosts_.size(); ++i) try_send(i);
  }

 private:
  void try_send(std::size_t i) {
    const int step = next_step_[i];
    if (step >= steps_) return;
    if (step > 0 && (received_[i] < step - 1 || delivered_[i] < step - 1)) return;
    next_step_[i] = step + 1;
    const std::size_t next = (i + 1) % hosts_.size();
    tracker_.send(net_, hosts_[i], hosts_[next], chunk_, i, [this, i, next, step] {
      delivered_[i] = step;
      received_[next] = step;
      try_send(i);
      try_send(next);
    });
  }

  Network& net_;
  Tracker& tracker_;
  const std::vector<NodeId>& hosts_;
  Bytes chunk_;
  int steps_;
  std::vector<int> received_, delivered_, next_step_;
};

void drive(const std::string& name, Network& net, const Topology& topo, Tracker& tracker) {
  const auto& h = topo.hosts();
  if (name == "one_flow") {
    tracker.send(net, h[0], h[1], Bytes{kOneFlowBytes}, 0);
  } else if (name == "two_flows") {
    tracker.send(net, h[0], h[2], Bytes{kOneFlowBytes}, 0);
    tracker.send(net, h[1], h[2], Bytes{kOneFlowBytes}, 1);
  } else if (name == "incast_8to1") {
    for (int i = 0; i < 8; ++i) tracker.send(net, h[i], h[8], Bytes{kIncastBytes}, i);
  } else if (name == "parking_lot") {
    tracker.send(net, h[0], h[3], Bytes{kOneFlowBytes}, 0);
    for (int i = 0; i < 3; ++i) tracker.send(net, h[i], h[i + 1], Bytes{kOneFlowBytes}, i + 1);
  } else if (name == "leaf_spine_all_to_all") {
    const auto n = static_cast<std::uint64_t>(h.size());
    for (std::uint64_t s = 0; s < n; ++s)
      for (std::uint64_t d = 0; d < n; ++d)
        if (s != d) tracker.send(net, h[s], h[d], Bytes{kAllToAllBytes}, s * n + d);
  }
}

}  // namespace

const std::vector<std::string>& scenario_names() {
  static const std::vector<std::string> names{"one_flow",          "two_flows",
                                              "incast_8to1",       "parking_lot",
                                              "ring_allreduce_16", "leaf_spine_all_to_all"};
  return names;
}

std::string scenario_description(const std::string& name) {
  if (name == "one_flow") return "1 MB between two hosts of a star";
  if (name == "two_flows") return "two 1 MB flows into one host of a star (share its link)";
  if (name == "incast_8to1") return "8 hosts send 256 kB each to a 9th through one switch port";
  if (name == "parking_lot")
    return "chain of 4 switches: one 1 MB flow over the 3 inner links, one 1 MB flow on each";
  if (name == "ring_allreduce_16") return "ring all-reduce of 1.6 MB on a 16-host ring (30 steps)";
  if (name == "leaf_spine_all_to_all")
    return "all-to-all, 32 kB per pair, 16 hosts on 4 leaves, 2 spines, 4:1 oversubscribed";
  throw InputError("scenario", "unknown cross-validation scenario \"" + name + "\"");
}

Time ideal_makespan(const std::string& name) {
  const double b = kLink.bytes_per_s;
  const auto us = [](double seconds) { return Time::from_seconds(seconds); };
  if (name == "one_flow") return us(kOneFlowBytes / b) + kLatency * 2;
  if (name == "two_flows") return us(2 * kOneFlowBytes / b) + kLatency * 2;
  if (name == "incast_8to1") return us(8 * kIncastBytes / b) + kLatency * 2;
  if (name == "parking_lot") return us(2 * kOneFlowBytes / b) + kLatency * 5;
  if (name == "ring_allreduce_16") {
    const int steps = 2 * (kRingHosts - 1);
    return us(steps * (kRingBytes / kRingHosts) / b) + kLatency * steps;
  }
  if (name == "leaf_spine_all_to_all") {
    // Each leaf sends 4 hosts x 12 remote hosts x 32 kB up its two 0.625 GB/s uplinks (perfect
    // balance; ECMP hashing does worse), then 4 links of latency.
    return us(4 * 12 * kAllToAllBytes / (2 * b / 2)) + kLatency * 4;
  }
  throw InputError("scenario", "unknown cross-validation scenario \"" + name + "\"");
}

BackendRegistry all_backends() {
  BackendRegistry registry;
  register_core_backends(registry);
#ifdef MLSIM_HAVE_SIMGRID
  register_simgrid_backend(registry);
#endif
#ifdef MLSIM_HAVE_NS3
  register_ns3_backend(registry);
#endif
  return registry;
}

nlohmann::json validation_options(const std::string& backend) {
  if (backend == "simgrid") return {{"model", "CM02"}, {"latency", "after_sending"}};
  if (backend == "ns3") return {{"transport", "tcp"}};
  return nlohmann::json::object();
}

Outcome run(const std::string& scenario, const std::string& backend, nlohmann::json options) {
  const Topology topology = topology_for(scenario);
  const BackendRegistry registry = all_backends();
  const BackendInfo* info = registry.find(backend);
  if (info == nullptr)
    throw InputError("network.backend", "backend \"" + backend + "\" is not built");
  options["backend"] = backend;
  JsonReader reader(options, "network");
  const auto factory = info->configure(reader);

  Engine engine;
  Tracker tracker(engine);
  std::unique_ptr<Network> net = factory(engine, topology);
  RingAllReduce ring(*net, tracker, topology.hosts(), Bytes{kRingBytes});
  if (scenario == "ring_allreduce_16")
    ring.start();
  else
    drive(scenario, *net, topology, tracker);
  engine.run();
  Outcome outcome = tracker.take();
  net.reset();
  return outcome;
}

}  // namespace mlsim::crossval
