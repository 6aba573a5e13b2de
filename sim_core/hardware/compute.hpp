#pragma once
// Compute: the platform's GPUs, beside Network. A model hands a host a piece of work
// (compute_work.hpp) and gets a callback when it ends. How long work takes at nominal speed comes
// from the run's CostModel (cost_model.hpp: profile tables, calibrated roofline, scaling between
// catalog GPUs) for the host's GPU (NodeHardware); the host's current speed (HostSpeeds) divides
// it, and a speed change rescales work in progress: what remains runs at the new rate.
//
// Work may span several hosts in lock-step (a tensor-parallel group): it ends when the last host
// finishes its share, each at its own speed.
#include <cstdint>
#include <span>
#include <vector>

#include "sim_core/engine/engine.hpp"
#include "sim_core/hardware/compute_work.hpp"
#include "sim_core/hardware/cost_model.hpp"
#include "sim_core/hardware/host_speeds.hpp"
#include "sim_core/hardware/node_hardware.hpp"

namespace mlsim {

struct ComputeHandle {
  std::uint32_t slot = 0;
  std::uint64_t generation = 0;  // 0: no work
  bool valid() const { return generation != 0; }
};

class Compute {
 public:
  using Done = Engine::Callback;

  // All references must outlive the Compute. Registers a HostSpeeds listener.
  Compute(Engine& engine, const NodeHardware& hardware, HostSpeeds& speeds, const CostModel& costs);
  Compute(const Compute&) = delete;
  Compute& operator=(const Compute&) = delete;

  const CostModel& costs() const { return costs_; }
  const NodeHardware& hardware() const { return hardware_; }

  // Seconds `work` takes on `host`'s GPU at speed 1. OperatorWork and ProfiledWork need the host
  // to have a GPU (topology.hardware); FixedWork does not.
  double nominal_seconds(NodeId host, const Work& work) const;

  // Runs `work` on `host` from now; `done` is called when it ends.
  ComputeHandle run(NodeId host, const Work& work, Done done);
  // Runs work of `nominal_seconds[i]` (at speed 1) on `hosts[i]` in lock-step, then
  // `host_seconds` that no GPU speed scales (framework overhead on the CPU); `done` once the
  // slowest host has finished. The two spans have the same length, at least one.
  ComputeHandle run_for(std::span<const NodeId> hosts, std::span<const double> nominal_seconds,
                        Done done, double host_seconds = 0);
  // Cancels work in progress (done is not called); false if it already ended.
  bool cancel(ComputeHandle h);
  std::size_t in_progress() const { return live_; }

 private:
  struct Share {
    NodeId host;
    double remaining_s;  // nominal seconds left at speed 1
  };
  struct Task {
    std::uint64_t generation = 0;  // 0: free
    std::vector<Share> shares;
    double host_seconds = 0;
    Time updated;  // when remaining_s was last brought up to date
    EventHandle event;
    Done done;
  };

  Time end_time(const Task& t) const;
  void schedule(std::uint32_t slot);
  void finish(std::uint32_t slot);
  void on_speed_change(NodeId host, double old_speed, double new_speed);
  void release(std::uint32_t slot);

  Engine& engine_;
  const NodeHardware& hardware_;
  HostSpeeds& speeds_;
  const CostModel& costs_;
  std::vector<Task> tasks_;
  std::vector<std::uint32_t> free_;
  std::vector<std::vector<std::uint32_t>> on_host_;  // tasks with a share on each node
  std::uint64_t next_generation_ = 1;
  std::size_t live_ = 0;
};

}  // namespace mlsim
