#pragma once
// The links as they are now: each link's bandwidth, latency and state, kept beside the Network
// that applies them. The Network interface applies changes but does not report them back; code
// that changes links at run time (the `events` section through the runner, a test) changes them
// here, which applies them to the network and tells the listeners, and models that plan with the
// links (rat's widest tree, pipeline's AutoPipe) read them here.
//
// A link carries traffic when it is up on its own and both its ends are up (a failed node takes
// its links down: node_health.hpp).
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "sim_core/network/network.hpp"
#include "sim_core/network/topology.hpp"

namespace mlsim {

class Router;

class LinkConditions {
 public:
  // All links up at their topology bandwidth and latency. Both must outlive this.
  LinkConditions(const Topology& topology, Network& network);
  ~LinkConditions();
  LinkConditions(const LinkConditions&) = delete;
  LinkConditions& operator=(const LinkConditions&) = delete;

  const Topology& topology() const { return topology_; }
  Bandwidth bandwidth(LinkId link) const { return bandwidth_.at(link); }
  Time latency(LinkId link) const { return latency_.at(link); }
  // Carries traffic: up on its own and both ends up.
  bool up(LinkId link) const { return effective_up(link); }
  bool node_up(NodeId node) const { return node_up_.at(node) != 0; }
  // Bandwidth a transfer can get on the link: 0 when it is down.
  Bandwidth usable(LinkId link) const { return up(link) ? bandwidth(link) : Bandwidth{0}; }
  // Changes whenever a link changes, so planners know when to look again.
  std::uint64_t version() const { return version_; }

  // One Router over the topology for the whole run, its links up and down as here (and their
  // latencies), built on first use: code that routes over the links as they are now (a ring's
  // bottleneck, a closed-form collective's route) asks it instead of building a Router per call,
  // so its breadth-first searches and cached routes are shared. Routes do not depend on the
  // order of earlier calls (routing.hpp), so sharing it changes no route. Valid while this lives.
  Router& router() const;

  // Each applies the change to every link given, on the network, now; then the listeners hear
  // once of the links whose state changed (a multi-link event is seen whole, never half done).
  void set_bandwidth(std::span<const LinkId> links, Bandwidth bw);  // bw > 0 (fail instead)
  void set_latency(std::span<const LinkId> links, Time latency);    // >= 0
  void set_link_up(std::span<const LinkId> links, bool up);
  void set_bandwidth(LinkId link, Bandwidth bw) { set_bandwidth(std::span(&link, 1), bw); }
  void set_latency(LinkId link, Time latency) { set_latency(std::span(&link, 1), latency); }
  void set_link_up(LinkId link, bool up) { set_link_up(std::span(&link, 1), up); }
  // Every link into or out of the node follows the node (and its own state).
  void set_node_up(NodeId node, bool up);

  using Listener = std::function<void(std::span<const LinkId> changed)>;
  void on_change(Listener listener) { listeners_.push_back(std::move(listener)); }

 private:
  bool effective_up(LinkId l) const;
  // Applies the up/down state that `link_up_` and `node_up_` now give; true if it changed.
  bool apply_up(LinkId l, bool was_up);
  void changed(std::span<const LinkId> links);

  const Topology& topology_;
  Network& network_;
  std::vector<Bandwidth> bandwidth_;
  std::vector<Time> latency_;
  std::vector<std::uint8_t> link_up_, node_up_;
  std::vector<Listener> listeners_;
  std::uint64_t version_ = 0;
  mutable std::unique_ptr<Router> router_;  // a cache of routes: built by router()
};

// The links from a to b and from b to a; empty when the nodes are not neighbours.
std::vector<LinkId> links_between(const Topology& topology, NodeId a, NodeId b);

}  // namespace mlsim
