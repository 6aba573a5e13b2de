#pragma once
// Accounting of one GPU's memory (HBM) by category: weights, KV cache, activations, ...
//
// Running out is an outcome to simulate, not undefined behaviour: try_allocate() refuses a
// request that does not fit, changes nothing, and schedules the pool's exhaustion handler on the
// engine at the current time. The handler runs as its own event (not inside the caller's stack),
// so it may free memory, preempt requests or stop the run without re-entering the allocator's
// caller.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "sim_core/base/stats.hpp"
#include "sim_core/base/units.hpp"
#include "sim_core/engine/engine.hpp"

namespace mlsim {

struct MemoryExhausted {
  std::string pool;      // the pool's name, e.g. "gpu3"
  std::string category;  // what was being allocated
  Bytes requested;
  Bytes available;  // free bytes at the time of the refusal
  Time at;
};

class GpuMemoryPool {
 public:
  using CategoryId = std::uint32_t;
  using ExhaustionHandler = std::function<void(const MemoryExhausted&)>;

  // Usage is time-averaged from the engine's current time on.
  GpuMemoryPool(Engine& engine, std::string name, Bytes capacity);
  GpuMemoryPool(const GpuMemoryPool&) = delete;
  GpuMemoryPool& operator=(const GpuMemoryPool&) = delete;

  // The id of a named category, created on first use. Ids are dense, in creation order.
  CategoryId category(std::string_view name);

  // Reserves `bytes` (>= 0) for `cat`. Returns false and changes nothing when it does not fit;
  // the exhaustion handler (if set) is then scheduled at now().
  [[nodiscard]] bool try_allocate(CategoryId cat, Bytes bytes);
  // Returns `bytes` of `cat`; freeing more than the category holds is an InvariantError.
  void free(CategoryId cat, Bytes bytes);

  void set_exhaustion_handler(ExhaustionHandler handler) { on_exhausted_ = std::move(handler); }

  const std::string& name() const { return name_; }
  Bytes capacity() const { return capacity_; }
  Bytes used() const { return used_; }
  Bytes available() const { return capacity_ - used_; }
  Bytes used(CategoryId cat) const;
  // Highest total (or per-category) use so far.
  Bytes peak() const;
  Bytes peak(CategoryId cat) const;
  // Time-weighted average use in bytes from construction to now().
  double time_average() const;
  double time_average(CategoryId cat) const;
  std::uint64_t exhaustions() const { return exhaustions_; }

  std::vector<std::string> category_names() const;

 private:
  struct Category {
    std::string name;
    Bytes used;
    TimeAverage usage;
  };
  Category& at(CategoryId cat);
  const Category& at(CategoryId cat) const;

  Engine& engine_;
  std::string name_;
  Bytes capacity_;
  Time start_;
  Bytes used_;
  TimeAverage usage_;
  std::vector<Category> categories_;
  std::uint64_t exhaustions_ = 0;
  ExhaustionHandler on_exhausted_;
};

}  // namespace mlsim
