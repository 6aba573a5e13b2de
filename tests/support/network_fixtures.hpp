#pragma once
// Small hand-made topologies and a delivery recorder shared by the backend test suites (flow,
// SimGrid, ns-3), so that each backend is checked on the very same cases. Header-only: a folder
// under tests/ without .cpp files builds no binary of its own.
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "sim_core/base/time.hpp"
#include "sim_core/network/network.hpp"
#include "sim_core/network/routing.hpp"
#include "sim_core/network/topology.hpp"

namespace mlsim {
// GoogleTest prints Times readably in failure messages.
inline void PrintTo(Time t, std::ostream* os) {
  *os << to_string(t);
}
}  // namespace mlsim

namespace mlsim::test {

inline constexpr Bandwidth kGBps{1e9};

// n hosts (ids 1..n) on one switch (id 0), every host link `bandwidth` and `latency` each way.
inline Topology star(int n, Time latency, Bandwidth bandwidth = kGBps) {
  Topology t;
  const NodeId sw = t.add_node("sw", NodeKind::kSwitch);
  for (int i = 0; i < n; ++i) {
    const NodeId h = t.add_node("h" + std::to_string(i), NodeKind::kHost);
    t.add_duplex_link(h, sw, bandwidth, latency);
  }
  return t;
}

// The parking lot: switches s0 - s1 - s2 - s3 in a chain of `inner` links, host h_i on s_i by a
// link fast enough (1 TB/s, no latency) never to be the bottleneck.
struct ParkingLot {
  Topology topology;
  std::vector<NodeId> hosts;
};
inline ParkingLot parking_lot(Bandwidth inner, Time inner_latency) {
  ParkingLot p;
  std::vector<NodeId> s;
  for (int i = 0; i < 4; ++i)
    s.push_back(p.topology.add_node("s" + std::to_string(i), NodeKind::kSwitch));
  for (int i = 0; i < 4; ++i) {
    p.hosts.push_back(p.topology.add_node("h" + std::to_string(i), NodeKind::kHost));
    p.topology.add_duplex_link(p.hosts[i], s[i], Bandwidth{1e12}, Time::zero());
  }
  for (int i = 0; i < 3; ++i) p.topology.add_duplex_link(s[i], s[i + 1], inner, inner_latency);
  return p;
}

// Hosts a and b joined by two switches, a - s0 - b and a - s1 - b: two equal-hop paths. Nodes
// and links are added in that order, so link ids are fixed: a->s0 = 0, a->s1 = 2, s0->b = 4,
// s1->b = 6 (each reverse direction is the id + 1).
struct TwoPathsSpec {
  Bandwidth a_s0 = kGBps, a_s1 = kGBps, to_b = kGBps;
  Time latency = Time::zero();
};
struct TwoPaths {
  Topology topology;
  NodeId a = 0, b = 0, s0 = 0, s1 = 0;
  LinkId a_s0 = 0, a_s1 = 0;
};
inline TwoPaths two_paths(const TwoPathsSpec& spec) {
  TwoPaths p;
  Topology& t = p.topology;
  p.a = t.add_node("a", NodeKind::kHost);
  p.b = t.add_node("b", NodeKind::kHost);
  p.s0 = t.add_node("s0", NodeKind::kSwitch);
  p.s1 = t.add_node("s1", NodeKind::kSwitch);
  p.a_s0 = t.add_duplex_link(p.a, p.s0, spec.a_s0, spec.latency);
  p.a_s1 = t.add_duplex_link(p.a, p.s1, spec.a_s1, spec.latency);
  t.add_duplex_link(p.s0, p.b, spec.to_b, spec.latency);
  t.add_duplex_link(p.s1, p.b, spec.to_b, spec.latency);
  return p;
}

// The smallest ECMP label whose route from src to dst starts with link `first`.
inline std::uint64_t label_through(const Topology& t, NodeId src, NodeId dst, LinkId first) {
  Router router(t);
  std::uint64_t label = 0;
  while (router.route(src, dst, label)->links[0] != first) ++label;
  return label;
}

// Every delivery, by transfer id.
struct Recorder {
  std::map<TransferId, TransferResult> results;
  DeliveryCallback callback() {
    return [this](const TransferResult& r) { results[r.id] = r; };
  }
  Time finished(TransferId id) const { return results.at(id).finished; }
  double seconds(TransferId id) const { return finished(id).seconds(); }
};

}  // namespace mlsim::test
