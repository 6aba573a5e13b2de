#pragma once
// A host's one link to the network and the link back: what a model watches (LinkConditions) when
// it predicts a host's bandwidth from its own links (pipeline stages, commsched workers and
// servers). Star, leaf-spine and fat-tree hosts have exactly one.
#include <string>

#include "sim_core/network/topology.hpp"

namespace mlsim {

struct AccessLinks {
  LinkId up = 0;    // host -> network
  LinkId down = 0;  // network -> host
};

// InputError at "topology" naming `role` (e.g. "pipeline stage 2") when `host` has not exactly one
// link to the network or no link back from it.
AccessLinks host_access_links(const Topology& topology, NodeId host, const std::string& role);

}  // namespace mlsim
