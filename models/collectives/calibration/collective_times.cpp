// Evaluates the collective layer (sim_core/collectives) on GPU-node topologies, for calibration
// against measured NCCL times (tools/calibrate_collectives.py):
//
//   mlsim_collective_times CONFIG.json      prints one line per query: seconds protocol
//
//   {"costs": {...}, "host": {...},                         same keys as the collectives model
//    "systems": {"a100_dgx": {"kind": "nvswitch", "nvlink": "300GB/s", "nvlink_efficiency": 0.7,
//                             "nvlink_latency": "0s", "pcie": "31.5GB/s", "nic": "25GB/s",
//                             "nic_efficiency": 1, "nic_latency": "0s",
//                             "nics_per_node": 0}, ...},
//    "channels": "per_nic" | 1,
//    "queries": [["a100_dgx", GPUS, NODES, "all_reduce" | "send_recv", BYTES (, "nvls")], ...]}
//
// all_reduce runs a ring (one channel per NIC across nodes); with "nvls" it reduces in the
// NVSwitch (one node), cut into n pieces of S/n (the size of the ring's messages, so that the
// fitted per-message latency is charged as in the calibrated ring: 2n messages per GPU against
// the ring's 2(n-1)), two in flight per GPU so that one piece goes up while another comes down.
//
// Topologies: topology.hardware (sim_core/network/topology_hardware.hpp) describes a multi-GPU
// host as one node with an intra-node link, so GPUs are not network endpoints there; until hosts
// expand into GPU nodes, these per-GPU topologies are built here, with the catalog's figures:
// Messages are not queued per GPU (window 0): NCCL's channels run at once.
//   nvswitch  per node a switch with one link per GPU (NVLink, per direction: the catalog's
//             nvlink_bandwidth / 2, times nvlink_efficiency); with several nodes every GPU also
//             has a PCIe link to its own NIC, and every NIC a link to one fabric switch
//             (DGX A100: one 200 Gb/s HDR NIC per GPU). "nics_per_node" k > 0 gives each node
//             only k NICs (GPU g uses NIC g mod k, so that the channels, whose rings enter and
//             leave a node through consecutive GPUs, spread over them), for sweeping a system
//             whose NIC set-up is not known; "per_nic" channels are then one per NIC.
//   pairwise  GPUs 2j and 2j+1 joined by an NVLink bridge, every GPU on a PCIe link to one
//             PCIe switch (one node only).
// Every query runs the real code path: run_collective over the flow backend (max-min sharing).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "sim_core/base/error.hpp"
#include "sim_core/collectives/collective.hpp"
#include "sim_core/collectives/read_costs.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "sim_core/scenario/strict_json.hpp"

using namespace mlsim;
using namespace mlsim::collectives;

