// Elastic serving with replicated stages (elastic.hpp): single world against MultiWorld, worked by
// hand.
//
// The deployment: a five-layer toy transformer (hidden 512, fp16) in two stages, stage 0 with one
// layer on one worker, stage 1 with four layers on two workers (tp 1, each on its own host of a
// star with 1 GB/s links). Only the MLP up-projection is priced, at 10 us per token per layer, so
// a 100-token prefill takes 1 ms on stage 0 and 4 ms on stage 1; the activations (100 x 512 x
// 2 B = 102,400 B) take about 0.1 ms between hosts. Every request is a 100-token prompt with one
// output token (its prefill is its whole answer) and batches hold one request
// (max_batch_requests 1), so a stage-1 worker finishes one request per 4 ms: two workers serve
// 500 requests/s, one 250/s; stage 0 (one per ms) is never the bottleneck. Four virtual engines
// (stages x ceil(2 stage-1 workers / 1 front) = 2 x 2), two bound to each stage-1 worker, keep
// both busy.
//
// Weights (params_per_layer: 512 x (512 + 2 x 512) + 512^2 + 3 x 512 x 1024 + 2 x 512 =
// 2,622,464, x 2 B = 5,244,928 B per layer; the last stage adds the final norm and LM head,
// (512 x 1000 + 512) x 2 B = 1,025,024 B; the first the embedding, 512 x 1000 x 2 B): stage 1's
// worker holds 4 x 5,244,928 + 1,025,024 = 22,004,736 B, loaded at 1 GB/s in 22.004736 ms;
// stage 0's 6,268,928 B in 6.268928 ms. World creation: 2 s.
#include <gtest/gtest.h>

#include "models/serving/policies.hpp"
#include "models/serving/serving_system.hpp"
#include "test_support.hpp"

using namespace mlsim;
using namespace mlsim::serving;

namespace {

// 10 us per token per layer on the toy GPU, 5 us on "toy-fast" (the MLP up-projection only).
class PerGpuMicrosPerToken final : public CostProvider {
 public:
  std::string_view name() const override { return "test-per-gpu"; }
  std::optional<double> operator_seconds(const OperatorWork& w, const GpuSpec& g) const override {
    if (w.op != op_name(Op::kMlpUpGate)) return 0.0;
    return (g.name == "toy-fast" ? 5e-6 : 10e-6) * static_cast<double>(w.tokens);
  }
  bool total_for(const GpuSpec&, std::string_view) const override { return true; }
};

struct Star {
  explicit Star(int hosts)
      : topo(build_topology(StarSpec{hosts, LinkSpec{Bandwidth{1e9}, Time::ns(100)}})),
        network(engine, topo, Sharing::kMaxMin),
        links(topo, network),
        hardware(topo.nodes().size()),
        speeds(topo.nodes().size()),
        nodes(topo.nodes().size()) {
    for (NodeId h : topo.hosts())
      hardware.set_host(h, HostHardware{&gpu, 1, nullptr, std::nullopt});
    costs.add(std::make_unique<PerGpuMicrosPerToken>());
    compute = std::make_unique<Compute>(engine, hardware, speeds, costs);
  }
  Engine engine;
  Topology topo;
  FluidNetwork network;
  LinkConditions links;
  GpuSpec gpu = fixtures::toy_gpu();
  NodeHardware hardware;
  HostSpeeds speeds;
  NodeHealth nodes;
  CostModel costs;
  std::unique_ptr<Compute> compute;
};

struct Deployment {
  Star star{4};
  std::unique_ptr<ServingSystem> sys;
  Results results;

