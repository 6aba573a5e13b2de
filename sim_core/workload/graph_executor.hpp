#pragma once
// Runs an execution graph (execution_graph.hpp) on the platform: each rank on the host that
// holds its GPU (topology order, topology.hardware's gpus_per_host per host; or, with
// ExecutorOptions::hosts, the hosts a scheduler gave the graph, in that order, each with the
// GPUs it gave), its kernels on
// that host's GPU through Compute (one kernel at a time per rank: a GPU's compute stream, in the
// order they became ready), its collectives and messages through sim_core/collectives.
//
// How communication is timed (ExecutorOptions::mode):
//  - kNetwork: a collective or message between ranks on different hosts is a
//    collectives::Collective over those hosts, its bytes (times the copies a wide rank stands
//    for) through the scenario's network backend, so contention and link changes apply;
//  - kClosedForm: its time is collectives::collective_cost (launch, per-step latency, protocol
//    by size, bytes over the narrowest route between consecutive hosts) with no traffic at all,
//    as ASTRA-sim's analytical network mode. The route's bandwidth is split evenly among the
//    GPUs of the host [assumed: every GPU of a host communicates across its host link at once,
//    which is what data- and pipeline-parallel steps do when all tensor-parallel ranks run in
//    lock-step; a DGX gives each GPU its own NIC].
// In both modes a group or message whose ranks are all on one host takes the closed form over
// the host's intra_node link (every GPU has its own NVSwitch port: nothing shares it), and a
// group with several members on one host and others elsewhere takes the closed form over the
// inter-host share (in kNetwork mode such a group is an InputError at construction: the GPUs of
// a host are not network endpoints).
//
// Memory: a rank asks its source for more nodes when fewer than `low_water` of its nodes are
// unfinished, and forgets a node once it and every node before it have finished. What a rank
// has been given is always a prefix of its program, so a program that completes when every rank
// runs its nodes one at a time in the order emitted also completes here; one that needs later
// nodes to start first (a send and a receive posted together) must emit them in one piece.
// A graph that cannot finish stops with the ranks left unfinished (stalled()), never hangs.
//
// Beside other work on one engine (a cluster job, models/cluster): set_on_done says when the
// last rank has finished, set_on_failed when a transfer through the network found no route, and
// last_progress when a node last finished (a watchdog's clock). Destroying the executor cancels
// its kernels, collectives and events in flight.
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "sim_core/collectives/collective.hpp"
#include "sim_core/collectives/inter_host.hpp"
#include "sim_core/collectives/intra_host.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/hardware/compute.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "sim_core/network/network.hpp"
#include "sim_core/workload/execution_graph.hpp"

namespace mlsim::workload {

enum class CommunicationMode { kNetwork, kClosedForm };

// GPUs of one host that a graph may use.
struct HostGpus {
  NodeId host = 0;
  int gpus = 1;
};

struct ExecutorOptions {
  CommunicationMode mode = CommunicationMode::kClosedForm;
  // Where the graph's GPUs are: GPU g on the entry whose range of GPUs holds it, entries in
  // order. Empty (the default): every topology host in topology order with the GPUs
  // topology.hardware gives it.
  std::vector<HostGpus> hosts;
  collectives::CostModel costs;  // NCCL-like launch, per-step latency, protocols
  std::size_t low_water = 4;     // a rank pulls more nodes below this many unfinished ones
};

// What a rank did: its kernels' time, and its idle time charged to phases (phase 0, the rank's
// own compute, never collects idle time). compute_s + sum(exposed_s) = finished.
struct RankReport {
  double compute_s = 0;
  std::vector<double> exposed_s;  // per phase
  Time finished;
  bool done = false;
};

struct ExecutorCounts {
  std::uint64_t nodes = 0, kernels = 0, collectives = 0, messages = 0;
  std::uint64_t network_collectives = 0;  // of the collectives and messages, through the network
};

class GraphExecutor {
 public:
  // Every reference must outlive the executor. Places the ranks on hosts and checks the groups
  // (InputError at `where` when the graph needs more GPUs than the topology declares, or a group
  // cannot run in the chosen mode).
  GraphExecutor(Engine& engine, Network& network, Compute& compute, const LinkConditions& links,
                GraphSource& source, ExecutorOptions options, const std::string& where);
  ~GraphExecutor();
  GraphExecutor(const GraphExecutor&) = delete;
  GraphExecutor& operator=(const GraphExecutor&) = delete;

