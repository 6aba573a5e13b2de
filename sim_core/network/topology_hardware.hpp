#pragma once
// The topology's "hardware" section: which catalog GPU (and how many), NIC and intra-node link
// each host has, and which switch spec each switch is. docs/scenario.md documents the keys:
//
//   "hardware": {"gpu": "A100-SXM4-80GB", "gpus_per_host": 8, "nic": "ConnectX-6-200G",
//                "switch": "tofino-32x100g",
//                "intra_node": {"bandwidth": "300GB/s", "latency": "1us"},   // optional override
//                "groups": [{"leaves": [1], "gpu": "H100-SXM5-80GB"}]}
//
// A group selects hosts by "hosts" (indices), "leaves" (leaf_spine), "pods" (fat_tree) or
// "nodes" (names) and overrides any of the keys above for them (and "switch" for the switches it
// selects); later groups win. Parsing checks the keys and catalog names; building checks the
// rest against the built topology (indices in range, NIC at least as fast as the host's links,
// switch ports, intra-node links for multi-GPU hosts). Both happen before the first event.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim_core/hardware/hardware.hpp"
#include "sim_core/hardware/node_hardware.hpp"
#include "sim_core/network/topology.hpp"
#include "sim_core/network/topology_builders.hpp"

namespace mlsim {

class JsonReader;

struct HardwareChoice {  // what a level (the section, or a group) sets; unset: inherited
  std::optional<std::string> gpu;
  std::optional<int> gpus_per_host;
  std::optional<std::string> nic;
  std::optional<std::string> switch_spec;
  std::optional<IntraNodeFabric> intra_fabric;
  std::optional<Bandwidth> intra_bandwidth;
  std::optional<Time> intra_latency;
  std::string path;  // JSON path of the level, for errors
};

struct HardwareGroup {
  enum class Selector { kHosts, kLeaves, kPods, kNodes } selector = Selector::kHosts;
  std::vector<std::int64_t> indices;  // hosts, leaves, pods
  std::vector<std::string> names;     // nodes
  HardwareChoice choice;
};

struct TopologyHardwareSpec {
  bool present = false;
  HardwareChoice defaults;
  std::vector<HardwareGroup> groups;
};

// Reads topology.hardware (`topology` is the topology section's reader; absent: not present).
TopologyHardwareSpec parse_topology_hardware(JsonReader& topology, const TopologySpec& spec,
                                             const HardwareCatalog& catalog);

// The per-node view. Empty when the spec is not present. InputError (paths under
// topology.hardware) for what only the built topology shows.
NodeHardware build_node_hardware(const Topology& topology, const TopologySpec& spec,
                                 const TopologyHardwareSpec& hw, const HardwareCatalog& catalog);

// A model key that named its GPUs before they moved onto the topology (e.g. commsched's
// `workload.gpu`): InputError at the key's path, "moved: " and `what`, which says where
// topology.hardware declares it now. Does nothing when the key is absent.
void reject_moved_to_topology_hardware(JsonReader& section, std::string_view key,
                                       std::string_view what);

}  // namespace mlsim
