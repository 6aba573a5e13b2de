#pragma once
// The cluster's nodes: each has one GPU type and a number of GPUs, and is up or down. Keeps the
// free GPUs per node and per type, and places jobs: a job uses one GPU type, on the fewest nodes
// (best fit on one node when it fits one; otherwise the nodes with the most free GPUs first).
#include <cstdint>
#include <string>
#include <vector>

#include "models/cluster/job.hpp"

namespace mlsim::cluster {

struct GpuType {
  std::string name;
  // Runtime multiplier relative to the trace's reference GPU (reference peak / this peak):
  // 0.5 = twice as fast.
  double time_factor = 1.0;
};

struct NodeGroup {
  int type = 0;  // index into the types
  int nodes = 1;
  int gpus_per_node = 8;
};

// GPUs of one job on one node.
struct Slice {
  int node = 0;
  int gpus = 0;
};

struct Placement {
  int type = -1;  // -1: does not fit
  std::vector<Slice> slices;
  bool ok() const { return type >= 0; }
};

class NodePool {
 public:
  NodePool(std::vector<GpuType> types, const std::vector<NodeGroup>& groups);

  const std::vector<GpuType>& types() const { return types_; }
  int node_count() const { return static_cast<int>(nodes_.size()); }
  int node_type(int node) const { return nodes_[static_cast<std::size_t>(node)].type; }
  int node_gpus(int node) const { return nodes_[static_cast<std::size_t>(node)].gpus; }
  int node_free(int node) const { return nodes_[static_cast<std::size_t>(node)].free; }
  bool node_up(int node) const { return nodes_[static_cast<std::size_t>(node)].up; }

  int total_gpus() const { return total_; }
  int total_gpus_of(int type) const { return type_total_[static_cast<std::size_t>(type)]; }
  int free_gpus_of(int type) const { return type_free_[static_cast<std::size_t>(type)]; }
  int allocated_gpus() const { return allocated_; }
  int up_gpus() const { return up_; }
  // Mask with every type's bit set.
  TypeMask all_types() const;

  // Where `gpus` GPUs of type `type` would go now (up nodes only); !ok() when they do not fit.
  // With `per_node` > 0 (a multiple of which `gpus` is), every node of the placement gives
  // exactly `per_node` GPUs (one whole tensor-parallel group per host): only nodes with that many
  // free count, each once, by the same rules (best fit when one node is enough, else the
  // emptiest first, rack-local when asked).
  Placement place_on_type(int gpus, int type, int per_node = 0) const;
  // Among the accepted types that fit now, the one where the job runs fastest (lowest
  // time_factor; ties: lower index).
  Placement place(int gpus, TypeMask accepted, int per_node = 0) const;
  // GPUs of type `type` a job taking `per_node` from each node could ever get (every node up
  // and free); total_gpus_of(type) for per_node 0.
  int capacity_of(int type, int per_node) const;
  // Per node: its free GPUs if it is up, else 0 (what place() may use now).
  std::vector<int> free_per_node() const;
  // Whether `gpus` GPUs of an accepted type would fit on nodes with `free[n]` free GPUs (one
  // entry per node; down nodes' entries must be 0) by the rules of place(): with per_node 0 any
  // split of the type's free GPUs, else `per_node` from each of distinct nodes with that many.
  // place(gpus, accepted, per_node).ok() == fits(free_per_node(), ...) (NodePool tests); EASY's
  // reservations use it on the GPUs free at a future time (cluster_sim.cpp).
  bool fits(const std::vector<int>& free, int gpus, TypeMask accepted, int per_node) const;
  // Takes the GPUs of placement `p` out of `free` (as allocate() does for the pool).
  static void take_out(std::vector<int>& free, const Placement& p);

  // The job spread over exactly `hosts` nodes of type `type` with `free[n]` free GPUs (one entry
  // per node, down nodes' 0; any split, as per_node 0): the `hosts` nodes with the most free
  // GPUs (ties: lower index), within one rack when racks are set and one rack's such nodes hold
  // the job (the rack with the fewest free GPUs that does, as place_on_type), else across racks
  // the emptiest racks first; the GPUs split among them as evenly as their free counts allow
  // (each gets ceil(left / nodes left), the fullest nodes first, capped at what they have free).
  // Slices in that node order. !ok() when fewer than `hosts` nodes have a free GPU, `hosts`
  // exceeds `gpus`, or the chosen nodes' free GPUs fall short. The cluster uses it when the
  // runner says the job cannot run on the hosts place() chose (a pipeline whose stages need
  // more hosts to fit their GPUs' memory, cluster_sim.hpp).
  Placement spread(const std::vector<int>& free, int gpus, int type, int hosts) const;
  // The same on the GPUs free now (free_per_node()).
  Placement place_spread(int gpus, int type, int hosts) const {
    return spread(free_per_node(), gpus, type, hosts);
  }
  // Per node: all its GPUs, up or down (a placement on the empty cluster).
  std::vector<int> gpus_per_node() const;

  // Rack-local placement: `racks[i]` is node i's rack (the switch its host hangs off). A job that
  // fits no single node then goes into one rack when one has room: the rack with the fewest free
  // GPUs that is still large enough (best fit), its emptiest nodes first; otherwise it spans
  // racks, the emptiest racks first. Empty (the default): racks are ignored.
  void set_racks(std::vector<int> racks);

  void allocate(const Placement& p);
  void release(const Placement& p);
  // A node going down keeps its allocations' bookkeeping: the caller releases the jobs on it.
  void set_up(int node, bool up);

 private:
  struct Node {
    int type = 0;
    int gpus = 0;
    int free = 0;
    bool up = true;
  };
  // What node `n` can give a job taking `per_node` from each node (0: all it has free).
  int usable(int n, int per_node) const;
  // Takes the nodes of `order` in turn until `gpus` are placed; false when they run out (only
  // with per_node > 0: otherwise the free counts guarantee a fit).
  bool take(const std::vector<int>& order, int gpus, int per_node, Placement& p) const;

  std::vector<GpuType> types_;
  std::vector<Node> nodes_;
  std::vector<int> racks_;                   // per node; empty: no rack-local placement
  std::vector<int> type_total_, type_free_;  // free counts up nodes only
  int total_ = 0, allocated_ = 0, up_ = 0;
};

}  // namespace mlsim::cluster
