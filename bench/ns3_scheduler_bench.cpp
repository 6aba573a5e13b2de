// ns-3 3.37's schedulers in the hold model (C++17: ns-3's headers do not build as C++20 with
// GCC 12). Driven through ns3::Simulator, as an ns-3 model uses them: each event is a
// Simulator::Schedule of a function, so per-event costs (EventImpl allocation, uid) count too.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "bench/hold_model.hpp"
#include "ns3/core-module.h"

namespace {

struct Ns3Hold {
  mlsim_bench::HoldIncrements inc;
  std::int64_t remaining = 0;
};
Ns3Hold* g_hold = nullptr;  // ns-3's Simulator is itself a process-wide singleton

void ns3_hold_event() {
  if (--g_hold->remaining == 0) ns3::Simulator::Stop();
  ns3::Simulator::Schedule(ns3::NanoSeconds(g_hold->inc.next()), &ns3_hold_event);
}

void run_ns3_hold(benchmark::State& state, const char* scheduler) {
  const auto pending = state.range(0);
  Ns3Hold hold;
  g_hold = &hold;
  ns3::ObjectFactory factory;
  factory.SetTypeId(scheduler);
  ns3::Simulator::SetScheduler(factory);
  for (std::int64_t i = 0; i < pending; ++i)
    ns3::Simulator::Schedule(ns3::NanoSeconds(hold.inc.next()), &ns3_hold_event);
  for (auto _ : state) {
    hold.remaining = mlsim_bench::kHoldBatch;
    ns3::Simulator::Run();
  }
  state.SetItemsProcessed(state.iterations() * mlsim_bench::kHoldBatch);
  ns3::Simulator::Destroy();
  g_hold = nullptr;
}

void BM_Ns3MapSchedulerHold(benchmark::State& s) {
  run_ns3_hold(s, "ns3::MapScheduler");
}
void BM_Ns3HeapSchedulerHold(benchmark::State& s) {
  run_ns3_hold(s, "ns3::HeapScheduler");
}
void BM_Ns3PriorityQueueSchedulerHold(benchmark::State& s) {
  run_ns3_hold(s, "ns3::PriorityQueueScheduler");
}
BENCHMARK(BM_Ns3MapSchedulerHold)
    ->Arg(100)
    ->Arg(10'000)
    ->Arg(1'000'000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Ns3HeapSchedulerHold)
    ->Arg(100)
    ->Arg(10'000)
    ->Arg(1'000'000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Ns3PriorityQueueSchedulerHold)
    ->Arg(100)
    ->Arg(10'000)
    ->Arg(1'000'000)
    ->Unit(benchmark::kMillisecond);

}  // namespace
