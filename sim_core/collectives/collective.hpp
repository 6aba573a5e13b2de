#pragma once
// The collective-communication layer: one collective operation among a list of hosts, moving its
// bytes through any Network backend, with a completion callback. Every model that moves
// gradients, activations or KV blocks between GPUs calls this (docs/collectives.md, "Library").
//
// Operations (S = spec.bytes; n participants, indices into the participant list):
//   all_reduce      every participant contributes S bytes and ends with their sum; by ring, tree,
//                   parameter server (ps) or rat (below).
//   reduce_scatter  every participant contributes S and ends with its reduced S/n share (ring:
//                   the first n-1 steps of the ring all-reduce).
//   all_gather      every participant contributes S/n and ends with all S (ring: the last n-1
//                   steps of the ring all-reduce).
//   broadcast       participant 0 sends S to everyone (tree: the down half of the reduce-broadcast
//                   tree; arity 1 is a chain, NCCL's pipelined ring broadcast).
//   send_recv       participant 0 sends S to participant 1 (exactly two participants).
//   all_to_all      every participant sends S/n to every other one (direct messages, each
//                   participant starting with its successor so that senders do not collide).
//
// Every operation cuts its messages into `chunks` pieces that move independently, so later pieces
// overlap earlier ones (pipelining). Each participant sends at most `window` messages at a time (0
// = no limit); a message's send slot is freed when it is delivered. With window 1, a participant's
// messages leave one after another, as through one NIC queue, which also keeps the analytic backend
// (no sharing) from sending a node's messages in parallel for free.
//
// All-reduce algorithms (each ends with every participant holding the reduced S bytes):
//   ring  S is cut into n segments; 2(n-1) steps (reduce-scatter, then all-gather), in step s
//         participant i sends segment (i - s) mod n to participant i+1 as soon as it received
//         that segment's previous step. With one chunk and window 1 on a ring of links of
//         bandwidth B and latency a: 2(n-1) x (S/(nB) + a) = 2(n-1)/n x S/B + 2(n-1) x a.
//   ps    parameter servers: S is sharded over `servers` servers; every worker pushes each shard
//         to its server, a server sends the reduced shard back (pull) to every worker once all
//         workers' pieces arrived. Servers are the last `servers` participants ("dedicated", the
//         others are workers), the first `servers` workers themselves ("colocated", their own
//         piece needs no transfer), or workers spread evenly over the participant list
//         ("spread": server k is participant k n / servers, one per rack when servers = racks).
//   tree  k-ary tree rooted at participant 0 (children of i: k*i+1 .. k*i+k): every piece is
//         reduced up the tree (a node forwards once all its children's pieces arrived), then
//         broadcast down from the root.
//   nvls  in-switch reduction (NVLink SHARP, nvls.cpp): every participant sends each piece to the
//         switch they all hang off, which sends the sum back to each; needs such a switch
//         (shared_switch in rat_plan.hpp) and the link conditions to find it.
//   rat   Resilient Allreduce Tree (docs/rat.md, rat_plan.hpp): per piece, the hosts of each
//         region (hosts under one switch) send it to the region's aggregator, aggregators reduce
//         it up a tree of regions built from the current link conditions, and the result comes
//         back down the tree and out to every host. Aggregators and the root rotate per piece.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim_core/collectives/costs.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/engine/inline_function.hpp"
#include "sim_core/network/network.hpp"

