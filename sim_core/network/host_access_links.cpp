#include "sim_core/network/host_access_links.hpp"

#include "sim_core/base/error.hpp"

namespace mlsim {

AccessLinks host_access_links(const Topology& topology, NodeId host, const std::string& role) {
  const std::string& name = topology.node(host).name;
  const auto& out = topology.out_links(host);
  if (out.size() != 1)
    throw InputError("topology", role + " runs on host " + name +
                                     ", which needs exactly one link to the network");
  const LinkId up = out[0];
  for (LinkId l : topology.out_links(topology.link(up).dst))
    if (topology.link(l).dst == host) return {up, l};
  throw InputError("topology", "host " + name + " has no link back from the network");
}

}  // namespace mlsim
