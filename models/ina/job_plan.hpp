#pragma once
// A training job's per-iteration work, cut to the switch's packet format: per layer the forward
// and backward compute time and the chunks ("units") its gradient is sent in.
//
// A unit is a burst of up to `burst_packets` consecutive packets of one layer's gradient (one
// packet in packet-accurate mode), each carrying `values_per_packet` fp32 gradient values. A unit
// never spans two layers, so a layer's gradient can leave as soon as its backward pass ends, nor
// two chunks of the training core's communication scheduler (PlanOptions::partition: the
// scheduler's partition, in values; 0 = a chunk is a whole layer, the framework's FIFO).
#include <cstdint>
#include <string>
#include <vector>

#include "sim_core/base/time.hpp"
#include "sim_core/hardware/dnn_profile.hpp"

namespace mlsim::ina {

struct LayerPlan {
  Time forward, backward;  // as profiled (on the profiling GPU)
  std::uint32_t first_unit = 0, units = 0;
  std::int64_t elements = 0;      // gradient values (fp32)
  std::uint32_t first_chunk = 0;  // its chunks are first_chunk.. in child-index order
};

// One chunk of the training core (training::Chunk: layer, child index) and its units.
struct ChunkPlan {
  std::uint32_t layer = 0, index = 0;
  std::int64_t elements = 0;
  std::uint32_t first_unit = 0, units = 0;
};

struct JobPlan {
  std::string model;
  std::vector<LayerPlan> layers;  // forward order
  std::vector<std::uint16_t> unit_packets;
  std::vector<std::uint32_t> unit_elements;
  std::vector<std::uint32_t> unit_layer;
  std::vector<std::uint32_t> unit_chunk;
  std::vector<ChunkPlan> chunks;  // numbered in production order, as the units
  std::int64_t partition = 0;     // values per chunk; 0 = whole layers

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
  std::int64_t partition = 0;         // the scheduler's chunk size in values; 0 = whole layers
};

JobPlan make_job_plan(const DnnProfile& profile, const PlanOptions& options);

}  // namespace mlsim::ina
