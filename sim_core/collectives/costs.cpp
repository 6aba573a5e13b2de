#include "sim_core/collectives/costs.hpp"

#include <algorithm>
#include <limits>
#include <optional>

#include "sim_core/base/error.hpp"
#include "sim_core/collectives/collective.hpp"

namespace mlsim::collectives {

std::string_view to_string(Protocol p) {
  switch (p) {
    case Protocol::kLL:
      return "LL";
    case Protocol::kLL128:
      return "LL128";
    case Protocol::kSimple:
      return "Simple";
  }
  return "?";
}

bool CostModel::has_protocols() const {
  for (const ProtocolCost& p : protocols)
    if (p.enabled) return true;
  return false;
}

namespace {
// Levels below the root of a k-ary tree of n nodes numbered breadth first (k = 1: a chain).
int tree_depth(int n, int arity) {
  int depth = 0;
  std::int64_t last = 0;  // index of the last node at this depth
  while (last < n - 1) {
    last = last * arity + arity;
    ++depth;
  }
  return depth;
}
}  // namespace

int critical_steps(Operation op, Algorithm a, int n, int arity) {
  switch (op) {
    case Operation::kReduceScatter:
    case Operation::kAllGather:
    case Operation::kAllToAll:
      return n - 1;
    case Operation::kSendRecv:
      return 1;
    case Operation::kBroadcast:
      return tree_depth(n, arity);
    case Operation::kAllReduce:
      break;
  }
  switch (a) {
    case Algorithm::kRing:
      return 2 * (n - 1);
    case Algorithm::kTree:
      return 2 * tree_depth(n, arity);
    case Algorithm::kParameterServer:
      return 2;
    case Algorithm::kRat:
      return 4;
    case Algorithm::kNvls:
      return 2;
    case Algorithm::kDirect:
      return 1;
  }
  return 1;
}

double critical_bytes(Operation op, Algorithm a, int n, int arity, Bytes bytes) {
  const auto s = static_cast<double>(bytes.count);
  if (op != Operation::kAllReduce || n < 2) return bus_factor(op, n) * s;
  if (a == Algorithm::kNvls) return 2 * s;
  if (a != Algorithm::kTree) return bus_factor(op, n) * s;
  // Nodes are numbered breadth first: a level ends at index `last`, the next level holds
  // last+1 .. min(last k + k, n - 1), and its widest parent has min(k, that level's size) children.
  double per_direction = 0;
  std::int64_t last = 0;
  const std::int64_t k = arity;
  while (last < n - 1) {
    const std::int64_t next_last = std::min<std::int64_t>(last * k + k, n - 1);
    per_direction += static_cast<double>(std::min<std::int64_t>(k, next_last - last)) * s;
    last = next_last;
  }
  return 2 * per_direction;
}

namespace {
// The protocol-dependent part of a call's time, in seconds: the per-step latency of every
// message on a piece's critical path, and the bytes on the wire over the bandwidth. The one
// formula both the protocol choice and collective_cost use.
double protocol_seconds(const ProtocolCost& c, double steps, double bus_bytes,
                        Bandwidth bandwidth) {
  return steps * c.hop_latency.seconds() +
         (bandwidth.bytes_per_s > 0 ? bus_bytes / (c.efficiency * bandwidth.bytes_per_s) : 0);
}
}  // namespace

Protocol choose_protocol(const CostModel& model, Operation op, Algorithm a, int n, int arity,
                         Bytes bytes, Bandwidth bandwidth) {
  MLSIM_CHECK(model.has_protocols(), "choose_protocol without an enabled protocol");
  const double steps = critical_steps(op, a, n, arity);
  const double wire = critical_bytes(op, a, n, arity, bytes);
  double best_time = std::numeric_limits<double>::infinity();
  Protocol best = Protocol::kSimple;
  for (Protocol p : kProtocols) {
    const ProtocolCost& c = model.of(p);
    if (!c.enabled) continue;
    const double seconds = protocol_seconds(c, steps, wire, bandwidth);
    if (seconds <= best_time) {
      best_time = seconds;
      best = p;
    }
  }
  return best;
}

CollectiveCost collective_cost(const CostModel& model, Operation op, Algorithm a, int n, int arity,
                               Bytes bytes, Bandwidth bandwidth, Time route_latency) {
  MLSIM_CHECK(bandwidth.bytes_per_s > 0, "collective_cost needs a bandwidth > 0");
  const int steps = critical_steps(op, a, n, arity);
  const double wire = critical_bytes(op, a, n, arity, bytes);
  CollectiveCost out;
  ProtocolCost none;  // no protocols: no hop latency, efficiency 1
  const ProtocolCost* used = &none;
  if (model.has_protocols()) {
    out.protocol = choose_protocol(model, op, a, n, arity, bytes, bandwidth);
    used = &model.of(*out.protocol);
  }
  out.time = model.launch + route_latency * steps +
             Time::from_seconds(protocol_seconds(*used, steps, wire, bandwidth));
  return out;
}

AlgorithmChoice choose_algorithm(const CostModel& model, Operation op,
                                 std::span<const Algorithm> candidates, int n, int arity,
                                 Bytes bytes, Bandwidth bandwidth, Time route_latency) {
  MLSIM_CHECK(!candidates.empty(), "choose_algorithm without candidates");
  std::optional<AlgorithmChoice> best;
  for (Algorithm a : candidates) {
    const CollectiveCost c =
        collective_cost(model, op, a, n, arity, bytes, bandwidth, route_latency);
    if (!best || c.time < best->cost.time) best = AlgorithmChoice{a, c};
  }
  return *best;
}

}  // namespace mlsim::collectives
