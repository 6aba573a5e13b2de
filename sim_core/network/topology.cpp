#include "sim_core/network/topology.hpp"

#include "sim_core/base/error.hpp"

namespace mlsim {

NodeId Topology::add_node(std::string name, NodeKind kind) {
  if (by_name_.count(name)) throw InputError("topology", "duplicate node name \"" + name + "\"");
  const auto id = static_cast<NodeId>(nodes_.size());
  by_name_.emplace(name, id);
  nodes_.push_back(Node{std::move(name), kind});
  out_.emplace_back();
  if (kind == NodeKind::kHost) hosts_.push_back(id);
  return id;
}

LinkId Topology::add_link(NodeId src, NodeId dst, Bandwidth bw, Time latency) {
  MLSIM_CHECK(src < nodes_.size() && dst < nodes_.size(), "link endpoint out of range");
  const auto id = static_cast<LinkId>(links_.size());
  links_.push_back(Link{src, dst, bw, latency});
  out_[src].push_back(id);
  return id;
}

LinkId Topology::add_duplex_link(NodeId a, NodeId b, Bandwidth bw, Time latency) {
  const LinkId fwd = add_link(a, b, bw, latency);
  add_link(b, a, bw, latency);
  return fwd;
}

std::optional<NodeId> Topology::find(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

}  // namespace mlsim
