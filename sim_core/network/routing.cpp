#include "sim_core/network/routing.hpp"

#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <utility>

#include "sim_core/base/error.hpp"
#include "sim_core/engine/random.hpp"

namespace mlsim {
namespace {

// Distance tables kept at most, in entries (4 bytes each): 16 MB whatever the topology size.
constexpr std::size_t kDistanceBudgetEntries = std::size_t{4} << 20;
// Cached single-path routes, in links; past it the route cache starts over.
constexpr std::size_t kPathBudgetLinks = std::size_t{16} << 20;
constexpr std::uint32_t kUnreached = ~0u;

struct EdgeLink {
  LinkId link = 0;
};
using Csr = boost::compressed_sparse_row_graph<boost::directedS, boost::no_property, EdgeLink>;

// Keeps only the edges whose link is up.
struct LinkIsUp {
  const Csr* graph = nullptr;
  const std::vector<std::uint8_t>* up = nullptr;
  bool operator()(const Csr::edge_descriptor& e) const { return (*up)[(*graph)[e].link] != 0; }
};

struct RecordDistance : boost::default_bfs_visitor {
  std::uint32_t* dist;
  explicit RecordDistance(std::uint32_t* d) : dist(d) {}
  template <typename Edge, typename Graph>
  void tree_edge(Edge e, const Graph& g) const {
    dist[boost::target(e, g)] = dist[boost::source(e, g)] + 1;
  }
};

}  // namespace

struct Router::Graph {
  Csr reversed;  // an edge v->u for every link u->v: a search from dst reaches every source
  std::vector<boost::default_color_type> colors;
};

Router::Router(const Topology& topology)
    : topology_(topology),
      graph_(std::make_unique<Graph>()),
      up_(topology.links().size(), 1),
      latency_(topology.links().size()),
      table_of_(topology.nodes().size(), kNone),
      last_from_(topology.nodes().size()) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> edges;
  std::vector<EdgeLink> props;
  edges.reserve(topology.links().size());
  props.reserve(topology.links().size());
  for (LinkId l = 0; l < topology.links().size(); ++l) {
    const Link& link = topology.links()[l];
    latency_[l] = link.latency;
    edges.emplace_back(link.dst, link.src);
    props.push_back(EdgeLink{l});
  }
  graph_->reversed = Csr(boost::edges_are_unsorted_multi_pass, edges.begin(), edges.end(),
                         props.begin(), topology.nodes().size());
  graph_->colors.resize(topology.nodes().size());
  const std::size_t n = std::max<std::size_t>(1, topology.nodes().size());
  dist_limit_ = std::max<std::size_t>(1, kDistanceBudgetEntries / n);
}

Router::~Router() = default;

const std::vector<std::uint32_t>& Router::distances_to(NodeId dst) {
  if (table_of_[dst] != kNone) return tables_[table_of_[dst]];
  std::uint32_t slot;
  if (tables_.size() < dist_limit_) {
    slot = static_cast<std::uint32_t>(tables_.size());
    tables_.emplace_back();
    table_owner_.push_back(dst);
  } else {
    slot = table_age_.front();
    table_age_.pop_front();
    table_of_[table_owner_[slot]] = kNone;
    table_owner_[slot] = dst;
  }
  table_age_.push_back(slot);
  table_of_[dst] = slot;

  auto& dist = tables_[slot];
  dist.assign(topology_.nodes().size(), kUnreached);
  dist[dst] = 0;
  const LinkIsUp filter{&graph_->reversed, &up_};
  boost::filtered_graph<Csr, LinkIsUp> g(graph_->reversed, filter);
  auto colors =
      boost::make_iterator_property_map(graph_->colors.begin(), boost::get(boost::vertex_index, g));
  boost::breadth_first_search(g, static_cast<Csr::vertex_descriptor>(dst),
                              boost::visitor(RecordDistance{dist.data()}).color_map(colors));
  ++searches_;
  return dist;
}

const Router::CachedPath* Router::find_path(std::uint64_t pair) {
  CachedPath& last = last_from_[pair >> 32];
  if (last.key == pair + 1) return &last;
  if (paths_.empty()) return nullptr;
  const std::size_t mask = paths_.size() - 1;
  for (std::size_t i = mix64(pair) & mask;; i = (i + 1) & mask) {
    const CachedPath& p = paths_[i];
    if (p.key == pair + 1) {
      last = p;
      return &p;
    }
    if (p.key == 0) return nullptr;
  }
}

