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

#include <algorithm>
#include <cmath>
#include <functional>

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
             Time polling = Time::zero(), int stage0 = 1,
             const std::function<void(ElasticConfig&)>& tweak = {}) {
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
    if (tweak) tweak(e);
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

// An autoscaler on stage 1 checking every 100 ms, at least one worker, with the given cool-down;
// each test then sets its signal and thresholds.
AutoscalerConfig stage_one_autoscaler(Time cooldown) {
  AutoscalerConfig a;
  a.enabled = true;
  a.stage = 1;
  a.interval = Time::ms(100);
  a.min_replicas = 1;
  a.cooldown = cooldown;
  return a;
}

// 50 one-token requests of 100 prompt tokens, one every 100 ms from `start_ms`, ids from
// `first_id` on (after a burst's ids).
std::vector<RequestSpec> trickle_after_burst(std::uint64_t first_id, std::int64_t start_ms) {
  std::vector<RequestSpec> trickle;
  for (int i = 0; i < 50; ++i)
    trickle.push_back({first_id + static_cast<std::uint64_t>(i),
                       Time::ms(start_ms + 100 * i),
                       100,
                       1,
                       0,
                       -1,
                       {}});
  return trickle;
}

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
    // GPU-hours (one GPU per worker): the front and the surviving stage-1 worker for the whole
    // run (the single world's survivors stay allocated through the rebuild), the failed one until
    // its failure at 0.5 s (never repaired).
    EXPECT_NEAR(dep.metric("serving_elastic_gpu_hours") * 3600,
                2 * dep.metric("serving_makespan_s") + 0.5, 1e-9);
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
    // GPU-hours (one GPU per worker): two workers for the whole run, the new one from the
    // scale-out at 1 s (its GPUs are held while it loads and joins); the spare before that is not
    // counted.
    const double span = dep.metric("serving_makespan_s");
    EXPECT_NEAR(dep.metric("serving_elastic_gpu_hours") * 3600, 2 * span + (span - 1.0), 1e-9);
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
  AutoscalerConfig a = stage_one_autoscaler(Time::s(1));
  a.scale_out_above = 50;
  a.scale_in_below = 1;
  const auto trickle = trickle_after_burst(3000, 8000);
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

// A scale-out blocked for lack of a spare changes nothing and so does not start the cool-down.
// Stage 1 runs on both of its placed workers (no spare); 600 one-token requests at 0 (two workers
// finish one per 2 ms, so the burst is admitted by about 1.2 s), then one request per 100 ms from
// 2 s to 6.9 s (a lone worker serves each in about 5 ms: no queue). Queue signal, checked every
// 100 ms: out above 50 waiting per front, in below 1, min 1 worker, cool-down 5 s. The check at
// 0.1 s sees about 550 waiting and wants a spare there is none of. Were that to start the
// cool-down, the next action could come at 5.1 s at the earliest; instead the first check after
// the burst is admitted (about 1.2-1.3 s) scales in, so by 2 s one stage-1 worker is live (the
// timeline's live workers count stage 0's too: 3 at the start, 2 after the scale-in).
TEST(Elastic, AScaleOutBlockedForLackOfASpareDoesNotStartTheCooldown) {
  AutoscalerConfig a = stage_one_autoscaler(Time::s(5));
  a.scale_out_above = 50;
  a.scale_in_below = 1;
  const auto trickle = trickle_after_burst(600, 2000);
  Deployment dep("multiworld", 600, 2, 2, {}, a, trickle);
  dep.run();
  EXPECT_EQ(dep.at(0.09, 4), 3);
  EXPECT_EQ(dep.at(1.0, 4), 3);  // still loaded: the blocked scale-outs changed nothing
  EXPECT_EQ(dep.at(2.0, 4), 2);  // scaled in well before the 5.1 s a started cool-down allows
  EXPECT_EQ(dep.metric("serving_elastic_scale_outs"), 0);
  EXPECT_EQ(dep.metric("serving_elastic_scale_ins"), 1);
  EXPECT_EQ(dep.metric("serving_requests_completed"), 650);
  EXPECT_EQ(dep.metric("serving_elastic_requests_unfinished"), 0);
}

// The autoscaler on the SLO attainment of the requests completed since its previous check
// (`signal: "slo_attainment"`), checked every 100 ms: out below 0.5, in above 0.9, min 1 worker;
// stage 1 starts on one worker of three placed (two spares). 1,500 one-token requests at 0: one
// stage-1 worker completes one per 4 ms, the k-th (from 0) at about 5.3 + 4k ms (stage 0's 1 ms,
// the transfer, stage 1's 4 ms), and its TTFT (= e2e) is that time: the 2 s TTFT SLO is met up to
// k = 498 (1,997.3 ms) and missed from k = 499 (2,001.3 ms). Until 2.0 s every check sees
// attainment 1, above 0.9, but one worker is the minimum: nothing. The check at 2.1 s sees only
// misses (0): scale-out, the spare live at 2.1 + 0.022004736 (weights) + 2 (one world) =
// 4.122004736 s. Every later completion of the burst misses (each waited over 2 s), so:
//  - cool-down 1 s: the next scale-out waits for the check at 3.1 s (3.1 - 2.1 = the cool-down),
//    live at 5.122004736 s. Checks at 4.1 and 5.1 s want a third and find no spare (a decision
//    all the same: it restarts the cool-down). The burst ends by about 5.1 s (1,030 done by
//    4.122 s at 250/s, the other 470 at 500/s); checks with no completion decide nothing. Then
//    one request every 100 ms from 6.05 s, each done in about 5.3 ms: the check at 6.1 s sees
//    attainment 1 and removes a worker (3 live > 1), the one at 7.1 s (after the cool-down) the
//    next; then one is the minimum. Two scale-outs, two scale-ins.
//  - cool-down 0: the second scale-out is at the next check, 2.2 s (live at 4.222004736 s), and
//    the scale-ins come at 6.1 and 6.2 s.
// The timeline's live workers (column 4) count the front worker too.
TEST(Elastic, AnSloAutoscalerScalesOutWhenAttainmentFallsAndInWhenItRecoversAfterItsCooldown) {
  for (const Time cooldown : {Time::s(1), Time::zero()}) {
    SCOPED_TRACE(cooldown.seconds());
    AutoscalerConfig a = stage_one_autoscaler(cooldown);
    a.slo_signal = true;
    a.scale_out_below = 0.5;
    a.scale_in_above = 0.9;
    const auto trickle = trickle_after_burst(1500, 6050);
    Deployment dep("multiworld", 1500, 1, 3, {}, a, trickle);
    dep.run();
    EXPECT_DOUBLE_EQ(dep.at(2.0, 8), 1.0);  // the timeline's attainment over (1.99, 2.0] s
    EXPECT_DOUBLE_EQ(dep.at(2.1, 8), 0.0);
    EXPECT_EQ(dep.at(4.12, 4), 2);  // the first spare joining
    EXPECT_EQ(dep.at(4.13, 4), 3);
    EXPECT_EQ(dep.metric("serving_elastic_scale_outs"), 2);
    EXPECT_EQ(dep.metric("serving_elastic_scale_ins"), 2);
    EXPECT_EQ(dep.metric("serving_requests_completed"), 1550);
    EXPECT_EQ(dep.metric("serving_elastic_requests_unfinished"), 0);
    if (cooldown > Time::zero()) {
      EXPECT_EQ(dep.at(4.23, 4), 3);  // the second waited for the cool-down
      EXPECT_EQ(dep.at(5.12, 4), 3);
      EXPECT_EQ(dep.at(5.13, 4), 4);
      EXPECT_EQ(dep.at(6.09, 4), 4);
      EXPECT_EQ(dep.at(6.11, 4), 3);
      EXPECT_EQ(dep.at(6.21, 4), 3);  // the next scale-in waits for the cool-down too
      EXPECT_EQ(dep.at(7.09, 4), 3);
      EXPECT_EQ(dep.at(7.11, 4), 2);
    } else {
      EXPECT_EQ(dep.at(4.22, 4), 3);
      EXPECT_EQ(dep.at(4.23, 4), 4);
      EXPECT_EQ(dep.at(6.09, 4), 4);
      EXPECT_EQ(dep.at(6.11, 4), 3);
      EXPECT_EQ(dep.at(6.21, 4), 2);
    }
    EXPECT_EQ(dep.at(8.0, 4), 2);
  }
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

// Latency over time (the timeline's ttft_mean_s, e2e_mean_s, slo_attainment: over the requests
// completed since the previous sample). 1,500 one-token requests at 0 on two stage-1 workers
// finish at 500/s, so by 3 s: each one's TTFT (= e2e) is its completion time. The sample at 1.0 s
// covers completions in (0.99, 1.0] s: mean within that window, all under the 2 s TTFT SLO; the
// sample at 2.5 s covers (2.49, 2.5]: past the SLO, attainment 0. Before the first completion
// (the 0 s sample) there is no latency: empty.
TEST(Elastic, TheTimelineCarriesLatencyOverTime) {
  Deployment dep("multiworld", 1500, 2, 2);
  dep.run();
  EXPECT_TRUE(std::isnan(dep.at(0.0, 6)));
  EXPECT_GT(dep.at(1.0, 6), 0.99);
  EXPECT_LE(dep.at(1.0, 6), 1.0);
  EXPECT_DOUBLE_EQ(dep.at(1.0, 6), dep.at(1.0, 7));
  EXPECT_DOUBLE_EQ(dep.at(1.0, 8), 1.0);
  EXPECT_GT(dep.at(2.5, 7), 2.49);
  EXPECT_LE(dep.at(2.5, 7), 2.5);
  EXPECT_DOUBLE_EQ(dep.at(2.5, 8), 0.0);
}

namespace {

// Two requests at 0 on two stage-1 workers A and B. start() leaves virtual engines 0 and 1 on B
// and 2 and 3 on A (the first two engines with the fewest requests move off A, which held all
// four). Request 0 (a 100-token prompt, one output token) takes engine 0, which holds nothing and
// is re-bound to the least-bound worker, A (a tie at two each: the first); request 1 (1,000
// output tokens) takes engine 1, staying on B (one bound, against three). Request 0 is done at
// about 5.2 ms; request 1 decodes at about 51 us per token. At 20 ms stage 1 scales in: the last
// live worker, B, the one request 1 is on.
struct ScaleInCase {
  explicit ScaleInCase(const std::function<void(ElasticConfig&)>& tweak, bool scale_in = true)
      : dep("multiworld", 0, 2, 2,
            scale_in ? std::vector<ScaleCommand>{ScaleCommand{Time::ms(20), 1, -1}}
                     : std::vector<ScaleCommand>{},
            {},
            {RequestSpec{0, Time::zero(), 100, 1, 0, -1, {}},
             RequestSpec{1, Time::zero(), 100, 1000, 0, -1, {}}},
            {}, Time::zero(), 1, tweak) {
    dep.run();
  }
  Deployment dep;
};

}  // namespace

// Immediate scale-in (the default): request 1's KV on B is lost, it recomputes. Draining without
// KV migration: its engine holds KV, so it stays until the request is done; B leaves then (the
// drain lasts from 20 ms to the request's end, the run's last completion), nothing recomputed,
// and the request ends exactly when it would without a scale-in. With a drain timeout shorter than
// that, the rest is taken out as an immediate scale-in would be: one recompute, one timeout.
TEST(Elastic, ADrainingScaleInWaitsForTheKvItHoldsOrTimesOut) {
  const ScaleInCase none([](ElasticConfig&) {}, false);
  const double end = none.dep.metric("serving_makespan_s");
  ASSERT_GT(end, 0.04);
  const ScaleInCase immediate([](ElasticConfig&) {});
  EXPECT_EQ(immediate.dep.metric("serving_elastic_requests_recomputed"), 1);
  const ScaleInCase drain([](ElasticConfig& e) { e.drain_scale_in = true; });
  EXPECT_EQ(drain.dep.metric("serving_elastic_requests_recomputed"), 0);
  EXPECT_EQ(drain.dep.metric("serving_elastic_drains"), 1);
  EXPECT_EQ(drain.dep.metric("serving_elastic_drain_timeouts"), 0);
  EXPECT_DOUBLE_EQ(drain.dep.metric("serving_makespan_s"), end);
  EXPECT_NEAR(drain.dep.metric("serving_elastic_drain_mean_s"), end - 0.020, 1e-9);
  EXPECT_EQ(drain.dep.at(0.01, 4), 3);  // live workers; a draining one is not counted
  EXPECT_EQ(drain.dep.at(0.03, 4), 2);
  EXPECT_EQ(drain.dep.metric("serving_elastic_scale_ins"), 1);
  const ScaleInCase timeout([](ElasticConfig& e) {
    e.drain_scale_in = true;
    e.drain_timeout = Time::ms(10);
  });
  EXPECT_EQ(timeout.dep.metric("serving_elastic_requests_recomputed"), 1);
  EXPECT_EQ(timeout.dep.metric("serving_elastic_drain_timeouts"), 1);
  EXPECT_NEAR(timeout.dep.metric("serving_elastic_drain_mean_s"), 0.010, 1e-9);
  EXPECT_EQ(timeout.dep.metric("serving_requests_completed"), 2);
}

// Draining with KV migration: at 20 ms engine 1 (holding request 1's KV) migrates to A once its
// micro-batch in flight is done: the KV of its computed tokens in stage
// 1's four layers, 2 x 512 (K and V, 8 KV heads x 64) x 2 B = 2,048 B per token per layer, so
// 8,192 B per token: a multiple of 8,192 between 101 and 1,100 tokens' worth. It crosses the star
// (two 1 GB/s links of 100 ns) as one send: bytes / 1 GB/s + 200 ns. Nothing recomputes, the drain
// ends when the migration does, and request 1 ends exactly the transfer's time later than
// without a scale-in (A is idle since request 0 ended: the iterations take as long there).
TEST(Elastic, KvMigrationMovesTheEngineWithItsKvInsteadOfRecomputing) {
  const ScaleInCase none([](ElasticConfig&) {}, false);
  const ScaleInCase migrate([](ElasticConfig& e) {
    e.drain_scale_in = true;
    e.kv_migration = true;
  });
  const auto& m = migrate.dep;
  EXPECT_EQ(m.metric("serving_elastic_requests_recomputed"), 0);
  EXPECT_EQ(m.metric("serving_elastic_kv_migrations"), 1);
  EXPECT_EQ(m.metric("serving_elastic_requests_migrated"), 1);
  const double bytes = m.metric("serving_elastic_kv_migrated_bytes");
  EXPECT_EQ(std::fmod(bytes, 8192.0), 0.0);
  EXPECT_GT(bytes, 8192.0 * 100);
  EXPECT_LT(bytes, 8192.0 * 1100);
  const double transfer = bytes / 1e9 + 200e-9;
  EXPECT_NEAR(m.metric("serving_makespan_s") - none.dep.metric("serving_makespan_s"), transfer,
              1e-9);
  EXPECT_EQ(m.metric("serving_elastic_drain_timeouts"), 0);
  // The drain: the rest of the iteration in flight at 20 ms (under 60 us), then the transfer.
  EXPECT_GE(m.metric("serving_elastic_drain_mean_s"), transfer - 1e-9);
  EXPECT_LT(m.metric("serving_elastic_drain_mean_s"), transfer + 60e-6);
  EXPECT_EQ(m.metric("serving_requests_completed"), 2);
}

// Boundary routing. Two requests at 0: A (100-token prompt, 1,000 output tokens) and B (100
// tokens, one output). The four engines start two per stage-1 worker (the first two on worker 1,
// the join's rebalancing moving them off worker 0). A takes the first engine, B the second (both
// on worker 1), each bound afresh as it is idle:
//  - round_robin: A's engine goes to worker 0 (the first in turn), B's to worker 1 (the next):
//    43.96 ms and 4 ms, as below, by turns rather than by load.
//  Under the other two A's engine stays (its worker has one engine fewer without it, no work):
//  - fewest_engines: its worker has 1 engine without it against 2, so it stays, and A's worker
//    runs both: A's prefill 4 ms + 999 decodes x 4 layers x 10 us = 43.96 ms, plus B's 4 ms
//    prefill = 47.96 ms busy; the other worker does nothing.
//  - least_work: A's worker has A's 1,100 tokens to process, the other none, so B's engine moves
//    there: 43.96 ms and exactly 4 ms.
TEST(Elastic, LeastWorkRoutingSendsTheNextRequestToTheLessLoadedStageWorker) {
  const std::vector<RequestSpec> ab = {{0, Time::zero(), 100, 1000, 0, -1, {}},
                                       {1, Time::zero(), 100, 1, 0, -1, {}}};
  for (const auto routing :
       {StageRouting::kRoundRobin, StageRouting::kFewestEngines, StageRouting::kLeastWork}) {
    Deployment dep("multiworld", 0, 2, 2, {}, {}, ab, {}, Time::zero(), 1,
                   [&](ElasticConfig& e) { e.routing = routing; });
    dep.run();
    const double span = dep.metric("serving_makespan_s");
    const auto& util = dep.results.details()["serving_elastic"]["stages"][1]["worker_utilisation"];
    std::vector<double> busy = {util[0].get<double>() * span, util[1].get<double>() * span};
    std::sort(busy.begin(), busy.end());
    if (routing != StageRouting::kFewestEngines) {
      EXPECT_NEAR(busy[0], 0.004, 1e-12);
      EXPECT_NEAR(busy[1], 0.004 + 999 * 40e-6, 1e-12);
    } else {
      EXPECT_NEAR(busy[0], 0, 1e-12);
      EXPECT_NEAR(busy[1], 0.008 + 999 * 40e-6, 1e-12);
    }
    EXPECT_TRUE(dep.sys->elastic()->routers_consistent());
  }
}

// Property: under random worker failures (each repaired), scale-outs and scale-ins (immediate,
// draining, draining with KV migration), with either process-group policy, and 200 decoding
// requests beside the one-token burst (so that engines hold KV when they move), every request
// finishes or is reported dropped, no request is left held
// or queued, and the KV pools are empty at the end; under either boundary router, whose counters
// stay equal to a walk over the engines.
TEST(Elastic, EveryRequestFinishesOrIsDroppedUnderRandomFailuresAndScaling) {
  for (const std::string groups : {"multiworld", "single_world"})
    for (std::uint64_t seed = 1; seed <= 9; ++seed) {
      SCOPED_TRACE(groups + " seed " + std::to_string(seed));
      // The seeds take the three boundary routers in turn.
      const auto routing = seed % 3 == 0   ? StageRouting::kRoundRobin
                           : seed % 3 == 1 ? StageRouting::kLeastWork
                                           : StageRouting::kFewestEngines;
      // Seeds 4-6 drain on scale-in, 7-9 also migrate KV.
      const bool drain = seed > 3, migrate = seed > 6;
      std::vector<RequestSpec> decoding;
      for (int i = 0; i < 200; ++i)
        decoding.push_back(
            {static_cast<std::uint64_t>(3000 + i), Time::ms(37 * i), 100, 40, 0, -1, {}});
      Deployment dep(groups, 3000, 1, 3, {}, {}, decoding, {}, Time::zero(), 1,
                     [&](ElasticConfig& e) {
                       e.drain_scale_in = drain;
                       e.kv_migration = migrate;
                       e.drain_timeout = Time::ms(300);
                       e.routing = routing;
                     });
      // The routers' counters (engines and tokens per stage-1 worker) equal a walk over every
      // engine's planned path throughout.
      int inconsistent = 0;
      for (int ms = 5; ms < 14000; ms += 50)
        dep.star.engine.schedule_at(Time::ms(ms), [&dep, &inconsistent] {
          inconsistent += dep.sys->elastic()->routers_consistent() ? 0 : 1;
        });
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
      EXPECT_EQ(inconsistent, 0);
      EXPECT_TRUE(dep.sys->elastic()->routers_consistent());
      EXPECT_EQ(dep.metric("serving_elastic_requests_unfinished"), 0);
      EXPECT_EQ(dep.metric("serving_requests_completed") + dep.metric("serving_requests_dropped"),
                3200);
      EXPECT_EQ(dep.sys->in_system(), 0);
      for (const auto& r : dep.sys->replicas()) {
        EXPECT_EQ(r->kv().used(), 0);
        EXPECT_EQ(r->waiting_count(), 0u);
      }
    }
}

// A join's rebalancing (`elastic.rebalance`). Stage 1 starts on one worker (of two placed); four
// requests at 0 (100-token prompts; 3,000, 1,000, 1,000 and 1,000 output tokens) take the four
// virtual engines, one each (the least loaded engine). Stage 1 scales out at 10 ms with no world
// creation (tweaked to 0): the new worker joins after its weights, 22.004736 ms, at 32.004736
// ms. By then the four prefills took 16 ms of stage 1 (4 x 4 ms) and each engine decoded about
// (32 - 16) ms / (4 engines x 40 us) = 100 tokens, so g ~ 100 generated each: the engines hold
// w = 2,900, 900, 900 and 900 tokens still to process, 5,600 in all, and a recompute redoes
// x = 100 + g ~ 200 tokens each.
//  - fewest_engines: the target is two engines per worker; the two with the fewest requests (one
//    each: the first two) move and recompute: 2 recomputed, 2 + 2 engines bound.
//  - least_work: from the loaded worker (5,600) to the new one (0), an engine moves iff 0 + w + x <
//    5,600; the engine leaving the smallest larger side max(5,600 - w, w + x) goes first: engine
//    0 (max(2,700, 3,100) = 3,100, against 4,700 for a 900-token engine). Then the new worker
//    holds about 3,100 and the old one 2,700: the most loaded is the new one, whose only engine
//    has just moved, so it stops: 1 recomputed, 3 + 1 engines bound. (These choices hold for any
//    g from 0 to 600.) The run also ends sooner: the 3,000-token request decodes alone on the new
//    worker instead of beside a 1,000-token one.
TEST(Elastic, AJoinUnderLeastWorkMovesOnlyTheEnginesThatEvenTheWork) {
  const std::vector<RequestSpec> four = {{0, Time::zero(), 100, 3000, 0, -1, {}},
                                         {1, Time::zero(), 100, 1000, 0, -1, {}},
                                         {2, Time::zero(), 100, 1000, 0, -1, {}},
                                         {3, Time::zero(), 100, 1000, 0, -1, {}}};
  auto run = [&](Rebalancing rebalancing, std::int64_t& bound0, std::int64_t& bound1) {
    Deployment dep("multiworld", 0, 1, 2, {ScaleCommand{Time::ms(10), 1, 1}}, {}, four, {},
                   Time::zero(), 1, [&](ElasticConfig& e) {
                     e.costs.world_creation = Time::zero();
                     e.rebalancing = rebalancing;
                   });
    // Just after the join (32.004736 ms).
    dep.star.engine.schedule_at(Time::us(32010), [&] {
      bound0 = dep.sys->elastic()->bound_engines(1, 0);
      bound1 = dep.sys->elastic()->bound_engines(1, 1);
    });
    dep.run();
    EXPECT_EQ(dep.metric("serving_elastic_joins"), 1);
    EXPECT_EQ(dep.metric("serving_requests_completed"), 4);
    EXPECT_TRUE(dep.sys->elastic()->routers_consistent());
    return std::make_pair(dep.metric("serving_elastic_requests_recomputed"),
                          dep.metric("serving_makespan_s"));
  };
  std::int64_t c0 = 0, c1 = 0, w0 = 0, w1 = 0;
  const auto [counts_recomputed, counts_makespan] = run(Rebalancing::kFewestEngines, c0, c1);
  const auto [work_recomputed, work_makespan] = run(Rebalancing::kLeastWork, w0, w1);
  EXPECT_EQ(counts_recomputed, 2);
  EXPECT_EQ(c0, 2);
  EXPECT_EQ(c1, 2);
  EXPECT_EQ(work_recomputed, 1);
  EXPECT_EQ(w0, 3);
  EXPECT_EQ(w1, 1);
  EXPECT_LT(work_makespan, counts_makespan);
}

// MultiWorld's host-side polling rounds (`poll_step`, 1 ms here, polling_overhead 0): a
// completion is noticed one round of the receiving worker's event loop later, one poll per
// operation pending there.
//  - One request (three output tokens: three boundary crossings), two front workers and one
//    stage-1 worker: the stage-1 worker posts a receive per upstream world (2), so each arrival
//    waits 2 ms: end-to-end 6 ms later, first token 2 ms later. The request's own front runs one
//    engine in flight (itself): no round before its micro-batches.
//  - Two one-token requests A and B at 0 on one front worker (engines 0 and 1, both in flight at
//    once): each micro-batch the front launches waits a round in which the other engine polls
//    (1 ms), and each arrival at stage 1 a round of its one receive (1 ms). Without polling: A's
//    stage 0 [0, 1] ms, transfer t, stage 1 [1 + t, 5 + t]; B's stage 0 [1, 2], stage 1 [5 + t,
//    9 + t]. With it: A's stage 0 [0, 2] (1 ms compute, 1 ms round), noticed at 3 + t, stage 1
//    [3 + t, 7 + t]; B's stage 0 [2, 4], noticed at 5 + t, stage 1 [7 + t, 11 + t]. Both end 2 ms
//    later.
//  - The single world does not poll.
TEST(Elastic, MultiWorldNoticesACompletionOnePollingRoundLater) {
  auto run = [](const std::string& groups, Time step, int stage0,
                const std::vector<RequestSpec>& specs) {
    Deployment dep(groups, 0, 1, 1, {}, {}, specs, {}, Time::zero(), stage0,
                   [&](ElasticConfig& e) { e.costs.poll_step = step; });
    dep.run();
    return std::make_pair(dep.metric("serving_e2e_mean_s"), dep.metric("serving_ttft_mean_s"));
  };
  const std::vector<RequestSpec> one = {{0, Time::zero(), 100, 3, 0, -1, {}}};
  const auto base = run("multiworld", Time::zero(), 2, one);
  const auto polled = run("multiworld", Time::ms(1), 2, one);
  EXPECT_NEAR(polled.first - base.first, 6e-3, 1e-9);
  EXPECT_NEAR(polled.second - base.second, 2e-3, 1e-9);
  const std::vector<RequestSpec> ab = {{0, Time::zero(), 100, 1, 0, -1, {}},
                                       {1, Time::zero(), 100, 1, 0, -1, {}}};
  const auto ab_base = run("multiworld", Time::zero(), 1, ab);
  const auto ab_polled = run("multiworld", Time::ms(1), 1, ab);
  EXPECT_NEAR(ab_polled.first - ab_base.first, 2e-3, 1e-9);
  EXPECT_DOUBLE_EQ(run("single_world", Time::ms(1), 1, ab).first,
                   run("single_world", Time::zero(), 1, ab).first);
}

// The busy-polling CPU time (serving_elastic_poll_cpu_hours): one one-token request on one front
// and `stage1` stage-1 workers. The front's loop polls while its engine is in flight, from the
// arrival at 0 to the request's end, the makespan; each stage-1 worker's loop polls its receive
// from the live front for the whole run: (1 + stage1) x makespan, whatever poll_step is. The
// single world does not poll: 0.
TEST(Elastic, MultiWorldBusyPollsACorePerWorkerWhileItAwaitsAnOperation) {
  for (const int stage1 : {1, 2}) {
    for (const Time step : {Time::zero(), Time::us(5)}) {
      Deployment dep("multiworld", 0, stage1, stage1, {}, {},
                     {RequestSpec{0, Time::zero(), 100, 1, 0, -1, {}}}, {}, Time::zero(), 1,
                     [&](ElasticConfig& e) { e.costs.poll_step = step; });
      dep.run();
      EXPECT_NEAR(dep.metric("serving_elastic_poll_cpu_hours") * 3600,
                  (1 + stage1) * dep.metric("serving_makespan_s"), 1e-12);
    }
  }
  Deployment single("single_world", 0, 1, 1, {}, {},
                    {RequestSpec{0, Time::zero(), 100, 1, 0, -1, {}}});
  single.run();
  EXPECT_EQ(single.metric("serving_elastic_poll_cpu_hours"), 0);
}
