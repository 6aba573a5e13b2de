#include "models/cluster/node_pool.hpp"

#include <algorithm>

#include "sim_core/base/error.hpp"

namespace mlsim::cluster {
namespace {

// Orders `order` across racks: the emptiest racks first (fewest racks; `rack_free` by rack), ties
// by rack index, then each rack's emptiest nodes first (`free_of(node)`).
template <class FreeOf>
void sort_across_racks(std::vector<int>& order, const std::vector<int>& racks,
                       const std::vector<int>& rack_free, FreeOf free_of) {
  auto rack_of = [&](int n) { return racks[static_cast<std::size_t>(n)]; };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const int fa = rack_free[static_cast<std::size_t>(rack_of(a))];
    const int fb = rack_free[static_cast<std::size_t>(rack_of(b))];
    if (fa != fb) return fa > fb;
    if (rack_of(a) != rack_of(b)) return rack_of(a) < rack_of(b);
    return free_of(a) > free_of(b);
  });
}

}  // namespace

NodePool::NodePool(std::vector<GpuType> types, const std::vector<NodeGroup>& groups)
    : types_(std::move(types)), type_total_(types_.size(), 0), type_free_(types_.size(), 0) {
  MLSIM_CHECK(!types_.empty() && types_.size() <= kMaxGpuTypes, "1 to 32 GPU types");
  for (const NodeGroup& g : groups) {
    MLSIM_CHECK(g.type >= 0 && static_cast<std::size_t>(g.type) < types_.size(), "node type");
    for (int n = 0; n < g.nodes; ++n) {
      nodes_.push_back({g.type, g.gpus_per_node, g.gpus_per_node, true});
      type_total_[static_cast<std::size_t>(g.type)] += g.gpus_per_node;
      type_free_[static_cast<std::size_t>(g.type)] += g.gpus_per_node;
      total_ += g.gpus_per_node;
    }
  }
  up_ = total_;
}

TypeMask NodePool::all_types() const {
  return types_.size() == kMaxGpuTypes ? ~TypeMask{0} : (TypeMask{1} << types_.size()) - 1;
}

int NodePool::usable(int n, int per_node) const {
  const int free = nodes_[static_cast<std::size_t>(n)].free;
  if (per_node <= 0) return free;
  return free >= per_node ? per_node : 0;
}

int NodePool::capacity_of(int type, int per_node) const {
  if (per_node <= 0) return total_gpus_of(type);
  int total = 0;
  for (const Node& node : nodes_)
    if (node.type == type && node.gpus >= per_node) total += per_node;
  return total;
}

std::vector<int> NodePool::free_per_node() const {
  std::vector<int> free(nodes_.size(), 0);
  for (std::size_t n = 0; n < nodes_.size(); ++n)
    if (nodes_[n].up) free[n] = nodes_[n].free;
  return free;
}

bool NodePool::fits(const std::vector<int>& free, int gpus, TypeMask accepted, int per_node) const {
  MLSIM_CHECK(free.size() == nodes_.size(), "one free count per node");
  // place_on_type takes every usable node of the type in some order until the job is placed,
  // so it succeeds exactly when the usable GPUs (all free ones with per_node 0, per_node from
  // each node with that many otherwise) reach the job's.
  std::vector<int> usable_of(types_.size(), 0);
  for (std::size_t n = 0; n < nodes_.size(); ++n) {
    const int f = free[n];
    usable_of[static_cast<std::size_t>(nodes_[n].type)] +=
        per_node <= 0 ? f : (f >= per_node ? per_node : 0);
  }
  for (std::size_t t = 0; t < types_.size(); ++t)
    if ((accepted & (TypeMask{1} << t)) && usable_of[t] >= gpus) return true;
  return false;
}

std::vector<int> NodePool::gpus_per_node() const {
  std::vector<int> gpus(nodes_.size(), 0);
  for (std::size_t n = 0; n < nodes_.size(); ++n) gpus[n] = nodes_[n].gpus;
  return gpus;
}

