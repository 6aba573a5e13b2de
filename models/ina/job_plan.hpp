#pragma once
// A training job's per-iteration work, cut to the switch's packet format: per layer the forward
// and backward compute time and the chunks ("units") its gradient is sent in.
//
// A unit is a burst of up to `burst_packets` consecutive packets of one layer's gradient (one
// packet in packet-accurate mode), each carrying `values_per_packet` fp32 gradient values. A unit
// never spans two layers, so a layer's gradient can leave as soon as its backward pass ends.
#include <cstdint>
#include <string>
#include <vector>

#include "sim_core/base/time.hpp"
#include "sim_core/hardware/dnn_profile.hpp"

namespace mlsim::ina {

struct LayerPlan {
  Time forward, backward;  // as profiled (on the profiling GPU)
  std::uint32_t first_unit = 0, units = 0;
  std::int64_t elements = 0;  // gradient values (fp32)
};

struct JobPlan {
  std::string model;
  std::vector<LayerPlan> layers;  // forward order
  std::vector<std::uint16_t> unit_packets;
  std::vector<std::uint32_t> unit_elements;
  std::vector<std::uint32_t> unit_layer;

  std::uint32_t units() const { return static_cast<std::uint32_t>(unit_packets.size()); }
  std::int64_t elements() const;
  std::uint64_t packets() const;
  Time compute() const;  // forward + backward of one iteration
};

// A worker's forward and backward time per layer of its job's plan, on its host's GPU at speed 1.
struct OpTimes {
  Time forward, backward;
};
using LayerTimes = std::vector<OpTimes>;

struct PlanOptions {
  int values_per_packet = 62;
  int burst_packets = 1;
  bool include_input_layers = false;  // PipeDream's Input node times data loading
};

JobPlan make_job_plan(const DnnProfile& profile, const PlanOptions& options);

}  // namespace mlsim::ina