void Router::insert_path(const CachedPath& path) {
  if (2 * (path_count_ + 1) > paths_.size()) {  // keep the table at most half full
    std::vector<CachedPath> old(std::max<std::size_t>(64, 2 * paths_.size()));
    old.swap(paths_);
    path_count_ = 0;
    for (const CachedPath& p : old)
      if (p.key != 0) insert_path(p);
  }
  const std::size_t mask = paths_.size() - 1;
  std::size_t i = mix64(path.key - 1) & mask;
  while (paths_[i].key != 0) i = (i + 1) & mask;
  paths_[i] = path;
  ++path_count_;
}

void Router::walk_down(const std::vector<std::uint32_t>& dist, NodeId src, NodeId dst,
                       std::uint64_t flow_label, bool& single_path) {
  const std::uint64_t flow_hash = mix64(mix64(flow_label) ^ ((std::uint64_t{src} << 32) | dst));
  for (NodeId u = src; u != dst;) {
    // Equal-cost next hops are the up links leading one hop closer to dst.
    const auto& out = topology_.out_links(u);
    std::uint32_t candidates = 0;
    for (LinkId l : out)
      if (up_[l] && dist[topology_.links()[l].dst] + 1 == dist[u]) ++candidates;
    MLSIM_CHECK(candidates > 0, "distance table inconsistent with the topology");
    if (candidates > 1) single_path = false;
    std::uint64_t pick = candidates > 1 ? mix64(flow_hash ^ u) % candidates : 0;
    for (LinkId l : out) {
      if (!up_[l] || dist[topology_.links()[l].dst] + 1 != dist[u]) continue;
      if (pick-- == 0) {
        scratch_.push_back(l);
        u = topology_.links()[l].dst;
        break;
      }
    }
  }
}

std::optional<Path> Router::route(NodeId src, NodeId dst, std::uint64_t flow_label) {
  MLSIM_CHECK(src < topology_.nodes().size() && dst < topology_.nodes().size(),
              "route endpoint out of range");
  if (src == dst) return Path{{}, Time::zero()};
  const std::uint64_t pair = (std::uint64_t{src} << 32) | dst;
  if (const CachedPath* p = find_path(pair))
    return Path{{path_links_.data() + p->offset, p->length}, p->latency};

  scratch_.clear();
  bool single_path = true;
  // A neighbour over a single up link is its own shortest path: no search needed.
  for (LinkId l : topology_.out_links(src))
    if (up_[l] && topology_.links()[l].dst == dst) scratch_.push_back(l);
  if (scratch_.size() > 1) single_path = false;
  if (scratch_.empty()) {
    const auto& dist = distances_to(dst);
    if (dist[src] == kUnreached) return std::nullopt;
    walk_down(dist, src, dst, flow_label, single_path);
  } else if (!single_path) {  // parallel links: ECMP among them
    const LinkId pick = scratch_[mix64(mix64(mix64(flow_label) ^ pair) ^ src) % scratch_.size()];
    scratch_.assign(1, pick);
  }
  const Time lat = latency(scratch_);
  if (!single_path) return Path{scratch_, lat};

  if (path_links_.size() + scratch_.size() > kPathBudgetLinks) {
    paths_.clear();
    path_count_ = 0;
    path_links_.clear();
    std::fill(last_from_.begin(), last_from_.end(), CachedPath{});
  }
  const CachedPath cached{pair + 1, static_cast<std::uint32_t>(path_links_.size()),
                          static_cast<std::uint32_t>(scratch_.size()), lat};
  path_links_.insert(path_links_.end(), scratch_.begin(), scratch_.end());
  insert_path(cached);
  last_from_[src] = cached;
  return Path{{path_links_.data() + cached.offset, cached.length}, lat};
}

Time Router::latency(std::span<const LinkId> path) const {
  Time total = Time::zero();
  for (LinkId l : path) total += latency_[l];
  return total;
}

void Router::set_link_up(LinkId link, bool up) {
  MLSIM_CHECK(link < up_.size(), "link id out of range");
  if ((up_[link] != 0) == up) return;
  up_[link] = up ? 1 : 0;
  ++version_;
  clear_caches();
}

void Router::set_link_latency(LinkId link, Time latency) {
  MLSIM_CHECK(link < latency_.size(), "link id out of range");
  if (latency_[link] == latency) return;
  latency_[link] = latency;
  clear_caches();  // cached routes carry their latency
}

void Router::set_distance_cache_limit(std::size_t tables) {
  dist_limit_ = std::max<std::size_t>(1, tables);
  clear_caches();
}

void Router::clear_caches() {
  for (NodeId owner : table_owner_) table_of_[owner] = kNone;
  tables_.clear();
  table_owner_.clear();
  table_age_.clear();
  paths_.clear();
  path_count_ = 0;
  path_links_.clear();
  std::fill(last_from_.begin(), last_from_.end(), CachedPath{});
}

}  // namespace mlsim
