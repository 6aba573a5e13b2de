#include "sim_core/hardware/compute.hpp"

#include <algorithm>

#include "sim_core/base/error.hpp"

namespace mlsim {

Compute::Compute(Engine& engine, const NodeHardware& hardware, HostSpeeds& speeds,
                 const CostModel& costs)
    : engine_(engine),
      hardware_(hardware),
      speeds_(speeds),
      costs_(costs),
      on_host_(speeds.size()) {
  speeds_.on_change([this](NodeId host, double old_speed, double new_speed) {
    on_speed_change(host, old_speed, new_speed);
  });
}

double Compute::nominal_seconds(NodeId host, const Work& work) const {
  if (const auto* f = std::get_if<FixedWork>(&work)) return f->duration.seconds();
  const GpuSpec& gpu = hardware_.gpu(host, "topology.hardware");
  return costs_.seconds(work, gpu);
}

ComputeHandle Compute::run(NodeId host, const Work& work, Done done) {
  const double s = nominal_seconds(host, work);
  return run_for(std::span<const NodeId>(&host, 1), std::span<const double>(&s, 1),
                 std::move(done));
}

ComputeHandle Compute::run_for(std::span<const NodeId> hosts,
                               std::span<const double> nominal_seconds, Done done,
                               double host_seconds) {
  MLSIM_CHECK(!hosts.empty() && hosts.size() == nominal_seconds.size(),
              "Compute::run_for needs one nominal time per host");
  MLSIM_CHECK(host_seconds >= 0, "negative host time");
  std::uint32_t slot;
  if (free_.empty()) {
    slot = static_cast<std::uint32_t>(tasks_.size());
    tasks_.emplace_back();
  } else {
    slot = free_.back();
    free_.pop_back();
  }
  Task& t = tasks_[slot];
  t.generation = next_generation_++;
  t.shares.clear();
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    MLSIM_CHECK(hosts[i] < on_host_.size(), "compute on an unknown node");
    MLSIM_CHECK(nominal_seconds[i] >= 0, "negative compute time");
    t.shares.push_back({hosts[i], nominal_seconds[i]});
    on_host_[hosts[i]].push_back(slot);
  }
  t.host_seconds = host_seconds;
  t.updated = engine_.now();
  t.done = std::move(done);
  ++live_;
  schedule(slot);
  return {slot, t.generation};
}

Time Compute::end_time(const Task& t) const {
  double gpu = 0;
  for (const auto& s : t.shares) gpu = std::max(gpu, s.remaining_s / speeds_.speed(s.host));
  return t.updated + Time::from_seconds_ceil(gpu + t.host_seconds);
}

void Compute::schedule(std::uint32_t slot) {
  Task& t = tasks_[slot];
  const auto generation = t.generation;
  t.event = engine_.schedule_at(end_time(t), [this, slot, generation] {
    if (tasks_[slot].generation == generation) finish(slot);
  });
}

void Compute::finish(std::uint32_t slot) {
  Done done = std::move(tasks_[slot].done);
  release(slot);
  done();
}

bool Compute::cancel(ComputeHandle h) {
  if (!h.valid() || h.slot >= tasks_.size() || tasks_[h.slot].generation != h.generation)
    return false;
  engine_.cancel(tasks_[h.slot].event);
  release(h.slot);
  return true;
}

void Compute::release(std::uint32_t slot) {
  Task& t = tasks_[slot];
  for (const auto& s : t.shares) std::erase(on_host_[s.host], slot);
  t.generation = 0;
  t.done = Done();
  free_.push_back(slot);
  --live_;
}

void Compute::on_speed_change(NodeId host, double old_speed, double /*new_speed*/) {
  if (host >= on_host_.size() || on_host_[host].empty()) return;
  const Time now = engine_.now();
  // Copy: rescheduling does not change the list, but keep the loop independent of it.
  const std::vector<std::uint32_t> affected = on_host_[host];
  for (std::uint32_t slot : affected) {
    Task& t = tasks_[slot];
    // Bring the task up to `now` at the speeds it ran at (the changed host's old speed).
    const double elapsed = (now - t.updated).seconds();
    auto speed_of = [&](NodeId h) { return h == host ? old_speed : speeds_.speed(h); };
    double gpu_left = 0;
    for (const auto& s : t.shares) gpu_left = std::max(gpu_left, s.remaining_s / speed_of(s.host));
    if (elapsed < gpu_left) {
      for (auto& s : t.shares)
        s.remaining_s = std::max(0.0, s.remaining_s - elapsed * speed_of(s.host));
    } else {
      for (auto& s : t.shares) s.remaining_s = 0;
      t.host_seconds = std::max(0.0, t.host_seconds - (elapsed - gpu_left));
    }
    t.updated = now;
    engine_.cancel(t.event);
    schedule(slot);
  }
}

}  // namespace mlsim