namespace mlsim::collectives {

enum class Operation { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kSendRecv, kAllToAll };
enum class Algorithm { kRing, kParameterServer, kTree, kRat, kDirect, kNvls };
enum class Placement { kDedicated, kColocated, kSpread };

std::string_view to_string(Operation o);
std::string_view to_string(Algorithm a);
// NCCL's bus-bandwidth factor for an operation among n ranks (nccl-tests, doc/PERFORMANCE.md):
// 2(n-1)/n for all-reduce, (n-1)/n for reduce-scatter, all-gather and all-to-all, 1 otherwise.
double bus_factor(Operation o, int ranks);
// The algorithms an operation can run with (the first is its default).
std::span<const Algorithm> algorithms_for(Operation o);

struct CollectiveSpec {
  Operation operation = Operation::kAllReduce;
  Algorithm algorithm = Algorithm::kRing;
  // all_reduce only: ring or tree (with `arity`), whichever choose_algorithm (costs.hpp) prices
  // lower for this size on the routes between the participants, as NCCL picks by size. The
  // choice is made when the Collective starts (from the links as they are then) and replaces
  // `algorithm`; needs the link conditions. nvls is never chosen: no catalog switch declares
  // in-switch reduction.
  bool algorithm_by_size = false;
  Bytes bytes;       // S, the tensor every participant contributes
  int chunks = 1;    // pieces the tensor is cut into, >= 1
  int channels = 1;  // ring: rings run at once, each over a share of S, laid out by region
  int window = 1;    // messages in flight per participant, 0 = unlimited
  int servers = 1;   // ps
  // ps: shards and pieces are cut at multiples of this many bytes (a server holds whole values:
  // 4 for fp32 gradients); 1 = any byte. bytes must be a multiple of it.
  std::int64_t element_bytes = 1;
  Placement placement = Placement::kDedicated;  // ps
  int arity = 2;                                // tree
  std::uint64_t flow_label = 0;                 // mixed into every transfer's ECMP label
  CostModel costs;                              // launch, per-hop latency, protocols (costs.hpp)
  HostCosts host;                               // per-message overhead, PS aggregation rate
};

struct CollectiveResult {
  Time started, finished;
  bool completed = false;  // false when a transfer failed (the rest then never happens)
  Operation operation = Operation::kAllReduce;
  Algorithm algorithm = Algorithm::kRing;  // the one that ran (algorithm_by_size: the one chosen)
  int ranks = 0;                           // participants holding the tensor (ps: the workers)
  Bytes tensor;                            // S
  Bytes bytes_sent;                        // payload, summed over all transfers started
  Bytes bytes_delivered;                   // payload of the transfers delivered so far
  Bytes bytes_cancelled;  // payload in flight when the collective was cancelled (cancel())
  Bytes wire_bytes;       // what the network carried: payload / the protocol's efficiency
  std::optional<Protocol> protocol;  // the one chosen, when the cost model has protocols
  std::uint64_t transfers = 0, failed_transfers = 0;
  // Algorithms that follow the data (rat): the (participant, piece) pairs that ended up holding
  // the sum of every participant's piece, each counted once (ranks x chunks when correct).
  std::optional<std::uint64_t> verified_pieces;

  double seconds() const { return (finished - started).seconds(); }
  // S / time, and the bus bandwidth: algbw x bus_factor(operation, ranks) (NCCL's convention,
  // comparable across algorithms and sizes; 2(ranks-1)/ranks for an all-reduce).
  double algorithm_bandwidth() const;
  double bus_bandwidth() const;
};

// Checks a spec against the number of participants; throws InputError naming `path` ("system").
void validate(const CollectiveSpec& spec, std::size_t participants, const std::string& path);

class CollectiveAlgorithm;  // algorithm.hpp
class Sender;               // sender.hpp
}  // namespace mlsim::collectives
namespace mlsim {
class LinkConditions;  // sim_core/network/link_conditions.hpp
}  // namespace mlsim
namespace mlsim::collectives {

// What one participant has reached (Collective::set_participant_callback).
enum class ParticipantEvent : std::uint8_t {
  kSent,   // everything it contributes has been delivered: its send buffer is free (ps: its
           // pushes arrived at their servers)
  kHolds,  // it holds the result (ps: its pulls arrived)
};

class Collective {
 public:
  using DoneCallback = InlineFunction<void(const CollectiveResult&), 32>;
  using ParticipantCallback = InlineFunction<void(std::uint32_t, ParticipantEvent), 32>;
  // `participants` are node ids (usually hosts); engine and network must outlive the collective.
  // `links` (the topology and the links' current state) is required by rat, which plans with
  // it when it starts, and by a cost model with more than one protocol, which chooses one from
  // the narrowest route between consecutive participants when the collective starts; it must
  // then outlive the collective too. Everything else (the algorithm, its regions, the senders)
  // is built here, so a model can build its collectives at prepare time.
  Collective(Engine& engine, Network& network, std::vector<NodeId> participants,
             const CollectiveSpec& spec, DoneCallback on_done = nullptr,
             const LinkConditions* links = nullptr);
  ~Collective();
  Collective(const Collective&) = delete;
  Collective& operator=(const Collective&) = delete;

