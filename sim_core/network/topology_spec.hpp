#pragma once
// Parsing a scenario's "topology" section into a TopologySpec (topology_builders.hpp).
//
//   {"kind": "star",       "hosts": 16, "link": {"bandwidth": "100Gbps", "latency": "1us"}}
//   {"kind": "ring",       "hosts": 16, "link": {...}}
//   {"kind": "leaf_spine", "leaves": 4, "hosts_per_leaf": 8, "spines": 2,
//    "oversubscription": 1, "host_link": {...}, "uplink_latency": "1us"}
//   {"kind": "fat_tree",   "k": 4, "link": {...}}
//   {"kind": "explicit",   "nodes": [{"name": "a", "kind": "host"}, ...],
//    "links": [{"a": "a", "b": "s", "bandwidth": "100Gbps", "latency": "1us"}, ...]}
//
// Every impossible value (zero hosts, odd k, unknown endpoint, ...) is an InputError naming its
// path here, before anything is built.
#include "sim_core/network/topology_builders.hpp"

namespace mlsim {

class JsonReader;

// The largest topology a scenario may ask for, so a typo cannot exhaust memory.
inline constexpr int kMaxHosts = 1 << 20;
inline constexpr int kMaxFatTreeK = 64;

TopologySpec parse_topology_spec(JsonReader& topology);

// Number of hosts the spec will build.
int host_count(const TopologySpec& spec);

}  // namespace mlsim