  // Stage 0: one worker; stage 1: `stage1` workers at the start, `stage1_max` placed.
  Deployment(const std::string& groups, int requests, int stage1, int stage1_max,
             std::vector<ScaleCommand> scale = {}, AutoscalerConfig autoscaler = {},
             std::vector<RequestSpec> later = {}, std::optional<GpuSpec> stage1_gpu = {},
             Time polling = Time::zero(), int stage0 = 1) {
    ServingConfig c;
    c.gpu = star.gpu;
    c.series_interval = Time::ms(10);
    DeploymentConfig d;
    d.name = "toy";
    d.model = fixtures::toy_transformer(5, "toy");
    d.exit_layers = {5};
    d.limits.max_requests = 1;
    d.pp = 2;
    d.stage_layers = {1, 4};
    ElasticConfig e;
    e.process_groups = groups;
    e.semantics = serving_policies().process_groups.get(groups, "test").value;
    e.costs.world_creation = Time::s(2);
    e.costs.polling_overhead = polling;
    e.costs.weight_load = Bandwidth{1e9};
    e.stages = {ElasticStage{1, stage0, stage0, {}, {}},
                ElasticStage{4, stage1, stage1_max, stage1_gpu, {}}};
    e.scale = std::move(scale);
    e.autoscaler = autoscaler;
    d.elastic = e;
    c.deployments.push_back(d);
    std::vector<RequestSpec> specs;
    for (int i = 0; i < requests; ++i)
      specs.push_back({static_cast<std::uint64_t>(i), Time::zero(), 100, 1, 0, -1, {}});
    specs.insert(specs.end(), later.begin(), later.end());
    std::vector<NodeId> hosts;
    for (int i = 0; i < stage0 + stage1_max; ++i) hosts.push_back(star.topo.hosts()[i]);
    sys = std::make_unique<ServingSystem>(
        star.engine, *star.compute, hosts, c, std::make_unique<fixtures::ListSource>(specs),
        RandomStream(1, "t"), RandomStream(1, "e"), &star.network, &star.links);
    sys->watch(star.nodes);
  }
  void run() {
    sys->start();
    star.engine.run();
    sys->finish(results);
  }
  const TimeSeries& timeline() const {
    for (const auto& s : results.series())
      if (s.name == "serving_elastic_timeline") return s;
    throw std::runtime_error("no elastic timeline");
  }
  // Column `col` of the timeline's sample at time t (samples every 10 ms from 0).
  double at(double t, std::size_t col) const {
    const auto& rows = timeline().rows;
    for (const auto& [time, values] : rows)
      if (std::abs(time.seconds() - t) < 1e-9) return values[col];
    throw std::runtime_error("no sample at that time");
  }
  // Requests completed between two sample times.
  double completed(double from, double to) const { return at(to, 0) - at(from, 0); }
  double metric(const std::string& name) const { return results.metrics().at(name); }
};

}  // namespace

// Both stage-1 workers: 500 requests/s. Requests at one per 4 ms per worker: in 0.4 s, 200 (the
// window's ends may cut one request per worker).
TEST(Elastic, TwoReplicasOfTheSecondStageServeTwiceOne) {
  Deployment two("multiworld", 1000, 2, 2);
  two.run();
  EXPECT_NEAR(two.completed(0.1, 0.5), 200, 2);
  Deployment one("multiworld", 1000, 1, 1);
  one.run();
  EXPECT_NEAR(one.completed(0.1, 0.5), 100, 2);
  EXPECT_EQ(two.metric("serving_requests_completed"), 1000);
  EXPECT_EQ(one.metric("serving_requests_completed"), 1000);
  EXPECT_DOUBLE_EQ(two.metric("serving_elastic_availability"), 1.0);
}