  // Starts at engine.now() (the first message leaves after costs.launch); on_done runs when the
  // last participant has the result.
  void start();
  // Staggered entry, as ranks reach a collective at different times: participant `p` enters now
  // and its part starts (its pushes, for ps); the others wait for it only where they need its
  // data. start() is every participant joining at once. Supported by ps, whose workers join
  // (dedicated servers serve whatever arrives); other algorithms start together.
  void join(std::uint32_t participant);
  bool supports_join() const;
  // A finished collective made ready for another round with the same participants and spec
  // (a training job's gradient key, every iteration), without building it again; its traffic
  // counts (result()) keep adding up over the rounds, its times are the last round's. ps and
  // ring only; false (nothing changed) for the others.
  bool rearm();
  // Called when a participant reaches a ParticipantEvent (ps reports both; the other
  // algorithms report nothing and only on_done).
  void set_participant_callback(ParticipantCallback cb) { on_participant_ = std::move(cb); }
  // Runs once, at the first transfer of the collective that fails in the network (a link down
  // with no route left): the collective then never completes, and a model that waits for it
  // learns so here instead of waiting forever. Not for the transfers cancel() ends. The callback
  // must not destroy the collective (it runs inside the sender's delivery).
  using FailureCallback = InlineFunction<void(const CollectiveResult&), 32>;
  void set_failure_callback(FailureCallback cb);
  // Ends the collective now, unfinished: every transfer it has in the network is cancelled
  // (and reported failed there), its pending engine events are dropped, and neither on_done
  // nor the participant callback runs afterwards. The destructor does the same, so a model
  // that kills a job mid-step just destroys its collectives. A cancelled collective is not
  // started again.
  void cancel();
  bool cancelled() const { return cancelled_; }
  bool done() const { return done_; }
  // Complete once done(); otherwise what happened so far.
  CollectiveResult result() const;
  // Messages delivered so far over messages needed, for progress lines.
  double progress() const;
  Engine& engine() const { return engine_; }

 private:
  friend class CollectiveAlgorithm;
  void finish();
  void participant_event(std::uint32_t p, ParticipantEvent e) {
    if (on_participant_) on_participant_(p, e);
  }
  // Protocol (and, for auto, algorithm) choice and the start time, at the first entry.
  void begin();
  // The protocol for the links as they are now (sets protocol_); none without protocol costs.
  ProtocolCost choose();
  // spec_.algorithm_by_size: sets spec_.algorithm from the links as they are now.
  void choose_algorithm_by_size();
  // The algorithm for spec_.algorithm, wired to the sender (at build, or at start for auto).
  void build_algorithm();

  Engine& engine_;
  CollectiveSpec spec_;
  std::vector<NodeId> participants_;
  const LinkConditions* links_ = nullptr;
  bool choose_by_links_ = false;  // several protocols enabled: the narrowest route decides
  std::unique_ptr<Sender> sender_;
  std::unique_ptr<CollectiveAlgorithm> algorithm_;
  std::optional<Protocol> protocol_;
  DoneCallback on_done_;
  ParticipantCallback on_participant_;
  FailureCallback on_failure_;
  bool failure_reported_ = false;
  Time started_, finished_;
  bool begun_ = false;
  bool done_ = false;
  bool cancelled_ = false;
};

// Runs one collective from engine.now() until it completes or nothing is left to do.
CollectiveResult run_collective(Engine& engine, Network& network, std::vector<NodeId> participants,
                                const CollectiveSpec& spec, const LinkConditions* links = nullptr);

}  // namespace mlsim::collectives
