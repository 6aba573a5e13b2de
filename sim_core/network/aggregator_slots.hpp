#pragma once
// A programmable switch's aggregator memory, the state of an in-network aggregation switch
// program (switch_program.hpp): `size` aggregators (in batched mode, groups of k adjacent
// aggregators that a burst of k packets uses together). Each holds one chunk's partial sum, the
// bitmap of contributors already added, and its owner (job, seq) while claimed. Which aggregator
// a chunk uses, and when it is freed, is the policy's business (models/ina: SwitchML, ATP, DSA).
//
// The pool enforces single ownership (claiming a held aggregator is an InvariantError) and keeps
// the time-weighted metrics: occupancy (held aggregators) and the part of it that is
// idle-but-reserved (complete, waiting for a parameter server's result to pass back). An optional
// observer sees every claim and release, so tests can audit ownership from outside. Optionally it
// also keeps both quantities per fixed interval (the occupancy time series).
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "sim_core/base/error.hpp"
#include "sim_core/base/interval_average.hpp"
#include "sim_core/base/stats.hpp"
#include "sim_core/base/time.hpp"

namespace mlsim {

// The chunk a claim is for: owner job, chunk sequence, aggregators of the burst, and the chunk's
// priority (read by preempting policies).
struct ChunkClaim {
  std::uint16_t job = 0;
  std::uint64_t seq = 0;
  std::uint16_t packets = 1;
  std::uint16_t priority = 0;
};

struct Aggregator {
  std::uint64_t seq = 0;
  std::uint64_t sum = 0;
  std::uint32_t bitmap = 0;
  std::uint16_t job = 0;
  std::uint16_t packets = 1;  // aggregators of the burst (1 in packet-accurate mode)
  std::uint16_t priority = 0;
  bool held = false;
  bool complete = false;  // every contributor added; result on its way (through a PS or back)
  bool owned_by(std::uint16_t j, std::uint64_t s) const { return held && job == j && seq == s; }
};

struct PoolEvent {
  enum Kind { kClaim, kRelease } kind;
  std::size_t index;
  std::uint16_t job;
  std::uint64_t seq;
};

class AggregatorSlots {
 public:
  AggregatorSlots(std::size_t size, Time start) : slots_(size) {
    MLSIM_CHECK(size > 0, "an aggregator pool needs at least one aggregator");
    held_.set(start, 0);
    waiting_.set(start, 0);
  }

  std::size_t size() const { return slots_.size(); }
  const Aggregator& at(std::size_t i) const { return slots_.at(i); }

  // Claims aggregator i, empty, for the chunk.
  void claim(std::size_t i, const ChunkClaim& c, Time now) {
    Aggregator& a = slots_.at(i);
    MLSIM_CHECK(!a.held, "aggregator claimed while held by another owner");
    a = Aggregator{c.seq, 0, 0, c.job, c.packets, c.priority, true, false};
    ++claims_;
    set_held(now, ++held_count_);
    if (observer_) observer_({PoolEvent::kClaim, i, c.job, c.seq});
  }
  // Adds the contribution of the contributors in `bitmap` (their values summed in `sum`) to the
  // chunk (job, seq) that holds aggregator i; returns true when the aggregator became complete
  // (its bitmap reached `full`).
  bool add(std::size_t i, std::uint16_t job, std::uint64_t seq, std::uint32_t bitmap,
           std::uint64_t sum, std::uint32_t full, Time now) {
    Aggregator& a = slots_.at(i);
    MLSIM_CHECK(a.owned_by(job, seq), "adding to an aggregator the packet does not own");
    MLSIM_CHECK((a.bitmap & bitmap) == 0, "a worker added twice to one aggregator");
    a.bitmap |= bitmap;
    a.sum += sum;
    if (a.bitmap == full) {
      a.complete = true;
      set_waiting(now, ++waiting_count_);
      return true;
    }
    return false;
  }
  void release(std::size_t i, Time now) {
    Aggregator& a = slots_.at(i);
    MLSIM_CHECK(a.held, "releasing a free aggregator");
    if (a.complete) set_waiting(now, --waiting_count_);
    if (observer_) observer_({PoolEvent::kRelease, i, a.job, a.seq});
    a.held = false;
    a.complete = false;
    set_held(now, --held_count_);
  }

  void set_observer(std::function<void(const PoolEvent&)> f) { observer_ = std::move(f); }
  // Starts keeping held and complete-but-held counts per interval of `width` from time 0.
  void record_intervals(Time width) {
    held_intervals_.emplace(width);
    waiting_intervals_.emplace(width);
  }
  // Per interval up to `end`: time-averaged fractions of the pool held and idle-but-reserved.
  struct Intervals {
    Time width;
    std::vector<double> occupancy, idle_reserved;
  };
  std::optional<Intervals> intervals(Time end) const {
    if (!held_intervals_) return std::nullopt;
    Intervals out{held_intervals_->width(), held_intervals_->averages(end),
                  waiting_intervals_->averages(end)};
    for (double& v : out.occupancy) v /= static_cast<double>(size());
    for (double& v : out.idle_reserved) v /= static_cast<double>(size());
    return out;
  }

  std::uint64_t claims() const { return claims_; }
  std::size_t held_now() const { return held_count_; }
  // Time-averaged fraction of the pool held / held but complete (idle, awaiting release).
  double mean_occupancy(Time now) const { return held_.average(now) / static_cast<double>(size()); }
  double mean_idle_reserved(Time now) const {
    return waiting_.average(now) / static_cast<double>(size());
  }
  double peak_occupancy() const { return held_.peak() / static_cast<double>(size()); }

 private:
  void set_held(Time now, std::size_t n) {
    held_.set(now, static_cast<double>(n));
    if (held_intervals_) held_intervals_->set(now, static_cast<double>(n));
  }
  void set_waiting(Time now, std::size_t n) {
    waiting_.set(now, static_cast<double>(n));
    if (waiting_intervals_) waiting_intervals_->set(now, static_cast<double>(n));
  }

  std::vector<Aggregator> slots_;
  std::size_t held_count_ = 0, waiting_count_ = 0;
  std::uint64_t claims_ = 0;
  TimeAverage held_, waiting_;
  std::function<void(const PoolEvent&)> observer_;
  std::optional<IntervalAverage> held_intervals_, waiting_intervals_;
};

}  // namespace mlsim
