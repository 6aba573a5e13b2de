#pragma once
// Hardware on a test topology's hosts, as topology.hardware would give it, for tests that call a
// model's parameter reader directly (without the runner).
#include <algorithm>
#include <string>
#include <vector>

#include "sim_core/hardware/hardware.hpp"
#include "sim_core/hardware/node_hardware.hpp"
#include "sim_core/network/topology.hpp"

namespace mlsim::test {

// Host i gets catalog GPU gpus[i], the hosts after the list its last entry; `gpus_per_host` each.
inline NodeHardware host_gpus(const Topology& topology, const HardwareCatalog& catalog,
                              const std::vector<std::string>& gpus, int gpus_per_host = 1) {
  NodeHardware hardware(topology.nodes().size());
  for (std::size_t h = 0; h < topology.hosts().size(); ++h) {
    const GpuSpec& gpu = catalog.gpu(gpus[std::min(h, gpus.size() - 1)], "test");
    hardware.set_host(
        topology.hosts()[h],
        HostHardware{.gpu = &gpu, .gpus = gpus_per_host, .nic = nullptr, .intra_node = {}});
  }
  return hardware;
}

}  // namespace mlsim::test
