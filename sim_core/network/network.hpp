#pragma once
// The one network interface every backend implements (analytic, flow, simgrid, ns3).
// Above this line: who sends what to whom and what happens on delivery. Below it: how long the
// bytes take. Nothing else crosses the line, so every model runs on every backend unchanged.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "sim_core/base/units.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/engine/inline_function.hpp"
#include "sim_core/network/topology.hpp"

namespace mlsim {

using TransferId = std::uint64_t;

struct TransferResult {
  TransferId id = 0;
  NodeId src = 0, dst = 0;
  Bytes bytes;
  Time started, finished;
  // A transfer fails when no route is left (links failed) or when it is cancelled; it is then
  // reported once, never silently dropped.
  bool failed = false;
};

using DeliveryCallback = InlineFunction<void(const TransferResult&), 48>;

struct LinkStats {
  Bytes bytes_carried;      // bytes that crossed the link (delivered or in flight but counted)
  double busy_seconds = 0;  // time with at least one active flow
  double utilisation(Time horizon) const {
    return horizon.count_ns() > 0 ? busy_seconds / horizon.seconds() : 0;
  }
};

// Every transfer is started, then in flight until its callback runs, then delivered or failed:
// started == delivered + failed + in_flight, for counts and for bytes (whole transfer sizes).
struct NetworkTotals {
  std::uint64_t transfers_started = 0, transfers_delivered = 0, transfers_failed = 0;
  std::uint64_t transfers_in_flight = 0;
  Bytes bytes_started, bytes_delivered, bytes_failed, bytes_in_flight;

  // The one place a backend counts a transfer's start and its end (delivered or failed).
  void count_start(Bytes bytes) {
    ++transfers_started;
    bytes_started += bytes;
  }
  void count_end(Bytes bytes, bool failed) {
    ++(failed ? transfers_failed : transfers_delivered);
    (failed ? bytes_failed : bytes_delivered) += bytes;
  }
};

// One transfer of a phase started by Network::start_transfers; `id` is filled in.
struct TransferRequest {
  NodeId src = 0, dst = 0;
  Bytes bytes;
  DeliveryCallback done;
  std::uint64_t flow_label = 0;
  TransferId id = 0;
};

class Network {
 public:
  virtual ~Network() = default;
  virtual std::string_view backend_name() const = 0;

  // Starts moving `bytes` from src to dst now; `done` runs exactly once, at delivery of the last
  // byte or at failure. `flow_label` picks among equal-cost paths (ECMP hashing). A transfer to
  // oneself completes at once.
  virtual TransferId start_transfer(NodeId src, NodeId dst, Bytes bytes, DeliveryCallback done,
                                    std::uint64_t flow_label = 0) = 0;
  // Starts a phase of transfers now, as start_transfer in order (same ids, same results); a
  // backend may share the work among them (the flow backend solves the phase once).
  virtual void start_transfers(std::span<TransferRequest> phase) {
    for (TransferRequest& r : phase)
      r.id = start_transfer(r.src, r.dst, r.bytes, std::move(r.done), r.flow_label);
  }
  // Cancels a transfer in flight: its callback runs with failed = true. False if not active.
  virtual bool cancel_transfer(TransferId id) = 0;

  // Changes take effect now. Scenarios change links through the `events` section, which applies
  // them through LinkConditions (link_conditions.hpp) at their times.
  virtual void set_link_bandwidth(LinkId link, Bandwidth bw) = 0;
  // Transfers that start afterwards pay the new latency; those in flight keep the latency of the
  // route they started on (a latency is paid once per transfer, not per byte).
  virtual void set_link_latency(LinkId link, Time latency) = 0;
  // False when a link's latency cannot change without its reverse's (ns-3: one channel per
  // cable); the events loader then requires latency changes of both directions together.
  virtual bool latency_per_direction() const { return true; }
  // A failed link carries nothing; transfers crossing it are rerouted when another path exists,
  // otherwise reported failed.
  virtual void set_link_up(LinkId link, bool up) = 0;

  virtual LinkStats link_stats(LinkId link) const = 0;
  virtual NetworkTotals totals() const = 0;
};

}  // namespace mlsim