// One stage-1 worker fails at 0.5 s (its host goes down). Detection: the failed worker's only
// neighbour is the stage-0 worker, upstream, which hosts their world's store, so it notices
// through the counters: monitor loops started at 0 tick every 0.3 s and check every 10 ticks
// (0, 3, 6 s); the failed worker's last increments were at 0 and 0.3 s, before the 3 s check,
// which therefore still sees its counter advance since the check at 0; the check at 6 s sees it
// unchanged: detected at 6 s (delay 5.5 s).
//  - MultiWorld: from the failure, the two engines bound to the failed worker are stuck (their
//    micro-batches were lost), the other two keep the surviving worker busy: 250/s. At 6 s they
//    are re-bound to it (requests recomputed): still 250/s: half the stage-2 capacity, never 0.
//  - Single world: 250/s until the detection, then nothing until the group is rebuilt over the
//    survivors: world creation 2 s plus the largest reload (stage 1: 22.004736 ms), i.e. from
//    6 s to 8.022004736 s; then 250/s.
TEST(Elastic, AFailedSecondStageReplicaHalvesMultiWorldAndStopsTheSingleWorld) {
  for (const std::string groups : {"multiworld", "single_world"}) {
    SCOPED_TRACE(groups);
    Deployment dep(groups, 4000, 2, 2);
    const NodeId failed_host = dep.star.topo.hosts()[2];  // stage 1's second worker
    dep.star.engine.schedule_at(Time::ms(500), [&] { dep.star.nodes.set_up(failed_host, false); });
    dep.run();
    EXPECT_NEAR(dep.completed(0.1, 0.5), 200, 2);
    EXPECT_NEAR(dep.completed(1.0, 5.9), 0.25 * 4900, 2);
    EXPECT_DOUBLE_EQ(dep.metric("serving_elastic_detection_mean_s"), 5.5);
    EXPECT_EQ(dep.metric("serving_elastic_failures_detected"), 1);
    EXPECT_EQ(dep.metric("serving_requests_completed"), 4000);
    if (groups == "multiworld") {
      EXPECT_NEAR(dep.completed(6.1, 8.0), 0.25 * 1900, 2);
      EXPECT_DOUBLE_EQ(dep.metric("serving_elastic_unavailable_s"), 0.0);
      EXPECT_EQ(dep.metric("serving_elastic_restarts"), 0);
    } else {
      EXPECT_EQ(dep.completed(6.01, 8.02), 0);
      EXPECT_NEAR(dep.completed(8.1, 10.0), 0.25 * 1900, 2);
      EXPECT_NEAR(dep.metric("serving_elastic_unavailable_s"), 2.022004736, 1e-9);
      EXPECT_EQ(dep.metric("serving_elastic_restarts"), 1);
      EXPECT_EQ(dep.at(7.0, 3), 0.0);  // not serving
    }
    // The requests that were in the lost micro-batches or on the reset engines recompute.
    EXPECT_GT(dep.metric("serving_elastic_requests_recomputed"), 0);
  }
}

// Scale-out at 1 s of stage 1 from one worker to two.
//  - MultiWorld: the new worker loads its weights (22.004736 ms) and creates one world with its
//    one live neighbour (stage 0; 2 s): live at 3.022004736 s; the engines are then rebalanced
//    (two move to it) and the deployment serves 500/s instead of 250/s, never stopping.
//  - Single world: the weights load first (to 1.022004736 s), then the group is re-created with
//    it: nothing is served for 2 s (to 3.022004736 s), then 500/s.
TEST(Elastic, AScaleOutJoinsAfterLoadingAndWorldCreation) {
  for (const std::string groups : {"multiworld", "single_world"}) {
    SCOPED_TRACE(groups);
    Deployment dep(groups, 3000, 1, 2, {ScaleCommand{Time::s(1), 1, 1}});
    dep.run();
    EXPECT_NEAR(dep.completed(0.1, 0.9), 0.25 * 800, 2);
    EXPECT_EQ(dep.at(3.02, 4), 2);  // live workers: the new one is not live yet
    EXPECT_EQ(dep.at(3.03, 4), 3);
    EXPECT_NEAR(dep.completed(3.5, 5.5), 0.5 * 2000, 3);
    EXPECT_EQ(dep.metric("serving_elastic_joins"), 1);
    EXPECT_EQ(dep.metric("serving_requests_completed"), 3000);
    if (groups == "multiworld") {
      EXPECT_NEAR(dep.completed(1.1, 3.0), 0.25 * 1900, 2);
      EXPECT_DOUBLE_EQ(dep.metric("serving_elastic_unavailable_s"), 0.0);
    } else {
      EXPECT_EQ(dep.completed(1.04, 3.02), 0);
      EXPECT_NEAR(dep.metric("serving_elastic_unavailable_s"), 2.0, 1e-9);
    }
  }
}

