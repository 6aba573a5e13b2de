#include "sim_core/hardware/gpu_memory.hpp"

#include <fmt/format.h>

#include "sim_core/base/error.hpp"

namespace mlsim {

GpuMemoryPool::GpuMemoryPool(Engine& engine, std::string name, Bytes capacity)
    : engine_(engine), name_(std::move(name)), capacity_(capacity), start_(engine.now()) {
  MLSIM_CHECK(capacity.count >= 0, "negative memory capacity");
  usage_.set(engine_.now(), 0);
}

GpuMemoryPool::CategoryId GpuMemoryPool::category(std::string_view name) {
  for (std::size_t i = 0; i < categories_.size(); ++i)
    if (categories_[i].name == name) return static_cast<CategoryId>(i);
  Category c{std::string(name), Bytes{0}, {}};
  c.usage.set(start_, 0);  // a category created late averages over the pool's whole life
  categories_.push_back(std::move(c));
  return static_cast<CategoryId>(categories_.size() - 1);
}

GpuMemoryPool::Category& GpuMemoryPool::at(CategoryId cat) {
  MLSIM_CHECK(cat < categories_.size(), "unknown memory category id");
  return categories_[cat];
}

const GpuMemoryPool::Category& GpuMemoryPool::at(CategoryId cat) const {
  MLSIM_CHECK(cat < categories_.size(), "unknown memory category id");
  return categories_[cat];
}

bool GpuMemoryPool::try_allocate(CategoryId cat, Bytes bytes) {
  auto& c = at(cat);
  MLSIM_CHECK(bytes.count >= 0, "negative allocation");
  if (bytes > available()) {
    ++exhaustions_;
    if (on_exhausted_) {
      MemoryExhausted ev{name_, c.name, bytes, available(), engine_.now()};
      engine_.schedule_in(Time::zero(), [this, ev = std::move(ev)] { on_exhausted_(ev); });
    }
    return false;
  }
  used_ += bytes;
  c.used += bytes;
  usage_.set(engine_.now(), static_cast<double>(used_.count));
  c.usage.set(engine_.now(), static_cast<double>(c.used.count));
  return true;
}

void GpuMemoryPool::free(CategoryId cat, Bytes bytes) {
  auto& c = at(cat);
  MLSIM_CHECK(bytes.count >= 0, "negative free");
  MLSIM_CHECK(bytes <= c.used, fmt::format("{}: freeing {} bytes of \"{}\" which holds {}", name_,
                                           bytes.count, c.name, c.used.count));
  used_ -= bytes;
  c.used -= bytes;
  usage_.set(engine_.now(), static_cast<double>(used_.count));
  c.usage.set(engine_.now(), static_cast<double>(c.used.count));
}

Bytes GpuMemoryPool::used(CategoryId cat) const {
  return at(cat).used;
}
Bytes GpuMemoryPool::peak() const {
  return Bytes{static_cast<std::int64_t>(usage_.peak())};
}
Bytes GpuMemoryPool::peak(CategoryId cat) const {
  return Bytes{static_cast<std::int64_t>(at(cat).usage.peak())};
}
double GpuMemoryPool::time_average() const {
  return usage_.average(engine_.now());
}
double GpuMemoryPool::time_average(CategoryId cat) const {
  return at(cat).usage.average(engine_.now());
}

std::vector<std::string> GpuMemoryPool::category_names() const {
  std::vector<std::string> out;
  for (const auto& c : categories_) out.push_back(c.name);
  return out;
}

}  // namespace mlsim