Placement NodePool::spread(const std::vector<int>& free, int gpus, int type, int hosts) const {
  MLSIM_CHECK(free.size() == nodes_.size(), "one free count per node");
  if (hosts < 1 || hosts > gpus) return {};
  auto free_of = [&](int n) { return free[static_cast<std::size_t>(n)]; };
  std::vector<int> order;
  for (int n = 0; n < node_count(); ++n)
    if (nodes_[static_cast<std::size_t>(n)].type == type && free_of(n) > 0) order.push_back(n);
  if (order.size() < static_cast<std::size_t>(hosts)) return {};
  auto emptiest_first = [&](int a, int b) { return free_of(a) > free_of(b); };
  std::stable_sort(order.begin(), order.end(), emptiest_first);
  // The first `hosts` of `nodes` and the GPUs they have free.
  auto first = [&](const std::vector<int>& nodes) {
    std::vector<int> chosen(nodes.begin(), nodes.begin() + hosts);
    int sum = 0;
    for (int n : chosen) sum += free_of(n);
    return std::pair{chosen, sum};
  };
  std::vector<int> chosen;
  if (!racks_.empty()) {
    const auto rack_count =
        static_cast<std::size_t>(*std::max_element(racks_.begin(), racks_.end()) + 1);
    auto rack_of = [&](int n) { return racks_[static_cast<std::size_t>(n)]; };
    std::vector<int> rack_free(rack_count, 0);
    for (int n : order) rack_free[static_cast<std::size_t>(rack_of(n))] += free_of(n);
    int best = -1;
    for (std::size_t r = 0; r < rack_count; ++r) {
      std::vector<int> in_rack;
      for (int n : order)
        if (rack_of(n) == static_cast<int>(r)) in_rack.push_back(n);
      if (in_rack.size() < static_cast<std::size_t>(hosts) || first(in_rack).second < gpus)
        continue;
      if (best < 0 || rack_free[r] < rack_free[static_cast<std::size_t>(best)]) {
        best = static_cast<int>(r);
        chosen = first(in_rack).first;
      }
    }
    if (best < 0) sort_across_racks(order, racks_, rack_free, free_of);
  }
  if (chosen.empty()) {
    auto [nodes, sum] = first(order);
    if (sum < gpus) return {};
    chosen = std::move(nodes);
  }
  // Even split, capped by what each node has: the fullest node first takes its share of what is
  // left, so that a node short of its share leaves the rest to the others.
  std::vector<int> by_free = chosen;
  std::stable_sort(by_free.begin(), by_free.end(),
                   [&](int a, int b) { return free_of(a) < free_of(b); });
  std::vector<int> share(nodes_.size(), 0);
  int left = gpus;
  for (std::size_t i = 0; i < by_free.size(); ++i) {
    const int nodes_left = static_cast<int>(by_free.size() - i);
    const int n = by_free[i];
    share[static_cast<std::size_t>(n)] = std::min(free_of(n), (left + nodes_left - 1) / nodes_left);
    left -= share[static_cast<std::size_t>(n)];
  }
  MLSIM_CHECK(left == 0, "a spread placement short of GPUs its nodes have free");
  Placement p;
  p.type = type;
  for (int n : chosen) p.slices.push_back({n, share[static_cast<std::size_t>(n)]});
  return p;
}

void NodePool::take_out(std::vector<int>& free, const Placement& p) {
  for (const Slice& s : p.slices) free[static_cast<std::size_t>(s.node)] -= s.gpus;
}

