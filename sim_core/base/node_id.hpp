#pragma once
// Topology node numbers, shared by the layers that attach things to nodes (hardware: GPUs and
// host speeds; network: links and routes) without the hardware layer depending on the network.
#include <cstdint>

namespace mlsim {

using NodeId = std::uint32_t;

}  // namespace mlsim
