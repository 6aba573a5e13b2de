#include "models/pipeline/stage_memory.hpp"

#include <algorithm>
#include <string>

#include "sim_core/base/error.hpp"

namespace mlsim::pipeline {

InputError nothing_fits(std::size_t layers, std::size_t hosts) {
  return InputError("system.memory", "no configuration of the " + std::to_string(layers) +
                                         " layers on " + std::to_string(hosts) +
                                         " hosts has every stage fit in its GPUs' memory");
}

MemorySettings read_memory_settings(JsonReader& parent) {
  MemorySettings m;
  if (!parent.has("memory")) return m;
  JsonReader memory = parent.object("memory");
  memory.only_keys({"constraint", "capacity", "optimizer_state_factor"});
  m.constraint = memory.boolean("constraint");
  if (m.constraint) {
    if (memory.has("capacity")) m.capacity = static_cast<double>(memory.bytes("capacity").count);
    // [assumed] one weight-sized optimizer buffer: SGD momentum, as PipeDream trains its image
    // models (runtime/image_classification/main_with_runtime.py, SGDWithWeightStashing).
    m.optimizer_state_factor = memory.number_or("optimizer_state_factor", 1, 0, 100);
  } else {
    for (const char* key : {"capacity", "optimizer_state_factor"})
      if (memory.has(key))
        throw InputError(memory.path_of(key),
                         "used only with " + memory.path_of("constraint") + " true (it is false)");
  }
  memory.finish();
  return m;
}

StageMemory::StageMemory(const std::vector<LayerCost>& layers, MemoryLimit limit,
                         ScheduleTiming schedule, std::size_t hosts, MemoryRule rule)
    : layers_(layers), limit_(std::move(limit)), schedule_(schedule), hosts_(hosts), rule_(rule) {
  MLSIM_CHECK(!limit_.active() || limit_.capacity.size() >= hosts_,
              "a memory limit without a capacity for every host");
  const std::size_t n = layers_.size();
  params_.assign(n + 1, 0);
  activations_.assign(n + 1, 0);
  for (std::size_t l = 0; l < n; ++l) {
    params_[l + 1] = params_[l] + layers_[l].parameter_bytes;
    activations_[l + 1] = activations_[l] + layers_[l].activation_bytes;
  }
  build_suffix();
}

void StageMemory::set_straight(bool straight) {
  if (straight == straight_) return;
  straight_ = straight;
  build_suffix();
}

double StageMemory::bytes(std::size_t i, std::size_t j, std::size_t h, std::size_t r) const {
  const double P = params_[j] - params_[i], A = activations_[j] - activations_[i];
  if (rule_ == MemoryRule::kPipeDream) {
    // ceil(machines after the stage / its machines) x (activations + parameters).
    const std::size_t after = hosts_ - (h + r);
    const double factor = static_cast<double>((after + r - 1) / r);
    return factor * (A + P);
  }
  const double a_in = i > 0 ? layers_[i - 1].cut_bytes() : 0;  // what the stage receives
  const double f = limit_.optimizer_state_factor;
  if (schedule_.kind == training::PipelineSchedule::Kind::kGPipe) {
    const double g = static_cast<double>(schedule_.group);
    return P * (2 + f) + g * (A + a_in);
  }
  const double k = static_cast<double>(in_flight_limit(h, r, hosts_));
  return P * (k + 1 + f) + k * (A + a_in);
}

bool StageMemory::fits(std::size_t i, std::size_t j, std::size_t h, std::size_t r) const {
  if (!active()) return true;
  const double need = bytes(i, j, h, r);
  for (std::size_t x = h; x < h + r; ++x)
    if (need > limit_.capacity[x]) return false;
  return true;
}

bool StageMemory::fits(const Partition& p) const {
  for (std::size_t s = 0; s < p.stages(); ++s)
    if (!fits(p.first[s], p.first[s + 1], p.first_host(s), p.replication(s))) return false;
  return true;
}

double StageMemory::peak_bytes(const Partition& p) const {
  double peak = 0;
  for (std::size_t s = 0; s < p.stages(); ++s)
    peak = std::max(peak, bytes(p.first[s], p.first[s + 1], p.first_host(s), p.replication(s)));
  return peak;
}

double StageMemory::peak_fraction(const Partition& p) const {
  if (!active()) return 0;
  double peak = 0;
  for (std::size_t s = 0; s < p.stages(); ++s) {
    const double need = bytes(p.first[s], p.first[s + 1], p.first_host(s), p.replication(s));
    for (std::size_t x = p.first_host(s); x < p.first_host(s + 1); ++x)
      peak = std::max(peak, need / limit_.capacity[x]);
  }
  return peak;
}

void StageMemory::build_suffix() {
  const std::size_t n = layers_.size(), H = hosts_;
  suffix_.clear();
  if (!active()) return;  // completable() is true for everything: nothing to build
  suffix_.assign(n + 1, std::vector<char>(H + 1, 0));
  suffix_[n][H] = 1;
  // suffix_[i][h]: some stage [i, j) on hosts [h, h + r) fits and [j, n) on [h + r, H) can be
  // completed; a stage holds a layer at least, and the last stage takes the last hosts.
  for (std::size_t h = H; h-- > 0;) {
    for (std::size_t i = n; i-- > 0;) {
      const std::size_t max_r = straight_ ? 1 : H - h;
      bool ok = false;
      for (std::size_t r = 1; r <= max_r && !ok; ++r)
        for (std::size_t j = i + 1; j <= n && !ok; ++j)
          ok = suffix_[j][h + r] != 0 && fits(i, j, h, r);
      suffix_[i][h] = ok ? 1 : 0;
    }
  }
}

}  // namespace mlsim::pipeline