// The autoscaler on stage 1 (one worker, a spare): checks every 100 ms (on the 10 ms samples),
// scales out above 50 waiting requests per front replica, in below 1, cool-down 1 s. All 3,000
// requests wait at 0, so the first check (0.1 s) adds the spare, which joins (MultiWorld) after
// its weights and one world: 0.1 + 0.022004736 + 2 = 2.122004736 s. Then the queue stays long but
// there is no spare left (no more scale-outs). The burst drains at about 7.1 s (2,000-odd requests
// at 500/s after the join); then 50 requests arrive one per 100 ms from 8 s (none waits long), so
// the first check with an empty queue removes the last live stage-1 worker (two live, min 1):
// one scale-in; every request still completes on the other.
TEST(Elastic, AutoscalerAddsTheSpareUnderLoadAndRemovesItWhenTheQueueDrains) {
  AutoscalerConfig a;
  a.enabled = true;
  a.stage = 1;
  a.interval = Time::ms(100);
  a.scale_out_above = 50;
  a.scale_in_below = 1;
  a.min_replicas = 1;
  a.cooldown = Time::s(1);
  std::vector<RequestSpec> trickle;
  for (int i = 0; i < 50; ++i)
    trickle.push_back(
        {static_cast<std::uint64_t>(3000 + i), Time::ms(8000 + 100 * i), 100, 1, 0, -1, {}});
  Deployment dep("multiworld", 3000, 1, 2, {}, a, trickle);
  dep.run();
  EXPECT_EQ(dep.at(0.09, 4), 2);
  EXPECT_EQ(dep.at(2.12, 4), 2);  // joining
  EXPECT_EQ(dep.at(2.13, 4), 3);
  EXPECT_NEAR(dep.completed(2.5, 4.5), 0.5 * 2000, 3);  // both workers
  EXPECT_EQ(dep.metric("serving_elastic_scale_outs"), 1);
  EXPECT_EQ(dep.metric("serving_elastic_scale_ins"), 1);
  EXPECT_EQ(dep.at(9.0, 4), 2);  // scaled in
  EXPECT_EQ(dep.metric("serving_requests_completed"), 3050);
  EXPECT_EQ(dep.metric("serving_elastic_requests_unfinished"), 0);
}

// MultiWorld's polling: one request (100-token prompt, three output tokens: a prefill and two
// decodes, each crossing the stage boundary once) with 1 ms of polling per send finishes exactly
// 3 ms later than without; its first token 1 ms later. The single world does not poll.
TEST(Elastic, MultiWorldPaysItsPollingOncePerActivationSend) {
  auto e2e = [](const std::string& groups, Time polling, const char* metric) {
    Deployment dep(groups, 0, 1, 1, {}, {}, {RequestSpec{0, Time::zero(), 100, 3, 0, -1, {}}}, {},
                   polling);
    dep.run();
    return dep.metric(metric);
  };
  const double base = e2e("multiworld", Time::zero(), "serving_e2e_mean_s");
  EXPECT_NEAR(e2e("multiworld", Time::ms(1), "serving_e2e_mean_s") - base, 3e-3, 1e-9);
  EXPECT_NEAR(e2e("multiworld", Time::ms(1), "serving_ttft_mean_s") -
                  e2e("multiworld", Time::zero(), "serving_ttft_mean_s"),
              1e-3, 1e-9);
  EXPECT_DOUBLE_EQ(e2e("single_world", Time::ms(1), "serving_e2e_mean_s"), base);
}

