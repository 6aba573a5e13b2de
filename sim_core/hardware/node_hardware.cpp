#include "sim_core/hardware/node_hardware.hpp"

#include <fmt/format.h>

#include <set>

#include "sim_core/base/error.hpp"

namespace mlsim {

void NodeHardware::set_host(NodeId node, HostHardware h) {
  MLSIM_CHECK(node < hosts_.size() && h.gpu != nullptr && h.gpus >= 1,
              "host hardware needs a node of the topology and a GPU");
  if (!hosts_[node]) ++gpu_hosts_;
  hosts_[node] = std::move(h);
}

void NodeHardware::set_switch(NodeId node, const SwitchSpec* spec) {
  MLSIM_CHECK(node < switches_.size(), "switch hardware for an unknown node");
  switches_[node] = spec;
}

const HostHardware* NodeHardware::host(NodeId node) const {
  return node < hosts_.size() && hosts_[node] ? &*hosts_[node] : nullptr;
}

const SwitchSpec* NodeHardware::switch_spec(NodeId node) const {
  return node < switches_.size() ? switches_[node] : nullptr;
}

const GpuSpec& NodeHardware::gpu(NodeId node, const std::string& where) const {
  if (const auto* h = host(node)) return *h->gpu;
  throw InputError(where, fmt::format("node {} has no GPU: declare the hosts' hardware in "
                                      "topology.hardware (docs/scenario.md)",
                                      node));
}

std::vector<std::string> NodeHardware::gpu_types() const {
  std::set<std::string> names;
  for (const auto& h : hosts_)
    if (h) names.insert(h->gpu->name);
  return {names.begin(), names.end()};
}

}  // namespace mlsim
