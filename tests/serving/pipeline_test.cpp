// Pipeline-parallel replicas (replica.hpp, point_to_point.hpp) against schedules worked by hand.
//
// Simple numbers: a two-layer toy transformer (hidden 512, fp16: 1,024 B of activations per
// token) whose only priced operator is the MLP up-projection at 10 us per token (every other
// operator is free), so a layer costs 10 us per token: a 100-token prefill 1,000 us per layer, a
// decode step 10 us per layer. Two stages of one layer each (tp 1).
#include <gtest/gtest.h>

#include <map>

#include "models/serving/policies.hpp"
#include "models/serving/replica.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "test_support.hpp"

using namespace mlsim;
using namespace mlsim::serving;

namespace {

// Stages on the hosts of fixtures::TwoHostStar (1 GB/s links, 200 ns host to host).
struct Harness : fixtures::TwoHostStar {
  OperatorTimer timer{costs, gpu, Dtype::kFp16};
  std::unique_ptr<PointToPoint> p2p;
  fixtures::TimesRecorder rec{engine};
  std::unique_ptr<Replica> replica;
  std::vector<std::unique_ptr<Request>> requests;

  // Stage s on host stage_hosts[s]; `host_link` between GPUs of one host; `p2p_costs` the
  // collective layer's launch and protocol costs of the send/recv.
  Harness(std::vector<int> stage_hosts, HostLink host_link, collectives::CostModel p2p_costs = {}) {
    p2p = std::make_unique<PointToPoint>(engine, network, &links, p2p_costs);
    const TransformerShape m = fixtures::toy_transformer(2, "toy");
    ReplicaConfig cfg;
    cfg.name = "pp";
    for (int h : stage_hosts) cfg.gpus.push_back(host(h));
    cfg.stage_layers.assign(stage_hosts.size(), 2 / static_cast<int>(stage_hosts.size()));
    cfg.host_link = host_link;
    replica = std::make_unique<Replica>(
        engine, *compute, cfg,
        std::make_unique<IterationCostModel>(m, 1, timer, std::vector<std::int32_t>{m.layers}),
        KvBlockPool(1 << 20, 16), std::vector<std::int32_t>{m.layers}, 0, BatchLimits{},
        make_scheduler("continuous", "test"), rec, p2p.get());
  }
  void add(std::uint64_t id, Time at, int prompt, int output) {
    auto r = std::make_unique<Request>();
    r->spec = {id, at, prompt, output, 0, -1, {}};
    Request& ref = *r;
    requests.push_back(std::move(r));
    engine.schedule_at(at, [this, &ref] { replica->submit(ref); });
  }
};

// Within 2 ns: Compute rounds each piece of work to whole nanoseconds.
void expect_at(Time t, double us) {
  EXPECT_NEAR(static_cast<double>(t.count_ns()), us * 1e3, 2.0) << "expected " << us << " us";
}

// A host link of 1.024 GB/s with 1 us latency: a token's 1,024 B take 1 us, plus 1 us.
const HostLink kNvLink{Bandwidth{1.024e9}, Time::us(1)};

}  // namespace

TEST(Pipeline, TwoStagePrefillAndDecodeOnOneHost) {
  // One request, prompt 100, output 2, both stages on host 0:
  //   prefill: stage 0 1,000 us; activations 102,400 B at 1.024 GB/s = 100 us + 1 us latency;
  //            stage 1 1,000 us: first token at 2,101 us;
  //   decode:  stage 0 10 us; 1,024 B = 1 us + 1 us; stage 1 10 us: done at 2,123 us.
  // (One stage with both layers: 2,000 us and 2,020 us.)
  Harness h({0, 0}, kNvLink);
  h.add(1, Time::zero(), 100, 2);
  h.engine.run();
  expect_at(h.rec.first.at(1), 2101);
  expect_at(h.rec.done.at(1), 2123);
  EXPECT_EQ(h.replica->activation_bytes(), 101 * 1024);
  EXPECT_EQ(h.p2p->bytes_sent(), 101 * 1024);
  EXPECT_EQ(h.p2p->bytes_delivered(), 101 * 1024);
  EXPECT_EQ(h.replica->iterations(), 2u);
}