  void start();
  bool done() const { return finished_ranks_ == ranks_.size(); }
  double progress() const;
  const std::vector<RankReport>& reports() const { return reports_; }
  const ExecutorCounts& counts() const { return counts_; }
  // Called once, from inside the executor's own call chain, when the last rank finishes (from
  // start() for a graph with nothing to do).
  void set_on_done(std::function<void()> f) { on_done_ = std::move(f); }
  // Called from inside a transfer's delivery when a collective or message through the network
  // finds no route (it would never end): the caller ends the run from a later event. Unset,
  // such a collective never ends and the graph stalls.
  void set_on_failed(std::function<void()> f) { on_failed_ = std::move(f); }
  // When a node last finished (or start()).
  Time last_progress() const { return last_progress_; }
  // Payload the network has delivered for the graph's collectives and messages so far (kNetwork
  // mode; those in flight count what they delivered), e.g. to check a run's network totals.
  std::int64_t network_bytes_delivered() const;
  NodeId host_of(RankId r) const { return ranks_.at(static_cast<std::size_t>(r)).host; }
  // For a stalled run: each unfinished rank with the kind of its oldest unfinished node.
  std::vector<std::string> stalled() const;

 private:
  struct NodeState {
    Node node;
    std::uint64_t seq = 0;  // collective: k-th on its group; send/recv: k-th on its channel
    std::uint32_t waiting = 0;
    std::uint8_t ready_phase = 0;  // phase of the dependency that finished last
    bool done = false;
    SmallVector<NodeIndex, 2> dependents;
  };
  struct Rank {
    NodeId host;
    int width = 1;
    int host_gpus = 1;
    std::size_t gpu_class = 0;  // index into gpu_classes_ (kernel price cache)
    std::deque<NodeState> window;
    NodeIndex base = 0;  // index of window.front()
    std::size_t unfinished = 0;
    bool source_done = false;
    bool computing = false;
    std::deque<NodeIndex> compute_queue;
    Time compute_started, last_compute_end;
    ComputeHandle kernel;         // the kernel in progress, cancelled with the executor
    std::uint8_t last_phase = 0;  // phase of the node that finished last
    std::vector<std::pair<GroupId, int>> positions;  // (group, member position)
  };
  struct GroupState {
    bool one_host = true;
    bool distinct_hosts = true;
    std::vector<NodeId> hosts;  // of the members, in order
    std::uint64_t label = 0;    // every collective's ECMP label (flow_labels.hpp)
    std::vector<std::uint64_t> next_seq;
    struct Pending {
      int arrived = 0;
      collectives::Operation operation;
      Bytes bytes;
      std::vector<NodeIndex> nodes;  // per member position
    };
    std::map<std::uint64_t, Pending> pending;
  };
  struct Channel {
    std::uint64_t next_send = 0, next_recv = 0;
    std::map<std::uint64_t, NodeIndex> sends, recvs;  // reached, not yet matched
  };
  struct NodeRef {
    RankId rank;
    NodeIndex index;
  };
  // One collective or message in flight, and the nodes it ends (slots are reused, so their
  // node lists keep their capacity: launching allocates nothing in the steady state).
  struct Active {
    std::unique_ptr<collectives::Collective> collective;
    std::vector<NodeRef> nodes;
    EventHandle event;  // its end, while scheduled
  };
  NodeState& at(RankId r, NodeIndex i);
  void pull(RankId r);
  void admit(RankId r, Node node);
  void ready(RankId r, NodeIndex i);
  void start_kernel(RankId r, NodeIndex i);
  void kernel_done(RankId r, NodeIndex i);
  void complete(RankId r, NodeIndex i);
  void arrive(RankId r, NodeIndex i);
  void match(RankId r, NodeIndex i);
  // `label`: the operation's ECMP flow label (flow_labels.hpp), used when it crosses the network.
  void launch(const Node& op, std::span<const RankId> ranks, int gpus, int copies,
              std::span<const NodeRef> nodes, std::uint64_t label);
  void finish_active(std::uint32_t slot);
  std::uint32_t new_active();
  double kernel_seconds(const Rank& rank, KernelId k);

  Engine& engine_;
  Network& network_;
  Compute& compute_;
  const LinkConditions& links_;
  GraphSource& source_;
  ExecutorOptions options_;
  // One-host collectives priced once per distinct size (after options_, whose costs it reads).
  collectives::IntraHostPriceCache intra_prices_{options_.costs};
  // Collectives and messages across hosts in closed form (kClosedForm, or a group spanning hosts
  // with several GPUs on one).
  collectives::InterHostClosedForm closed_form_{links_, options_.costs};
  std::vector<Rank> ranks_;
  std::vector<RankReport> reports_;
  std::vector<GroupState> groups_;
  absl::flat_hash_map<std::uint64_t, Channel> channels_;  // (sender << 32) | receiver
  std::vector<Active> active_;
  std::vector<std::uint32_t> free_active_;
  std::vector<const GpuSpec*> gpu_classes_;
  std::vector<double> kernel_price_;  // kernel x gpu class; < 0 until priced
  std::vector<Node> buffer_;
  std::vector<NodeRef> launching_, finishing_;  // scratch (finish_active never nests)
  std::vector<NodeId> hosts_;                   // scratch
  std::size_t finished_ranks_ = 0;
  ExecutorCounts counts_;
  std::function<void()> on_done_, on_failed_;
  std::int64_t network_delivered_ = 0;  // by the collectives that have ended
  Time last_progress_;
};

}  // namespace mlsim::workload
