#pragma once
// Shortest-path routing with ECMP, shared by every network backend (analytic, flow, simgrid,
// ns3), so that all of them move bytes over the same links.
//
// Routes are shortest by hop count over the links that are up. Where several next hops are
// equally short, one is picked by hashing (flow_label, src, dst, current node): the same label
// always takes the same path, different labels spread over the equal-cost paths, and nothing
// depends on the order of earlier calls.
//
// Cost: routes are computed lazily, per destination. The first route to a destination runs one
// breadth-first search (Boost.Graph) over the reversed graph, giving every node's distance to it;
// a route is then a walk down the distances. Distance tables are cached under a memory budget
// (oldest evicted first), and routes that have a single shortest path (no ECMP choice on the way)
// are cached per (src, dst), so steady traffic between the same pairs costs one hash lookup.
// Nothing is O(N^2) up front: a 4096-host ring or a 1024-host fat-tree costs only what it uses.
// Failing or restoring a link clears the caches.
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "sim_core/base/time.hpp"
#include "sim_core/network/topology.hpp"

namespace mlsim {

// A route: its links in order and the sum of their latencies.
struct Path {
  std::span<const LinkId> links;
  Time latency;
};

class Router {
 public:
  // `topology` must outlive the router. All links start up.
  explicit Router(const Topology& topology);
  ~Router();
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // The route from src to dst (no links when src == dst); nullopt when dst cannot be reached
  // over links that are up. The links are valid until the next non-const call on this router:
  // copy them if you keep them.
  std::optional<Path> route(NodeId src, NodeId dst, std::uint64_t flow_label);

  // Sum of the links' current latencies.
  Time latency(std::span<const LinkId> path) const;

  void set_link_up(LinkId link, bool up);
  bool link_up(LinkId link) const { return up_[link] != 0; }
  // Routes found afterwards carry the new latency (routes stay shortest by hop count).
  void set_link_latency(LinkId link, Time latency);
  // Changes whenever a link goes down or up (routes may then differ).
  std::uint64_t version() const { return version_; }

  const Topology& topology() const { return topology_; }

  // Tuning and introspection, for tests: distance tables kept at most (>= 1), and how many
  // breadth-first searches ran so far.
  void set_distance_cache_limit(std::size_t tables);
  std::uint64_t searches() const { return searches_; }

 private:
  struct Graph;  // the reversed graph in Boost.Graph's compressed sparse row form
  // Open-addressing table of single-path routes: key (src << 32 | dst) + 1, 0 = empty.
  struct CachedPath {
    std::uint64_t key = 0;
    std::uint32_t offset = 0, length = 0;
    Time latency;
  };
  const CachedPath* find_path(std::uint64_t pair);
  void insert_path(const CachedPath& p);

  const std::vector<std::uint32_t>& distances_to(NodeId dst);
  // Appends to scratch_ the links from src down the distances to dst, choosing among equal next
  // hops by the flow's hash; clears single_path if there was a choice.
  void walk_down(const std::vector<std::uint32_t>& dist, NodeId src, NodeId dst,
                 std::uint64_t flow_label, bool& single_path);
  void clear_caches();

  const Topology& topology_;
  std::unique_ptr<Graph> graph_;
  std::vector<std::uint8_t> up_;
  std::vector<Time> latency_;
  std::uint64_t version_ = 0;
  std::uint64_t searches_ = 0;

  // Distance tables: table_of_[dst] indexes tables_ (or kNone); eviction in insertion order.
  static constexpr std::uint32_t kNone = ~0u;
  std::vector<std::uint32_t> table_of_;
  std::vector<std::vector<std::uint32_t>> tables_;
  std::vector<NodeId> table_owner_;
  std::deque<std::uint32_t> table_age_;
  std::size_t dist_limit_;

  // Single-path routes, their links stored back to back in path_links_.
  std::vector<CachedPath> paths_;
  std::size_t path_count_ = 0;
  // The last single-path route looked up from each source: collectives send to the same peer
  // again and again, and this answers without hashing.
  std::vector<CachedPath> last_from_;
  std::vector<LinkId> path_links_;
  std::vector<LinkId> scratch_;
};

}  // namespace mlsim