// A front (stage 0) worker fails: two front workers (hosts 0, 1), two stage-1 workers (hosts 2,
// 3); host 1 fails at 0.5 s. The failed worker is upstream of both its worlds, so it hosted their
// stores: the stage-1 workers' next tick after the failure (ticks every 0.3 s from 0: 0.6 s)
// fails on the store: detected after 0.1 s. MultiWorld re-routes the requests it held to the
// other front worker (counted as re-routed and recomputed), which serves them: the deployment is
// never unavailable. The single world stops and rebuilds over the survivors: 2 s of world
// creation plus the longest reload (stage 1's 22.004736 ms).
TEST(Elastic, AFailedFrontWorkersRequestsAreReroutedOrWaitForTheRebuild) {
  for (const std::string groups : {"multiworld", "single_world"}) {
    SCOPED_TRACE(groups);
    Deployment dep(groups, 2000, 2, 2, {}, {}, {}, {}, Time::zero(), 2);
    const NodeId failed_host = dep.star.topo.hosts()[1];
    dep.star.engine.schedule_at(Time::ms(500), [&] { dep.star.nodes.set_up(failed_host, false); });
    dep.run();
    EXPECT_NEAR(dep.metric("serving_elastic_detection_mean_s"), 0.1, 1e-9);
    EXPECT_EQ(dep.metric("serving_requests_completed"), 2000);
    EXPECT_GT(dep.metric("serving_elastic_requests_recomputed"), 500);
    if (groups == "multiworld") {
      EXPECT_EQ(dep.metric("serving_elastic_requests_rerouted"),
                dep.metric("serving_elastic_requests_recomputed"));
      EXPECT_DOUBLE_EQ(dep.metric("serving_elastic_unavailable_s"), 0.0);
    } else {
      EXPECT_NEAR(dep.metric("serving_elastic_unavailable_s"), 2.022004736, 1e-9);
    }
  }
}

// Stage 1 on a GPU twice as fast (5 us per token per layer): 2 ms per request on one stage-1
// worker, 500 requests/s instead of 250/s; stage 0 stays on the toy GPU (1 ms per request).
TEST(Elastic, AStageRunsItsOwnGpuType) {
  GpuSpec fast = fixtures::toy_gpu();
  fast.name = "toy-fast";
  Deployment slow("multiworld", 1000, 1, 1);
  slow.run();
  Deployment quick("multiworld", 1000, 1, 1, {}, {}, {}, fast);
  quick.run();
  EXPECT_NEAR(slow.completed(0.1, 0.5), 100, 2);
  EXPECT_NEAR(quick.completed(0.1, 0.5), 200, 2);
}

// Property: under random worker failures (each repaired), scale-outs and scale-ins, with either
// process-group policy, every request finishes or is reported dropped, no request is left held
// or queued, and the KV pools are empty at the end.
TEST(Elastic, EveryRequestFinishesOrIsDroppedUnderRandomFailuresAndScaling) {
  for (const std::string groups : {"multiworld", "single_world"})
    for (std::uint64_t seed = 1; seed <= 6; ++seed) {
      SCOPED_TRACE(groups + " seed " + std::to_string(seed));
      Deployment dep(groups, 3000, 1, 3);
      RandomStream rng(seed, "elastic.property");
      for (int k = 0; k < 12; ++k) {
        const Time at = Time::from_seconds(rng.uniform() * 12.0);
        const double what = rng.uniform();
        const auto host_index = static_cast<std::size_t>(rng.uniform() * 4.0) % 4;
        if (what < 0.5) {
          const NodeId h = dep.star.topo.hosts()[host_index];
          const Time down = Time::from_seconds(0.1 + rng.uniform() * 3.0);
          dep.star.engine.schedule_at(at, [&dep, h] { dep.star.nodes.set_up(h, false); });
          dep.star.engine.schedule_at(at + down, [&dep, h] { dep.star.nodes.set_up(h, true); });
        } else {
          const int delta = what < 0.8 ? 1 : -1;
          dep.star.engine.schedule_at(at, [&dep, delta] { dep.sys->elastic()->scale(1, delta); });
        }
      }
      // Whatever the random events left, every worker comes back at 20 s.
      dep.star.engine.schedule_at(Time::s(20), [&dep] {
        for (NodeId h : dep.star.topo.hosts()) dep.star.nodes.set_up(h, true);
        dep.sys->elastic()->scale(1, 1);
      });
      dep.run();
      EXPECT_EQ(dep.metric("serving_elastic_requests_unfinished"), 0);
      EXPECT_EQ(dep.metric("serving_requests_completed") + dep.metric("serving_requests_dropped"),
                3000);
      EXPECT_EQ(dep.sys->in_system(), 0);
      for (const auto& r : dep.sys->replicas()) {
        EXPECT_EQ(r->kv().used(), 0);
        EXPECT_EQ(r->waiting_count(), 0u);
      }
    }
}