namespace {

struct System {
  std::string kind;
  Bandwidth nvlink, pcie, nic;
  Time nvlink_latency, pcie_latency, nic_latency;
  int nics_per_node = 0;  // 0: one per GPU
};

System read_system(JsonReader& r) {
  System s;
  s.kind = r.choice("kind", {"nvswitch", "pairwise"});
  s.nvlink = Bandwidth{r.bandwidth("nvlink").bytes_per_s * r.number("nvlink_efficiency", 1e-3, 1)};
  s.nvlink_latency = r.duration_or("nvlink_latency", "0s");
  s.pcie = r.bandwidth("pcie");
  s.pcie_latency = r.duration_or("pcie_latency", "0s");
  s.nic = Bandwidth{r.bandwidth_or("nic", "25GB/s").bytes_per_s *
                    r.number_or("nic_efficiency", 1.0, 1e-3, 1)};
  s.nic_latency = r.duration_or("nic_latency", "0s");
  s.nics_per_node = static_cast<int>(r.integer_or("nics_per_node", 0, 0, 64));
  r.finish();
  return s;
}

// NICs in each node: one per GPU unless the system says fewer.
int nics_per_node(const System& s, int gpus_per_node) {
  return s.nics_per_node > 0 ? std::min(s.nics_per_node, gpus_per_node) : gpus_per_node;
}

Topology build(const System& s, int gpus, int nodes) {
  Topology t;
  const int per_node = gpus / nodes;
  std::vector<NodeId> hosts;
  if (s.kind == "pairwise") {
    if (nodes != 1) throw InputError("queries", "pairwise systems are modelled within one node");
    const NodeId pcie = t.add_node("pcie", NodeKind::kSwitch);
    for (int g = 0; g < gpus; ++g) {
      hosts.push_back(t.add_node("gpu" + std::to_string(g), NodeKind::kHost));
      t.add_duplex_link(hosts.back(), pcie, s.pcie, s.pcie_latency);
      if (g % 2 == 1) t.add_duplex_link(hosts[g - 1], hosts[g], s.nvlink, s.nvlink_latency);
    }
    return t;
  }
  std::optional<NodeId> fabric;
  if (nodes > 1) fabric = t.add_node("fabric", NodeKind::kSwitch);
  const int nics = nics_per_node(s, per_node);
  for (int k = 0; k < nodes; ++k) {
    const std::string node = "node" + std::to_string(k);
    const NodeId nvswitch = t.add_node(node + "/nvswitch", NodeKind::kSwitch);
    std::vector<NodeId> node_nics;
    for (int i = 0; fabric && i < nics; ++i) {
      node_nics.push_back(t.add_node(node + "/nic" + std::to_string(i), NodeKind::kSwitch));
      t.add_duplex_link(node_nics.back(), *fabric, s.nic, s.nic_latency);
    }
    for (int g = 0; g < per_node; ++g) {
      const NodeId gpu = t.add_node(node + "/gpu" + std::to_string(g), NodeKind::kHost);
      t.add_duplex_link(gpu, nvswitch, s.nvlink, s.nvlink_latency);
      if (fabric) t.add_duplex_link(gpu, node_nics[g % nics], s.pcie, s.pcie_latency);
    }
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CONFIG.json\n", argv[0]);
    return 2;
  }
  try {
    std::ifstream in(argv[1]);
    if (!in) throw InputError(argv[1], "cannot read the file");
    nlohmann::json doc = parse_strict_json(
        std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()), argv[1]);
    JsonReader root(doc, "");
    CollectiveSpec base;
    JsonReader costs = root.object_or_empty("costs");
    base.costs = read_cost_model(costs);
    JsonReader host = root.object_or_empty("host");
    base.host = read_host_costs(host);
    const std::string channels = root.string_or("channels", "1");
    std::map<std::string, System> systems;
    JsonReader sys = root.object("systems");
    for (auto& [name, value] : root.raw("systems").items()) {
      JsonReader r = sys.object(name);
      systems.emplace(name, read_system(r));
    }
    sys.finish();
    const nlohmann::json queries = root.raw("queries");
    root.finish();

    std::map<std::tuple<std::string, int, int>, Topology> topologies;
    for (const auto& q : queries) {
      const std::string name = q.at(0).get<std::string>();
      const int gpus = q.at(1).get<int>(), nodes = q.at(2).get<int>();
      const std::string op = q.at(3).get<std::string>();
      const auto it = systems.find(name);
      if (it == systems.end()) throw InputError("queries", "no system named " + name);
      if (nodes < 1 || gpus < 2 || gpus % nodes != 0)
        throw InputError("queries", "GPUs must be a multiple of nodes, at least 2");
      auto [topo, fresh] = topologies.try_emplace({name, gpus, nodes});
      if (fresh) topo->second = build(it->second, gpus, nodes);
      const Topology& t = topo->second;
      CollectiveSpec spec = base;
      // NCCL's channels run at once (one thread block each) and a GPU talks to its peers over
      // separate connections: no per-GPU send queue.
      spec.window = 0;
      spec.bytes = Bytes{q.at(4).get<std::int64_t>()};
      const bool nvls = q.size() > 5 && q.at(5).get<std::string>() == "nvls";
      if (op == "all_reduce" && nvls) {
        spec.algorithm = Algorithm::kNvls;
        spec.window = 2;
        spec.chunks = gpus;
      } else if (op == "all_reduce") {
        spec.operation = Operation::kAllReduce;
        spec.algorithm = Algorithm::kRing;
        spec.channels =
            channels == "per_nic" && nodes > 1 ? nics_per_node(it->second, gpus / nodes) : 1;
      } else if (op == "send_recv") {
        spec.operation = Operation::kSendRecv;
        spec.algorithm = Algorithm::kDirect;
      } else {
        throw InputError("queries", "operation " + op + " is not calibrated");
      }
      Engine engine;
      FluidNetwork net(engine, t, Sharing::kMaxMin);
      LinkConditions links(t, net);
      const CollectiveResult r = run_collective(engine, net, t.hosts(), spec, &links);
      if (!r.completed) throw std::runtime_error("a collective did not complete");
      std::printf("%.9g %s\n", r.seconds(),
                  r.protocol ? std::string(to_string(*r.protocol)).c_str() : "-");
    }
  } catch (const InputError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 0;
}
