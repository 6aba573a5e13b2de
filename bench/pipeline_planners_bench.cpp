// AutoPipe's planners on the shipped profiles: the dynamic program over the bottleneck time
// (dp_plan) against the branch and bound over the 1F1B steady-state time (autopipe_plan), both on
// 4 identical hosts with 25 Gbps links and 5 us each way (the dynamic scenarios' platform,
// workloads/scenarios/pipeline_resnet50_dynamic.json), the profile's own GPU at speed 1, and
// host 1 at half speed (the scenario's slowdown). Counters: the plan's steady-state time (ms)
// and, for the DP, its bottleneck time (ms).
#include <benchmark/benchmark.h>

#include <string>

#include "models/pipeline/autopipe_planner.hpp"
#include "models/pipeline/dp_planner.hpp"
#include "sim_core/hardware/dnn_profile.hpp"

namespace {

using namespace mlsim;
using namespace mlsim::pipeline;

struct Job {
  std::vector<LayerCost> layers;
  Conditions c;
};

Job job(const std::string& profile, double slow_host_speed) {
  Job j;
  j.layers = layer_costs(read_pipedream_graph(std::string(MLSIM_SOURCE_DIR) + "/" + profile));
  for (int h = 0; h < 4; ++h) {
    j.c.hosts.push_back(profiled_host(j.layers, h == 1 ? slow_host_speed : 1));
    j.c.bandwidth.push_back(25e9 / 8);
    j.c.latency_out.push_back(5e-6);
    j.c.latency_in.push_back(5e-6);
  }
  return j;
}

const char* const kProfiles[] = {"workloads/dnn/pipedream/vgg16/graph.txt",
                                 "workloads/dnn/pipedream/resnet50/graph.txt",
                                 "workloads/dnn/piper/bert32/graph_mb4.txt"};

template <bool kDp>
void plan(benchmark::State& state) {
  const Job j = job(kProfiles[state.range(0)], state.range(1) == 0 ? 1.0 : 0.5);
  Plan p;
  for (auto _ : state) {
    p = kDp ? dp_plan(j.layers, j.c) : autopipe_plan(j.layers, j.c);
    benchmark::DoNotOptimize(p);
  }
  state.SetLabel(std::to_string(j.layers.size()) + " layers");
  state.counters["steady_ms"] = p.seconds_per_minibatch * 1e3;
  if (kDp) state.counters["bottleneck_ms"] = p.bottleneck_seconds * 1e3;
  state.counters["stages"] = static_cast<double>(p.partition.stages());
}

void args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"profile", "slow"})->Unit(benchmark::kMillisecond);
  for (int profile = 0; profile < 3; ++profile)
    for (int slow = 0; slow < 2; ++slow) b->Args({profile, slow});
}

BENCHMARK(plan<true>)->Name("dp_plan")->Apply(args);
BENCHMARK(plan<false>)->Name("branch_and_bound")->Apply(args)->Iterations(1);

}  // namespace
