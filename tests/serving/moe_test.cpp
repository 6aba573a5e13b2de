// Mixture-of-experts models (model_catalog.hpp, compute_model.hpp ExpertParallel): Mixtral's
// parameter counts from its published shape, and one MoE decode iteration worked by hand at
// EP 2 (experts, dispatch and combine all-to-alls, all-gather) against EP 1 (experts split by
// tensor parallelism, two all-reduces per layer as a dense model).
#include <gtest/gtest.h>

#include "models/serving/policies.hpp"
#include "models/serving/replica.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/collectives/collective.hpp"
#include "test_support.hpp"

using namespace mlsim;
using namespace mlsim::serving;

namespace {

// Mixtral-8x7B (Jiang et al., "Mixtral of Experts", arXiv 2401.04088, Table 1; the model card's
// config.json): per layer, attention 4096 x (4096 + 2 x 1024) + 4096^2 = 41,943,040; an expert
// 3 x 4096 x 14,336 = 176,160,768, eight of them 1,409,286,144; router 4096 x 8 = 32,768; norms
// 8,192: 1,451,270,144 per layer, x 32 = 46,440,644,608, plus embedding and LM head
// 2 x 32,000 x 4096 + 4096 = 262,148,096: 46,702,792,704 (the paper's 46.7 B). Active per token
// (two experts): 394,305,536 per layer, 12,879,925,248 in all (the paper's 12.9 B).
TEST(Moe, MixtralParametersFromItsShape) {
  const auto catalog = fixtures::llama2();  // get() returns a reference into it
  const auto& m = catalog.get("mixtral-8x7b", "test");
  ASSERT_TRUE(m.moe());
  EXPECT_EQ(m.experts, 8);
  EXPECT_EQ(m.experts_per_token, 2);
  EXPECT_EQ(m.expert_ffn, 14336);
  EXPECT_EQ(m.params_per_layer(), 1'451'270'144);
  EXPECT_EQ(m.params(), 46'702'792'704);
  EXPECT_EQ(m.active_params_per_layer(), 394'305'536);
  EXPECT_EQ(m.active_params_per_layer() * m.layers + m.params_outside_layers(), 12'879'925'248);
  // KV per token and layer as Llama-3-8B's (8 KV heads of 128): 2 x 1024 x 2 B.
  EXPECT_EQ(m.kv_bytes_per_token_layer(), 4096);
}

TEST(Moe, CatalogRejectsMoreExpertsPerTokenThanExperts) {
  nlohmann::json j = {{"_source", "test"}, {"layers", 1},
                      {"hidden", 512},     {"heads", 8},
                      {"kv_heads", 8},     {"ffn", 1024},
                      {"vocab", 1000},     {"context", 4096},
                      {"experts", 4},      {"experts_per_token", 5},
                      {"expert_ffn", 1024}};
  JsonReader r(j, "models.toy");
  try {
    parse_transformer_shape(r, "toy");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("models.toy.experts_per_token"), std::string::npos)
        << e.what();
  }
}

// Only the experts' up-projections cost anything: `per_call` (reading the expert's weights) plus
// 10 us per token (the expert shape, ffn 1024); the router (its GEMM has the shape of width
// `experts`) and every other operator are free.
class ExpertTenMicrosPerToken final : public CostProvider {
 public:
  explicit ExpertTenMicrosPerToken(double per_call) : per_call_(per_call) {}
  std::string_view name() const override { return "test"; }
  std::optional<double> operator_seconds(const OperatorWork& w, const GpuSpec&) const override {
    return w.op == op_name(Op::kMlpUpGate) && w.shape.ffn == 1024
               ? per_call_ + 10e-6 * static_cast<double>(w.tokens)
               : 0.0;
  }
  bool total_for(const GpuSpec&, std::string_view) const override { return true; }

 private:
  double per_call_;
};

// A two-layer toy MoE: hidden 512 (fp16: 1,024 B per token), 8 heads, 4 experts of width 1024,
// top-2.
TransformerShape toy_moe() {
  TransformerShape m = fixtures::toy_transformer(2, "toy-moe");
  m.experts = 4;
  m.experts_per_token = 2;
  m.expert_ffn = 1024;
  return m;
}

struct MoeHarness {
  Engine engine;
  fixtures::IterationEnds log{engine};
  GpuSpec gpu = fixtures::toy_gpu();
  NodeHardware hardware{2};
  HostSpeeds speeds{2};
  CostModel costs;
  std::unique_ptr<Compute> compute;
  std::unique_ptr<OperatorTimer> timer;
  std::unique_ptr<Replica> replica;
  std::vector<std::unique_ptr<Request>> requests;

  explicit MoeHarness(ExpertParallel expert, double per_call = 0) {
    const TransformerShape m = toy_moe();
    std::vector<NodeId> gpus = {NodeId{0}, NodeId{1}};
    for (NodeId h : gpus) hardware.set_host(h, HostHardware{&gpu, 1, nullptr, std::nullopt});
    costs.add(std::make_unique<ExpertTenMicrosPerToken>(per_call));
    compute = std::make_unique<Compute>(engine, hardware, speeds, costs);
    timer = std::make_unique<OperatorTimer>(costs, gpu, Dtype::kFp16);
    ReplicaConfig cfg;
    cfg.name = "moe";
    cfg.tp = 2;
    cfg.gpus = gpus;
    replica = std::make_unique<Replica>(
        engine, *compute, cfg,
        std::make_unique<IterationCostModel>(m, 2, *timer, std::vector<std::int32_t>{m.layers},
                                             fixtures::round_link_costs(), expert),
        KvBlockPool(1000, 16), std::vector<std::int32_t>{m.layers}, 0, BatchLimits{},
        make_scheduler("continuous", "test"), log);
    for (std::uint64_t id = 1; id <= 4; ++id) {
      auto r = std::make_unique<Request>();
      r->spec = {id, Time::zero(), 3, 2, 0, -1, {}};
      Request& ref = *r;
      requests.push_back(std::move(r));
      engine.schedule_at(Time::zero(), [this, &ref] { replica->submit(ref); });
    }
  }
};

}  // namespace

// Four requests (prompt 3, output 2) at t = 0 on TP 2: a prefill of 12 tokens, then one decode
// iteration of T = 4 tokens, worked here.
//
// Experts, per GPU and layer (uniform routing: a token picks 2 of 4 experts):
//   EP 2: a GPU holds 2 experts; touched in expectation 2 x (1 - (1 - 2/4)^4) = 1.875; pairs
//         4 x 2 / 2 = 4; 4 / 1.875 = 2.1333 tokens per touched expert: 21.333 us each (10 us per
//         token, linear between 2 and 3 tokens) -> 1.875 x 21.333 = 40 us.
//   EP 1: every GPU holds a half of all 4 experts; touched 4 x 15/16 = 3.75; pairs 8; the same
//         2.1333 tokens each -> 3.75 x 21.333 = 80 us.
// Collectives per layer (collective_cost, fixtures::round_link_costs(); LL wins every one: 500 ns
// per step at 50 GB/s):
//   all-reduce of the attention: 4 x 512 x 2 B = 4,096 B -> 8,082 ns (tp_allreduce_test).
//   dispatch all-to-all: each GPU's slice of 4 / 2 = 2 tokens, each sent to its 2 experts:
//         2 x 2 x 1,024 B = 4,096 B of send buffer, (n-1)/n = half of it crosses: 2,048 B;
//         5,000 + 1 step x (500 + 1,000) + 2,048 / 50 GB/s (40.96) = 6,540.96 -> 6,541 ns.
//   combine all-to-all: the same, 6,541 ns.
//   all-gather of the 4 tokens' 4,096 B (each GPU gives 2,048 B): 1 step, 2,048 B: 6,541 ns.
//   EP 2: 8,082 + 3 x 6,541 = 27,705 ns per layer, 55,410 ns for two layers; all-to-all bytes
//         2 layers x 2 x 4,096 = 16,384.
//   EP 1: two all-reduces per layer: 4 x 8,082 = 32,328 ns.
// With imbalance 1.5 at EP 2: the busiest GPU has 6 pairs (at most 4 x min(2, 2) = 8): 3.2
// tokens per touched expert, 32 us each, 1.875 x 32 = 60 us per layer; its all-to-all buffer
// 6,144 B (3,072 B cross): 5,000 + 1,500 + 61.44 -> 6,561 ns; per layer 8,082 + 2 x 6,561 +
// 6,541 = 27,745 ns, 55,490 ns in all.
TEST(Moe, DecodeIterationAtEp2ByHand) {
  struct Expect {
    ExpertParallel ep;
    double compute_us;
    std::int32_t allreduces, alltoalls;
    std::int64_t alltoall_bytes;
    Time comm;
  };
  for (const Expect& x : {Expect{{2, 1.0, std::nullopt}, 80, 2, 4, 16'384, Time::ns(55'410)},
                          Expect{{1, 1.0, std::nullopt}, 160, 4, 0, 0, Time::ns(32'328)},
                          Expect{{2, 1.5, std::nullopt}, 120, 2, 4, 24'576, Time::ns(55'490)}}) {
    SCOPED_TRACE("ep " + std::to_string(x.ep.ep) + " imbalance " + std::to_string(x.ep.imbalance));
    const auto a2a = collectives::collective_cost(
        fixtures::round_link_costs().costs, collectives::Operation::kAllToAll,
        collectives::Algorithm::kDirect, 2, 2, Bytes{4'096}, Bandwidth{100e9}, Time::us(1));
    EXPECT_EQ(a2a.protocol, collectives::Protocol::kLL);
    EXPECT_EQ(a2a.time, Time::ns(6'541));
    EXPECT_EQ(fixtures::round_link_costs().collective(collectives::Operation::kAllGather, 2,
                                                      Bytes{4'096}),
              Time::ns(6'541));

    MoeHarness h(x.ep);
    const std::vector<WorkItem> decode(4, WorkItem{1, 3, true, true, 0, 2});
    const IterationCost c = h.replica->cost_model().cost(decode);
    EXPECT_NEAR(c.compute_s, x.compute_us * 1e-6, 1e-12);
    EXPECT_EQ(c.allreduces, x.allreduces);
    EXPECT_EQ(c.allreduce_bytes, x.allreduces * 4'096);
    EXPECT_EQ(c.alltoalls, x.alltoalls);
    EXPECT_EQ(c.alltoall_bytes, x.alltoall_bytes);
    EXPECT_EQ(c.allgathers, x.ep.ep > 1 ? 2 : 0);
    EXPECT_EQ(c.allreduce + c.moe_collectives, x.comm);
    // The replica's decode iteration lasts its compute and then exactly those collectives.
    h.engine.run();
    ASSERT_EQ(h.log.ends.size(), 2u);
    EXPECT_EQ(h.log.ends[1] - h.log.ends[0], Time::from_seconds_ceil(c.compute_s) + x.comm);
  }
}

// Only the experts a batch touches read their weights: with 5 us per expert call (its weights)
// and 10 us per token, toy (4 experts, top-2), EP 1:
//   T = 1: touches 4 x (1 - 2/4) = 2 experts with one token each: 2 x 15 = 30 us (reading all
//          four would be 4 x 5 + 2 x 10 = 40 us);
//   T = 2: 4 x (1 - (1/2)^2) = 3 touched, 4 pairs: 1.333 tokens each, 15 + 0.333 x 10 =
//          18.333 us each: 55 us.
// (Mixtral, T = 1: 8 x (1 - 6/8) = 2 of its 8 experts, the active parameters only.)
TEST(Moe, SmallBatchesReadOnlyTheExpertsTheyTouch) {
  MoeHarness h({1, 1.0, std::nullopt}, 5e-6);
  const auto& cost = h.replica->cost_model();
  EXPECT_NEAR(cost.expert_seconds(1), 30e-6, 1e-12);
  EXPECT_NEAR(cost.expert_seconds(2), 55e-6, 1e-12);
}

// Capacity (GShard / Switch Transformer; compute_model.hpp, ExpertParallel), by hand. A batch of
// T = 8 tokens, top-2 of 4 experts, capacity factor 1.0: 16 (token, expert) assignments, 4 per
// expert on average, so C = ceil(1.0 x 2 x 8 / 4) = 4 slots per expert (EP 1: one group of 8).
// Routed 7, 5, 3 and 1 times, the first two experts are over by 3 and 1: 4 assignments drop.
// At EP 2 a group is one GPU's ceil(8 / 2) = 4 tokens: C = ceil(2 x 4 / 4) = 2; capacity factor
// 1.25 at EP 1: ceil(1.25 x 4) = 5, and the same routing drops 2 + 0 = 2.
TEST(Moe, CapacityFactorDropsTheAssignmentsOverCapacityByHand) {
  ExpertParallel one{1, 1.0, 1.0};
  MoeHarness h(one);
  const auto& cost = h.replica->cost_model();
  EXPECT_EQ(cost.expert_capacity(8), 4);
  const std::vector<std::int64_t> routing = {7, 5, 3, 1};
  EXPECT_EQ(IterationCostModel::dropped_pairs(routing, cost.expert_capacity(8)), 4);
  MoeHarness h2({2, 1.0, 1.0});
  EXPECT_EQ(h2.replica->cost_model().expert_capacity(8), 2);
  MoeHarness h3({1, 1.0, 1.25});
  EXPECT_EQ(h3.replica->cost_model().expert_capacity(8), 5);
  EXPECT_EQ(IterationCostModel::dropped_pairs(routing, 5), 2);
  // A decode of 2 tokens at EP 1 and capacity factor 1: C = ceil(2 x 2 / 4) = 1.
  EXPECT_EQ(cost.expert_capacity(2), 1);
}

// With a capacity, experts and all-to-alls work on the padded [experts, C, hidden] tensor: the
// decode iteration of DecodeIterationAtEp2ByHand (T = 4, EP 2) at capacity factor 2:
//   C = ceil(2 x 2 x ceil(4 / 2) / 4) = 2 slots per expert and group; a GPU runs its 2 experts on
//   2 groups x 2 = 4 slots each: 2 x 40 us = 80 us per layer, 160 us for two;
//   all-to-all send buffer 4 experts x 2 x 1,024 B = 8,192 B, half of it crosses: 4,096 B;
//   LL: 5,000 + 1 x (500 + 1,000) + 4,096 / 50 GB/s (81.92) = 6,581.92 -> 6,582 ns;
//   per layer 8,082 + 2 x 6,582 + 6,541 = 27,787 ns; 55,574 ns for two layers.
// The replica's decode iteration lasts 160 us + 55,574 ns.
TEST(Moe, CapacityPadsExpertsAndAllToAllsByHand) {
  MoeHarness h({2, 1.0, 2.0});
  const std::vector<WorkItem> decode(4, WorkItem{1, 3, true, true, 0, 2});
  const IterationCost c = h.replica->cost_model().cost(decode);
  EXPECT_NEAR(c.compute_s, 160e-6, 1e-12);
  EXPECT_EQ(c.alltoall_bytes, 2 * 2 * 8'192);
  EXPECT_EQ(c.allreduce + c.moe_collectives, Time::ns(55'574));
  // No routing stream in this harness: nothing is drawn, nothing reported dropped.
  EXPECT_EQ(c.moe_routed_pairs, 0);
  EXPECT_EQ(c.moe_dropped_pairs, 0);
  h.engine.run();
  ASSERT_EQ(h.log.ends.size(), 2u);
  EXPECT_EQ(h.log.ends[1] - h.log.ends[0], Time::from_seconds_ceil(c.compute_s) + Time::ns(55'574));
}

// The routing draw against its exact expectation. Top-1 of 2 experts, capacity factor 1, a
// decode of T = 2 tokens at EP 1: C = ceil(1 x 1 x 2 / 2) = 1. Each token picks an expert with
// probability 1/2: both pick the same one with probability 1/2, and then one of the two
// assignments drops; so the expected drop fraction is 1/2 x 1/2 = 0.25. Over 10,000 iterations
// of the two-layer toy (20,000 draws; standard error 0.25 / sqrt(20,000) = 0.0018) the measured
// fraction is within 0.01. The same seed gives the same draws; another seed, others.
TEST(Moe, RoutingDrawDropsAtItsExpectedRate) {
  auto run = [](std::uint64_t seed) {
    TransformerShape m = toy_moe();
    m.experts = 2;
    m.experts_per_token = 1;
    GpuSpec gpu = fixtures::toy_gpu();
    CostModel costs;
    costs.add(std::make_unique<ExpertTenMicrosPerToken>(0));
    OperatorTimer timer(costs, gpu, Dtype::kFp16);
    IterationCostModel cost(m, 1, timer, {m.layers}, {}, ExpertParallel{1, 1.0, 1.0});
    cost.set_routing_stream(RandomStream(seed, "serving.expert_routing.0"));
    const std::vector<WorkItem> decode(2, WorkItem{1, 3, true, true, 0, 2});
    std::vector<std::int64_t> drops;
    std::int64_t routed = 0;
    for (int i = 0; i < 10'000; ++i) {
      const IterationCost c = cost.cost(decode);
      routed += c.moe_routed_pairs;
      drops.push_back(c.moe_dropped_pairs);
    }
    return std::pair{routed, drops};
  };
  const auto [routed, drops] = run(1);
  EXPECT_EQ(routed, 10'000 * 2 * 2);
  std::int64_t dropped = 0;
  for (auto d : drops) dropped += d;
  EXPECT_NEAR(static_cast<double>(dropped) / static_cast<double>(routed), 0.25, 0.01);
  EXPECT_EQ(run(1).second, drops);
  EXPECT_NE(run(2).second, drops);
}
