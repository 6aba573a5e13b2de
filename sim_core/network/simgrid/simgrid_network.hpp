#pragma once
// The `simgrid` backend: mlsim's topology and routes replayed on SimGrid 3.32's flow models
// (CM02 or LV08). Transfers are SimGrid comms started without actors; SimGrid is advanced to
// the engine's next event with run_until and reports completions through the static
// Activity::on_completion signal, which this backend turns into engine events at their dates.
//
// SimGrid's Engine is a process-wide singleton whose network model is fixed at first use, so:
//   - at most one SimGridNetwork may exist at a time in a process (a second one throws), and
//   - every SimGridNetwork of a process must use the same model (another one throws InputError).
// Successive instances reuse SimGrid's clock, which keeps running: each instance maps engine
// time onto SimGrid time from the SimGrid date at which it was built.
#include <memory>
#include <unordered_map>
#include <vector>

#include "sim_core/network/network.hpp"

namespace mlsim {

struct SimGridOptions {
  enum class Model { kCM02, kLV08 };
  // Where route latency is paid.
  //  kAfterSending: SimGrid links have no latency; a transfer shares bandwidth from its start
  //          and is delivered its route latency after its last byte left, exactly the timing of
  //          the flow backend (fluid_network.hpp). With CM02 this is plain max-min sharing.
  //  kInSimGrid: SimGrid links carry the latency, paid before the bytes move; both models then
  //          weight each flow's share by its route latency, as TCP's RTT unfairness does (LV08
  //          was calibrated that way).
  enum class Latency { kAfterSending, kInSimGrid };
  Model model = Model::kCM02;
  Latency latency = Latency::kAfterSending;
  // Distinct routes one source may use towards one destination beyond the topology's ECMP
  // fan-out (rerouting after failures needs new ones). Each costs one SimGrid host per node.
  int spare_routes = 4;
};

// Largest number of distinct shortest (hop-count) paths between two hosts.
std::uint64_t max_equal_cost_paths(const Topology& topology);

class SimGridNetwork final : public Network, private ExternalClock {
 public:
  SimGridNetwork(Engine& engine, const Topology& topology, SimGridOptions options);
  ~SimGridNetwork() override;
  SimGridNetwork(const SimGridNetwork&) = delete;
  SimGridNetwork& operator=(const SimGridNetwork&) = delete;

  std::string_view backend_name() const override { return "simgrid"; }
  TransferId start_transfer(NodeId src, NodeId dst, Bytes bytes, DeliveryCallback done,
                            std::uint64_t flow_label = 0) override;
  bool cancel_transfer(TransferId id) override;
  void set_link_bandwidth(LinkId link, Bandwidth bw) override;
  void set_link_latency(LinkId link, Time latency) override;
  void set_link_up(LinkId link, bool up) override;
  LinkStats link_stats(LinkId link) const override;
  NetworkTotals totals() const override { return totals_; }
  // Route-latency mode and model actually used (for reports).
  const SimGridOptions& options() const;

  // Called from SimGrid's completion signal (through the process-wide dispatcher).
  void on_comm_finished(const void* activity);

 private:
  struct Impl;
  Time next_event_time() override;
  // Reports a transfer now (delivered or failed) and forgets it.
  void finish(TransferId id, bool failed);
  void fail_at_once(TransferId id);
  // Stops a transfer's SimGrid comm, counting the bytes it moved; returns the bytes left.
  double stop_comm(TransferId id);
  void advance_to(Time t) override;

  std::unique_ptr<Impl> impl_;
  NetworkTotals totals_;
};

}  // namespace mlsim