Placement NodePool::place_on_type(int gpus, int type, int per_node) const {
  Placement p;
  if (free_gpus_of(type) < gpus) return p;
  p.type = type;
  // Best fit on one node: the fullest node that still has room.
  int best = -1;
  if (per_node <= 0 || gpus <= per_node)
    for (int n = 0; n < node_count(); ++n) {
      const Node& node = nodes_[static_cast<std::size_t>(n)];
      if (!node.up || node.type != type || node.free < gpus) continue;
      if (best < 0 || node.free < nodes_[static_cast<std::size_t>(best)].free) best = n;
    }
  if (best >= 0) {
    p.slices.push_back({best, gpus});
    return p;
  }
  // Several nodes: taking the emptiest first needs the fewest.
  std::vector<int> order;
  for (int n = 0; n < node_count(); ++n) {
    const Node& node = nodes_[static_cast<std::size_t>(n)];
    if (node.up && node.type == type && usable(n, per_node) > 0) order.push_back(n);
  }
  auto emptiest_first = [&](int a, int b) {
    return nodes_[static_cast<std::size_t>(a)].free > nodes_[static_cast<std::size_t>(b)].free;
  };
  if (!racks_.empty()) {
    // Per rack: free GPUs of this type on up nodes.
    std::vector<int> rack_free(
        static_cast<std::size_t>(*std::max_element(racks_.begin(), racks_.end()) + 1), 0);
    for (int n : order)
      rack_free[static_cast<std::size_t>(racks_[static_cast<std::size_t>(n)])] +=
          usable(n, per_node);
    int rack = -1;
    for (std::size_t r = 0; r < rack_free.size(); ++r)
      if (rack_free[r] >= gpus &&
          (rack < 0 || rack_free[r] < rack_free[static_cast<std::size_t>(rack)]))
        rack = static_cast<int>(r);
    auto rack_of = [&](int n) { return racks_[static_cast<std::size_t>(n)]; };
    if (rack >= 0) {
      std::erase_if(order, [&](int n) { return rack_of(n) != rack; });
      std::stable_sort(order.begin(), order.end(), emptiest_first);
    } else {
      sort_across_racks(order, racks_, rack_free,
                        [&](int n) { return nodes_[static_cast<std::size_t>(n)].free; });
    }
  } else {
    std::stable_sort(order.begin(), order.end(), emptiest_first);
  }
  if (!take(order, gpus, per_node, p)) return Placement{};
  return p;
}

bool NodePool::take(const std::vector<int>& order, int gpus, int per_node, Placement& p) const {
  int left = gpus;
  for (int n : order) {
    const int amount = std::min(left, usable(n, per_node));
    p.slices.push_back({n, amount});
    left -= amount;
    if (left == 0) break;
  }
  MLSIM_CHECK(left == 0 || per_node > 0, "free count per type disagrees with the nodes");
  return left == 0;
}

void NodePool::set_racks(std::vector<int> racks) {
  MLSIM_CHECK(racks.empty() || racks.size() == nodes_.size(), "one rack per node");
  MLSIM_CHECK(std::all_of(racks.begin(), racks.end(), [](int r) { return r >= 0; }),
              "rack indices are not negative");
  racks_ = std::move(racks);
}

Placement NodePool::place(int gpus, TypeMask accepted, int per_node) const {
  Placement best;
  for (std::size_t t = 0; t < types_.size(); ++t) {
    if (!(accepted & (TypeMask{1} << t)) || type_free_[t] < gpus) continue;
    if (best.ok() &&
        types_[t].time_factor >= types_[static_cast<std::size_t>(best.type)].time_factor)
      continue;
    Placement p = place_on_type(gpus, static_cast<int>(t), per_node);
    if (p.ok()) best = std::move(p);
  }
  return best;
}

void NodePool::allocate(const Placement& p) {
  MLSIM_CHECK(p.ok(), "allocating a failed placement");
  for (const Slice& s : p.slices) {
    Node& node = nodes_[static_cast<std::size_t>(s.node)];
    MLSIM_CHECK(node.up && node.type == p.type && s.gpus > 0 && s.gpus <= node.free,
                "GPUs over-allocated on node " + std::to_string(s.node));
    node.free -= s.gpus;
    type_free_[static_cast<std::size_t>(node.type)] -= s.gpus;
    allocated_ += s.gpus;
  }
}

void NodePool::release(const Placement& p) {
  for (const Slice& s : p.slices) {
    Node& node = nodes_[static_cast<std::size_t>(s.node)];
    node.free += s.gpus;
    MLSIM_CHECK(node.free <= node.gpus, "GPUs released twice on node " + std::to_string(s.node));
    if (node.up) type_free_[static_cast<std::size_t>(node.type)] += s.gpus;
    allocated_ -= s.gpus;
  }
}

void NodePool::set_up(int node_index, bool up) {
  Node& node = nodes_[static_cast<std::size_t>(node_index)];
  if (node.up == up) return;
  node.up = up;
  const int sign = up ? 1 : -1;
  type_free_[static_cast<std::size_t>(node.type)] += sign * node.free;
  up_ += sign * node.gpus;
}

}  // namespace mlsim::cluster
