#pragma once
// PipeDream layer profiles (FP32 training, measured on one catalog GPU) moved to another catalog
// GPU with the platform's scaling (cost_model.hpp: scale_profiled_time): the part of a layer's
// time that its HBM traffic takes at the measuring GPU's peak bandwidth scales with HBM
// bandwidth, the rest with the FP32 peak. A layer's HBM traffic is not in the profile; it is
// taken as [assumed] forward: its parameters read and its output activation written; backward:
// twice that (weights and output gradients read, input and weight gradients written).
// Shared by the models that train from layer profiles (ina, commsched, pipeline).
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sim_core/hardware/compute_work.hpp"
#include "sim_core/hardware/dnn_profile.hpp"
#include "sim_core/hardware/hardware.hpp"
#include "sim_core/hardware/node_hardware.hpp"

namespace mlsim {

struct LayerSeconds {
  double forward = 0;
  double backward = 0;
};

// One layer's forward and backward as Compute work (compute_work.hpp) measured on `measured_on`
// (which must outlive the work): FP32, with the [assumed] HBM traffic above.
struct LayerWork {
  ProfiledWork forward, backward;
};
LayerWork layer_work(double forward_s, double backward_s, double parameter_bytes,
                     double activation_bytes, const GpuSpec& measured_on);
LayerWork layer_work(const LayerProfile& layer, const GpuSpec& measured_on);

// One layer's forward and backward seconds on `to`, as Compute prices the layer's ProfiledWork
// (the measured times themselves when `to` is `from`). InputError at `to_where` when `to` has no
// FP32 rate.
LayerSeconds layer_seconds_on(const LayerProfile& layer, const GpuSpec& from, const GpuSpec& to,
                              const std::string& from_where, const std::string& to_where);

// What one second of work measured on `from`, of unknown HBM traffic, takes on `to`: how
// Compute prices such ProfiledWork (cost_model.hpp: scale_profiled_time without bytes, the ratio
// of the two GPUs' peaks for `dtype`; exactly 1 on the same GPU). For a time measured on one GPU
// with nothing known of its kernels (a job's duration in a cluster trace). InputError at
// `from_where` / `to_where` when a GPU has no rate for `dtype`.
double profiled_time_factor(const GpuSpec& from, const GpuSpec& to, Dtype dtype,
                            const std::string& from_where, const std::string& to_where);

// A profile's layer times on one GPU, in forward order: the GPU layers, and the data-loading
// (input) layers when `include_input`, which keep their measured time (they run on the host's
// CPU, not the GPU [assumed]).
using ProfileSeconds = std::vector<LayerSeconds>;

// The profile's times on the GPU of each of `hosts` (NodeHardware: topology.hardware), one table
// per GPU type shared by the hosts that have it: what a data-parallel worker on that host takes
// per layer at speed 1. InputError at `host_where(i)` when hosts[i] has no GPU or its GPU no
// FP32 rate.
std::vector<std::shared_ptr<const ProfileSeconds>> profile_seconds_on_hosts(
    const DnnProfile& profile, bool include_input, const GpuSpec& profiled_on,
    const std::string& profiled_on_where, const NodeHardware& hardware,
    std::span<const NodeId> hosts, const std::function<std::string(std::size_t)>& host_where);

}  // namespace mlsim
