// A decode iteration's tensor-parallel all-reduces, by hand: the replica waits exactly the
// collective layer's cost of a ring all-reduce over its GPUs per all-reduce
// (models/serving/tp_allreduce.hpp, sim_core/collectives/costs.hpp).
#include <gtest/gtest.h>

#include "models/serving/policies.hpp"
#include "models/serving/replica.hpp"
#include "sim_core/collectives/collective.hpp"
#include "test_support.hpp"

using namespace mlsim;
using namespace mlsim::serving;

namespace {

struct TpHarness {
  Engine engine;
  fixtures::IterationEnds log{engine};
  std::vector<NodeId> gpus;
  std::unique_ptr<fixtures::Platform> platform;
  std::unique_ptr<OperatorTimer> timer;
  std::unique_ptr<Replica> replica;
  std::vector<std::unique_ptr<Request>> requests;

  TpHarness(int tp, const TransformerShape& m) {
    for (int g = 0; g < tp; ++g) gpus.push_back(static_cast<NodeId>(g));
    platform = std::make_unique<fixtures::Platform>(engine, fixtures::toy_gpu(),
                                                    static_cast<std::size_t>(tp), gpus);
    timer = std::make_unique<OperatorTimer>(platform->costs, platform->gpu, Dtype::kFp16);
    ReplicaConfig cfg;
    cfg.name = "tp";
    cfg.tp = tp;
    cfg.gpus = gpus;
    replica = std::make_unique<Replica>(
        engine, *platform->compute, cfg,
        std::make_unique<IterationCostModel>(m, tp, *timer, std::vector<std::int32_t>{m.layers},
                                             fixtures::round_link_costs()),
        KvBlockPool(1000, 16), std::vector<std::int32_t>{m.layers}, 0, BatchLimits{},
        make_scheduler("continuous", "test"), log);
  }
  void add(std::uint64_t id, int prompt, int output) {
    auto r = std::make_unique<Request>();
    r->spec = {id, Time::zero(), prompt, output, 0, -1, {}};
    Request& ref = *r;
    requests.push_back(std::move(r));
    engine.schedule_at(Time::zero(), [this, &ref] { replica->submit(ref); });
  }
};

}  // namespace

// Toy transformer: 1 layer, hidden 512, fp16. Four requests (prompt 3, output 2) arrive at 0:
// iteration 1 prefills all four (12 tokens), iteration 2 decodes them (4 tokens). A layer runs
// two all-reduces of 4 tokens x 512 x 2 B = 4,096 B each in the decode iteration.
//
// One all-reduce, collective_cost of a ring: launch + 2(n-1) x (hop + route latency)
//   + 2(n-1)/n x S / (efficiency x 100 GB/s), with the protocol of the smallest
//   2(n-1) x hop + 2(n-1)/n x S / (efficiency x B):
//   TP 2: 2 steps, 4,096 B on the bus. LL 2 x 500 + 4,096 / 50 GB/s = 1,000 + 81.92 ns;
//         LL128 2,000 + 43.7 ns; Simple 10,000 + 41.0 ns -> LL.
//         5,000 + 2 x 1,000 + 1,081.92 = 8,081.92 ns -> 8,082 ns; two: 16,164 ns.
//   TP 8: 14 steps, 1.75 x 4,096 = 7,168 B on the bus. LL 7,000 + 143.36 ns; LL128
//         14,000 + 76.5 ns; Simple 70,000 + 71.7 ns -> LL.
//         5,000 + 14 x 1,000 + 7,143.36 = 26,143.36 ns -> 26,143 ns; two: 52,286 ns.
// The decode iteration lasts its compute plus exactly that.
TEST(TpAllReduce, DecodeIterationWaitsTheCollectiveLayersCost) {
  const TransformerShape m = fixtures::toy_transformer(1, "toy");
  for (const auto& [tp, one, two] : {std::tuple{2, Time::ns(8'082), Time::ns(16'164)},
                                     std::tuple{8, Time::ns(26'143), Time::ns(52'286)}}) {
    // The serving term is the collective layer's cost, and the hand figure.
    const auto layer = collectives::collective_cost(
        fixtures::round_link_costs().costs, collectives::Operation::kAllReduce,
        collectives::Algorithm::kRing, tp, 2, Bytes{4'096}, Bandwidth{100e9}, Time::us(1));
    EXPECT_EQ(layer.protocol, collectives::Protocol::kLL) << "TP " << tp;
    EXPECT_EQ(layer.time, one) << "TP " << tp;
    EXPECT_EQ(fixtures::round_link_costs().time(tp, Bytes{4'096}), one) << "TP " << tp;

    TpHarness h(tp, m);
    for (std::uint64_t id = 1; id <= 4; ++id) h.add(id, 3, 2);
    h.engine.run();
    ASSERT_EQ(h.log.ends.size(), 2u) << "TP " << tp;
    EXPECT_EQ(h.log.batch_sizes, (std::vector<std::size_t>{4, 4}));
    const std::vector<WorkItem> decode(4, WorkItem{1, 3, true, true, 0, 1});
    const IterationCost c = h.replica->cost_model().cost(decode);
    EXPECT_EQ(c.allreduces, 2);
    EXPECT_EQ(c.allreduce_bytes, 2 * 4'096);
    EXPECT_EQ(c.allreduce, two) << "TP " << tp;
    EXPECT_EQ(h.log.ends[1] - h.log.ends[0], Time::from_seconds_ceil(c.compute_s) + two)
        << "TP " << tp;
  }
}

// At TP 1 there is nothing to reduce: no all-reduce and no time, whatever the link costs.
TEST(TpAllReduce, NoneAtTp1) {
  EXPECT_EQ(fixtures::round_link_costs().time(1, Bytes{1 << 20}), Time::zero());
  TpHarness h(1, fixtures::toy_transformer(1, "toy"));
  const std::vector<WorkItem> decode(4, WorkItem{1, 3, true, true, 0, 1});
  const IterationCost c = h.replica->cost_model().cost(decode);
  EXPECT_EQ(c.allreduces, 0);
  EXPECT_EQ(c.allreduce, Time::zero());
}