TEST(Pipeline, MicroBatchesOverlapAcrossStages) {
  // Two requests at t = 0 (prompt 100, output 2) go to the two virtual engines, so two
  // micro-batches are in the pipeline at once:
  //   stage 0: A's prefill [0, 1000], B's prefill [1000, 2000];
  //   A's activations arrive at 1,101, B's at 2,101;
  //   stage 1: A's prefill [1101, 2101] (A's first token), B's [2101, 3101] (B's first token);
  //   A's decode: stage 0 [2101, 2111], arrives 2,113, waits for stage 1 (B) until 3,101,
  //               runs [3101, 3111]: A done at 3,111;
  //   B's decode: stage 0 [3101, 3111], arrives 3,113, stage 1 [3113, 3123]: B done at 3,123.
  // Run one after the other (the sum), B's first token would come at 2 x 2,101 = 4,202 us.
  Harness h({0, 0}, kNvLink);
  h.add(1, Time::zero(), 100, 2);
  h.add(2, Time::zero(), 100, 2);
  h.engine.run();
  expect_at(h.rec.first.at(1), 2101);
  expect_at(h.rec.first.at(2), 3101);
  expect_at(h.rec.done.at(1), 3111);
  expect_at(h.rec.done.at(2), 3123);
  // Stage busy time: each stage ran 2 x 1,000 + 2 x 10 us.
  EXPECT_NEAR(h.replica->stage_busy_seconds(0), 2020e-6, 1e-8);
  EXPECT_NEAR(h.replica->stage_busy_seconds(1), 2020e-6, 1e-8);
}

TEST(Pipeline, CrossHostStageBoundaryPaysTheLinksLatencyAndBandwidth) {
  // Stage 0 on host 0, stage 1 on host 1: the activations cross the star (two links of 1 GB/s,
  // 100 ns each) as a send/recv of the collective layer with launch 5 us and the Simple protocol
  // (1 us per message, efficiency 1):
  //   prefill: 102,400 B: 5 us + 1 us + 200 ns + 102,400 ns = 108.6 us;
  //            first token at 1,000 + 108.6 + 1,000 = 2,108.6 us;
  //   decode:  1,024 B: 5 + 1 + 0.2 + 1.024 = 7.224 us; done at 2,108.6 + 10 + 7.224 + 10
  //            = 2,135.824 us.
  collectives::CostModel nccl;
  nccl.launch = Time::us(5);
  nccl.of(collectives::Protocol::kSimple) = {true, Time::us(1), 1.0};
  Harness h({0, 1}, kNvLink, nccl);
  h.add(1, Time::zero(), 100, 2);
  h.engine.run();
  expect_at(h.rec.first.at(1), 2108.6);
  expect_at(h.rec.done.at(1), 2135.824);
  EXPECT_EQ(h.p2p->transfers(), 2u);
  EXPECT_EQ(h.p2p->bytes_delivered(), h.p2p->bytes_sent());
  EXPECT_EQ(h.p2p->failed(), 0u);
}

TEST(Pipeline, StageCostsSplitTheIterationsCost) {
  // The embedding runs on the first stage, the final norm and LM head on the last, each stage its
  // own layers: the stages' compute adds up to the one-stage cost (ideal roofline: every operator
  // priced).
  Engine engine;
  fixtures::Platform platform{engine, fixtures::toy_gpu(), 1, {0}};
  OperatorTimer timer{platform.costs, platform.gpu, Dtype::kFp16};
  const TransformerShape m = fixtures::toy_transformer(4, "toy");
  IterationCostModel cost(m, 1, timer, {m.layers});
  std::vector<WorkItem> items = {{100, 0, false, true, 0, 4}, {1, 50, true, true, 0, 4}};
  const double whole = cost.cost(items).compute_s;
  const double a = cost.cost(items, 0, 1).compute_s;
  const double b = cost.cost(items, 1, 4).compute_s;
  EXPECT_NEAR(a + b, whole, 1e-15);
  // The last stage pays the head, the first the embedding: a one-layer first stage costs less
  // than a one-layer last stage by (head - embedding), and more than a middle layer.
  const double middle = cost.cost(items, 1, 2).compute_s;
  EXPECT_GT(a, middle);
  EXPECT_GT(cost.cost(items, 3, 4).compute_s, middle);
}
