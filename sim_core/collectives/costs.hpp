#pragma once
// What a collective costs besides moving its bytes: NCCL-like per-call and per-step costs, and
// host costs (CPU/NIC per message, parameter-server aggregation).
//
// The structure follows NCCL's own tuning model (NVIDIA/nccl src/graph/tuning.cc,
// ncclTopoTuneModel and ncclTopoGetAlgoTime): a call's time is a latency plus bytes over a
// bandwidth, the latency a base part per call plus a hardware part per step, the bandwidth the
// links' times a per-protocol factor, and the protocol (LL, LL128, Simple) is the one with the
// smallest estimated time for the call's size. Here only the choice uses that closed form: the
// simulation itself pays `launch` once per call, `hop_latency` once per message (a step of one
// piece: flag polling and synchronisation between the two GPUs' kernels), the links' own latency
// through the network, and sends bytes / efficiency on the wire through the Network backend, so
// bandwidth comes from the links the bytes cross, contention included.
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "sim_core/base/time.hpp"
#include "sim_core/base/units.hpp"
#include "sim_core/collectives/host_send_clock.hpp"

namespace mlsim::collectives {

enum class Operation;
enum class Algorithm;

enum class Protocol : std::uint8_t { kLL, kLL128, kSimple };
inline constexpr std::array<Protocol, 3> kProtocols = {Protocol::kLL, Protocol::kLL128,
                                                       Protocol::kSimple};
std::string_view to_string(Protocol p);

struct ProtocolCost {
  bool enabled = false;
  Time hop_latency;         // per message
  double efficiency = 1.0;  // payload bytes / bytes on the wire, in (0, 1]
};

struct CostModel {
  Time launch;  // per call, before the first message leaves
  // Indexed by Protocol. None enabled: no protocol costs (bytes as given, no hop latency).
  std::array<ProtocolCost, 3> protocols{};
  // Per message that crosses hosts, beyond its links' latency and hop_latency: NCCL's network
  // step (the proxy thread and the NIC; tuning.cc hwLat[NCCL_HW_NET]). Charged by the
  // hierarchical closed form (hierarchical.hpp) only: the event-driven algorithms do not know
  // which of their messages cross hosts.
  Time inter_node_latency;

  const ProtocolCost& of(Protocol p) const { return protocols[static_cast<std::size_t>(p)]; }
  ProtocolCost& of(Protocol p) { return protocols[static_cast<std::size_t>(p)]; }
  bool has_protocols() const;
};

struct HostCosts {
  // CPU/NIC time a participant spends per message it sends (RPC, send/receive system calls),
  // one message after another: a message leaves once its sender's previous overheads are paid.
  Time message_overhead;
  // A delay every message waits after its sender's overhead, before its bytes move (framework,
  // RPC and NIC set-up): it occupies neither the host nor a link, so messages overlap in it.
  Time message_latency;
  // CPU time a sender spends per payload byte (ns per byte): a kernel TCP stack's copy of the
  // payload into socket buffers, its checksums; 0 = free, as RDMA's zero copy. Booked on the
  // same sending thread as message_overhead, after it, so one host copies its messages one
  // after another. The copy runs beside the transfer (the stack fills the socket buffer while
  // the NIC drains it): the bytes start moving once message_overhead (and message_latency) is
  // paid, and the message is delivered no earlier than its last byte is copied plus
  // message_latency. A host then sends at most 1 / per_byte_ns bytes per ns whatever its link.
  // The receiver's copy is not modelled.
  double per_byte_ns = 0;
  // Bytes per second a parameter server sums (one piece after another per server); 0 = free.
  Bandwidth ps_aggregation;
  // Where the per-message overhead is booked. Null: per collective (each collective's sender
  // pays its own messages one after another). Set: one clock per host shared by every
  // collective that uses it, as one communication thread per host sends the messages of all the
  // collectives a training job has in flight. Not read from scenarios; must outlive the
  // collectives.
  HostSendClock* send_clock = nullptr;
};

// Messages on the critical path of one piece, as NCCL counts steps: ring all-reduce 2(n-1),
// reduce-scatter and all-gather n-1, a k-ary tree twice its depth (broadcast once), a parameter
// server and nvls 2 (push and pull, up and down), rat 4 (gather, up, down, scatter), send/recv 1,
// all-to-all n-1.
int critical_steps(Operation op, Algorithm a, int participants, int arity);

// Bytes one piece's critical path moves through its busiest link, one link per participant to a
// shared switch (what the bandwidth term divides): bus_factor x S for every operation and
// algorithm (NCCL's bus-bandwidth convention: 2(n-1)/n x S for a ring all-reduce) except the
// tree and nvls all-reduces, whose busiest links carry more. A k-ary tree all-reduce moves, per
// level, S from each child into its parent on the way up and S from the parent to each child on
// the way down, so a level with up to c children per parent costs c x S each way:
// 2 x sum over levels of c x S (3-ary depth 1: 6S; binary over 7 ranks: 8S). nvls sends S up to
// the switch and receives S back: 2S.
double critical_bytes(Operation op, Algorithm a, int participants, int arity, Bytes bytes);

// NCCL-like protocol choice: the enabled protocol with the smallest
//   critical_steps x hop_latency + bus_factor x S / (efficiency x bandwidth)
// where `bandwidth` is the narrowest route between consecutive participants; ties go to the
// later protocol (Simple over LL128 over LL). Requires model.has_protocols().
Protocol choose_protocol(const CostModel& model, Operation op, Algorithm a, int participants,
                         int arity, Bytes bytes, Bandwidth bandwidth);

// The closed-form time of one collective whose participants are joined by routes of
// `bandwidth` and `route_latency` (one message's latency through the links, e.g. GPU ->
// NVSwitch -> GPU), uncontended, one piece (chunks 1, channels 1):
//   launch + critical_steps x (hop_latency + route_latency)
//          + bus_factor x S / (efficiency x bandwidth)
// with the protocol choose_protocol picks (none when the model has no protocols: hop latency 0,
// efficiency 1). For a ring all-reduce this is what the event-driven Collective takes on such
// routes (tests/collectives/cost_query_test.cpp compares the two); a model that does not need
// bytes to cross its network event by event (an intra-node tensor-parallel all-reduce) calls
// this instead. Bandwidth must be > 0.
struct CollectiveCost {
  Time time;
  std::optional<Protocol> protocol;
};
CollectiveCost collective_cost(const CostModel& model, Operation op, Algorithm a, int participants,
                               int arity, Bytes bytes, Bandwidth bandwidth, Time route_latency);

// NCCL-like algorithm choice ("algorithm": "auto"): of `candidates`, the one whose
// collective_cost is smallest for this call (NCCL's tuning model picks the (algorithm,
// protocol) pair of least estimated time the same way: tuning.cc, ncclTopoGetAlgoTime; here the
// estimate is collective_cost's closed form with critical_bytes, one piece, uncontended). Ties go
// to the earlier candidate. Candidates must not be empty; bandwidth must be > 0.
struct AlgorithmChoice {
  Algorithm algorithm;
  CollectiveCost cost;
};
AlgorithmChoice choose_algorithm(const CostModel& model, Operation op,
                                 std::span<const Algorithm> candidates, int participants, int arity,
                                 Bytes bytes, Bandwidth bandwidth, Time route_latency);

}  // namespace mlsim::collectives
