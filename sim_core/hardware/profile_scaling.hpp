#pragma once
// PipeDream layer profiles (FP32 training, measured on one catalog GPU) moved to another catalog
// GPU with the platform's scaling (cost_model.hpp: scale_profiled_time): the part of a layer's
// time that its HBM traffic takes at the measuring GPU's peak bandwidth scales with HBM
// bandwidth, the rest with the FP32 peak. A layer's HBM traffic is not in the profile; it is
// taken as [assumed] forward: its parameters read and its output activation written; backward:
// twice that (weights and output gradients read, input and weight gradients written).
// Shared by the models that train from layer profiles (ina, commsched, pipeline).
#include <string>

#include "sim_core/hardware/compute_work.hpp"
#include "sim_core/hardware/dnn_profile.hpp"
#include "sim_core/hardware/hardware.hpp"

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

// One layer's forward and backward seconds on `to`. InputError at `to_where` when `to` has no
// FP32 rate.
LayerSeconds layer_seconds_on(const LayerProfile& layer, const GpuSpec& from, const GpuSpec& to,
                              const std::string& from_where, const std::string& to_where);

// The whole profile's time (forward + backward, data-loading nodes excluded) on `to` over its time
// on `from`: one factor for models that scale a job's profile as a whole.
double profile_time_ratio(const DnnProfile& profile, const GpuSpec& from, const GpuSpec& to,
                          const std::string& from_where, const std::string& to_where);

}  // namespace mlsim
