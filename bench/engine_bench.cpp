// Engine hold model with 100, 10^4 and 10^6 pending events: mlsim's Engine (callbacks in a slab,
// cancellation) against a bare 4-ary heap of 16-byte keys without callbacks (the practical
// limit), and ns-3 3.37's Map, Heap and PriorityQueue schedulers driven through ns3::Simulator
// (ns3_scheduler_bench.cpp). Items/s = events per second.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "bench/hold_model.hpp"
#include "sim_core/engine/engine.hpp"

namespace {

using mlsim::Engine;
using mlsim::Time;
using mlsim_bench::HoldIncrements;
using mlsim_bench::kHoldBatch;

struct HoldState {
  Engine engine;
  HoldIncrements inc;
  std::int64_t remaining = 0;
};

// Each event reschedules itself with a fresh increment: one pop and one push per event, and the
// callback (a pointer capture) is constructed in the slab each time, as in a real model.
void hold_event(HoldState* s) {
  if (--s->remaining == 0) s->engine.stop();
  s->engine.schedule_in(Time::ns(s->inc.next()), [s] { hold_event(s); });
}

void BM_MlsimEngineHold(benchmark::State& state) {
  const auto pending = state.range(0);
  HoldState s;
  for (std::int64_t i = 0; i < pending; ++i)
    s.engine.schedule_at(Time::ns(s.inc.next()), [p = &s] { hold_event(p); });
  const std::uint64_t before = s.engine.events_processed();
  for (auto _ : state) {
    s.remaining = kHoldBatch;
    s.engine.run();
  }
  // The engine's own count, so a run that stopped early cannot pass for a fast one.
  const auto processed = static_cast<std::int64_t>(s.engine.events_processed() - before);
  if (processed != state.iterations() * kHoldBatch ||
      s.engine.pending_events() != static_cast<std::size_t>(pending))
    state.SkipWithError("the hold model lost or gained events");
  state.SetItemsProcessed(processed);
}
BENCHMARK(BM_MlsimEngineHold)->Arg(100)->Arg(10'000)->Arg(1'000'000)->Unit(benchmark::kMillisecond);

// The same hold model on a bare 4-ary heap of (time, sequence) keys and no callbacks.
struct Key {
  std::int64_t time;
  std::uint64_t seq;
  bool operator<(const Key& o) const { return time < o.time || (time == o.time && seq < o.seq); }
};

class BareHeap {
 public:
  void push(Key k) {
    std::size_t i = h_.size();
    h_.push_back(k);
    while (i > 0) {
      std::size_t p = (i - 1) >> 2;
      if (!(k < h_[p])) break;
      h_[i] = h_[p];
      i = p;
    }
    h_[i] = k;
  }
  Key pop() {
    Key top = h_.front();
    Key last = h_.back();
    h_.pop_back();
    std::size_t n = h_.size(), i = 0;
    if (n == 0) return top;
    for (;;) {
      std::size_t c = 4 * i + 1;
      if (c >= n) break;
      std::size_t best = c, end = std::min(c + 4, n);
      for (std::size_t j = c + 1; j < end; ++j)
        if (h_[j] < h_[best]) best = j;
      if (!(h_[best] < last)) break;
      h_[i] = h_[best];
      i = best;
    }
    h_[i] = last;
    return top;
  }

 private:
  std::vector<Key> h_;
};

void BM_Bare4aryHeapHold(benchmark::State& state) {
  const auto pending = state.range(0);
  BareHeap heap;
  HoldIncrements inc;
  std::uint64_t seq = 0;
  for (std::int64_t i = 0; i < pending; ++i) heap.push({inc.next(), seq++});
  for (auto _ : state) {
    for (std::int64_t i = 0; i < kHoldBatch; ++i) {
      Key k = heap.pop();
      heap.push({k.time + inc.next(), seq++});
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kHoldBatch);
}
BENCHMARK(BM_Bare4aryHeapHold)
    ->Arg(100)
    ->Arg(10'000)
    ->Arg(1'000'000)
    ->Unit(benchmark::kMillisecond);

}  // namespace
