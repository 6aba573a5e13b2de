#pragma once
// What hardware sits on each topology node: a host's GPU type (a catalog entry), how many GPUs it
// holds, its NIC and the link between its GPUs; a switch's switch spec. Built once at prepare time
// from the topology's "hardware" section (sim_core/network/topology_hardware.hpp) and reachable
// from ModelSetup and ModelEnv. A scenario without that section has an empty view (no node has
// hardware), so models that still name their GPU elsewhere keep working.
#include <optional>
#include <string>
#include <vector>

#include "sim_core/base/node_id.hpp"
#include "sim_core/hardware/hardware.hpp"

namespace mlsim {

struct HostHardware {
  const GpuSpec* gpu = nullptr;  // into the run's HardwareCatalog
  int gpus = 1;                  // GPUs in the host
  const NicSpec* nic = nullptr;  // null: the NIC is not modelled (the host link is the NIC)
  // Between the host's GPUs: the GPU's catalog entry unless the scenario overrides it; absent for
  // a one-GPU host whose GPU has no catalog entry for it.
  std::optional<IntraNodeLink> intra_node;
};

class NodeHardware {
 public:
  NodeHardware() = default;
  explicit NodeHardware(std::size_t node_count) : hosts_(node_count), switches_(node_count) {}

  void set_host(NodeId node, HostHardware h);
  void set_switch(NodeId node, const SwitchSpec* spec);

  // False when the scenario declared no hardware on its topology.
  bool empty() const { return gpu_hosts_ == 0; }
  std::size_t node_count() const { return hosts_.size(); }
  // Null for a switch, or a host without declared hardware.
  const HostHardware* host(NodeId node) const;
  const SwitchSpec* switch_spec(NodeId node) const;
  // The host's GPU; InputError at `where` when the host has none (the scenario must declare
  // topology.hardware for a model that needs it).
  const GpuSpec& gpu(NodeId node, const std::string& where) const;
  // Distinct GPU type names on the hosts, sorted.
  std::vector<std::string> gpu_types() const;

 private:
  std::vector<std::optional<HostHardware>> hosts_;
  std::vector<const SwitchSpec*> switches_;
  std::size_t gpu_hosts_ = 0;
};

}  // namespace mlsim
