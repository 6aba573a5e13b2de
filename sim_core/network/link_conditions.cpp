#include "sim_core/network/link_conditions.hpp"

#include "sim_core/base/error.hpp"
#include "sim_core/network/routing.hpp"

namespace mlsim {

LinkConditions::LinkConditions(const Topology& topology, Network& network)
    : topology_(topology),
      network_(network),
      link_up_(topology.links().size(), 1),
      node_up_(topology.nodes().size(), 1) {
  bandwidth_.reserve(topology.links().size());
  latency_.reserve(topology.links().size());
  for (const Link& l : topology.links()) {
    bandwidth_.push_back(l.bandwidth);
    latency_.push_back(l.latency);
  }
}

LinkConditions::~LinkConditions() = default;

Router& LinkConditions::router() const {
  if (!router_) {
    router_ = std::make_unique<Router>(topology_);
    for (LinkId l = 0; l < topology_.links().size(); ++l) {
      if (!effective_up(l)) router_->set_link_up(l, false);
      if (latency_[l] != topology_.link(l).latency) router_->set_link_latency(l, latency_[l]);
    }
  }
  return *router_;
}

bool LinkConditions::effective_up(LinkId l) const {
  const Link& link = topology_.link(l);
  return link_up_[l] != 0 && node_up_[link.src] != 0 && node_up_[link.dst] != 0;
}

void LinkConditions::changed(std::span<const LinkId> links) {
  if (links.empty()) return;
  ++version_;
  for (const Listener& f : listeners_) f(links);
}

void LinkConditions::set_bandwidth(std::span<const LinkId> links, Bandwidth bw) {
  MLSIM_CHECK(bw.bytes_per_s > 0, "link bandwidth must be positive (fail the link instead)");
  for (LinkId l : links) {
    bandwidth_.at(l) = bw;
    network_.set_link_bandwidth(l, bw);
  }
  changed(links);
}

void LinkConditions::set_latency(std::span<const LinkId> links, Time latency) {
  MLSIM_CHECK(latency >= Time::zero(), "link latency must not be negative");
  for (LinkId l : links) {
    latency_.at(l) = latency;
    network_.set_link_latency(l, latency);
    if (router_) router_->set_link_latency(l, latency);
  }
  changed(links);
}

bool LinkConditions::apply_up(LinkId l, bool was_up) {
  const bool now_up = effective_up(l);
  if (now_up == was_up) return false;
  network_.set_link_up(l, now_up);
  if (router_) router_->set_link_up(l, now_up);
  return true;
}

void LinkConditions::set_link_up(std::span<const LinkId> links, bool up) {
  std::vector<LinkId> flipped;
  for (LinkId l : links) {
    const bool was = effective_up(l);
    link_up_.at(l) = up ? 1 : 0;
    if (apply_up(l, was)) flipped.push_back(l);
  }
  changed(flipped);
}

void LinkConditions::set_node_up(NodeId node, bool up) {
  if (node_up(node) == up) return;
  // Every link into or out of the node (failures are rare: a scan is cheap enough).
  std::vector<LinkId> links;
  for (LinkId l = 0; l < topology_.links().size(); ++l)
    if (topology_.link(l).src == node || topology_.link(l).dst == node) links.push_back(l);
  std::vector<bool> was(links.size());
  for (std::size_t i = 0; i < links.size(); ++i) was[i] = effective_up(links[i]);
  node_up_[node] = up ? 1 : 0;
  std::vector<LinkId> flipped;
  for (std::size_t i = 0; i < links.size(); ++i)
    if (apply_up(links[i], was[i])) flipped.push_back(links[i]);
  changed(flipped);
}

std::vector<LinkId> links_between(const Topology& topology, NodeId a, NodeId b) {
  std::vector<LinkId> out;
  for (LinkId l : topology.out_links(a))
    if (topology.link(l).dst == b) out.push_back(l);
  for (LinkId l : topology.out_links(b))
    if (topology.link(l).dst == a) out.push_back(l);
  return out;
}

}  // namespace mlsim
