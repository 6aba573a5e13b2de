#pragma once
// The physical topology: hosts, switches and directed links. Built once per run by a builder
// (topology_builders.hpp) and handed to whichever network backend runs, so every backend sees the
// same graph and the same routes.
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim_core/base/node_id.hpp"
#include "sim_core/base/time.hpp"
#include "sim_core/base/units.hpp"

namespace mlsim {

using LinkId = std::uint32_t;

enum class NodeKind { kHost, kSwitch };

struct Node {
  std::string name;
  NodeKind kind = NodeKind::kHost;
};

// One direction of a cable. A duplex cable is two links with consecutive ids (a->b, then b->a).
struct Link {
  NodeId src = 0;
  NodeId dst = 0;
  Bandwidth bandwidth;
  Time latency;
};

class Topology {
 public:
  NodeId add_node(std::string name, NodeKind kind);
  // Adds a->b and b->a; returns the id of a->b (b->a is the next id).
  LinkId add_duplex_link(NodeId a, NodeId b, Bandwidth bw, Time latency);
  LinkId add_link(NodeId src, NodeId dst, Bandwidth bw, Time latency);

  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Link>& links() const { return links_; }
  const Node& node(NodeId n) const { return nodes_.at(n); }
  const Link& link(LinkId l) const { return links_.at(l); }
  // Host ids in creation order: collectives and models address "host i" through this list.
  const std::vector<NodeId>& hosts() const { return hosts_; }
  std::optional<NodeId> find(const std::string& name) const;
  // Outgoing links of a node.
  const std::vector<LinkId>& out_links(NodeId n) const { return out_.at(n); }

 private:
  std::vector<Node> nodes_;
  std::vector<Link> links_;
  std::vector<NodeId> hosts_;
  std::vector<std::vector<LinkId>> out_;
  std::unordered_map<std::string, NodeId> by_name_;
};

}  // namespace mlsim
