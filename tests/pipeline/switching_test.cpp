// AutoPipe's switch (pipeline_training.hpp): drain and copy against layer by layer, on a case
// worked by hand, and the moves of a switch one layer at a time.
#include <gtest/gtest.h>

#include <vector>

#include "tests/pipeline/simulate.hpp"

#include "models/pipeline/pipeline_costs.hpp"
#include "models/pipeline/pipeline_training.hpp"

using namespace mlsim;
using namespace mlsim::pipeline;
using mlsim::pipeline::test_support::Outcome;
using mlsim::pipeline::test_support::simulate;

TEST(LayerMoves, OneEntryPerLayerSummingToTheMigrations) {
  // 2 | 2 -> 1 | 3 on two hosts: host 1 lacks layer 1, fetched from host 0; host 0 lacks none.
  std::vector<LayerCost> l(4, LayerCost{1, 1, 0, 0});
  l[1].parameter_bytes = 5;
  l[3].parameter_bytes = 7;
  Partition from{{0, 2, 4}, {}}, to{{0, 1, 4}, {}};
  const std::vector<LayerMove> moves = layer_moves(l, from, to);
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].from_host, 0u);
  EXPECT_EQ(moves[0].to_host, 1u);
  EXPECT_EQ(moves[0].layer, 1u);
  EXPECT_EQ(moves[0].parameter_bytes, 5);
  // 1 | 3 -> 3 | 1: host 0 fetches layers 1 and 2 from host 1 (layer 2 has no parameters: 0 B);
  // host 1 keeps layer 3.
  const std::vector<LayerMove> back = layer_moves(l, to, Partition{{0, 3, 4}, {}});
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].layer, 1u);
  EXPECT_EQ(back[1].layer, 2u);
  EXPECT_EQ(moved_parameter_bytes(l, to, Partition{{0, 3, 4}, {}}), 5);
}

TEST(Switching, LayerByLayerStartsTheStagesThatHaveTheirLayers) {
  // Two hosts, four layers of f = b = 1 s, only layer 1 with parameters (7 GB: x2 with its
  // optimizer state, 14 s at 1 GB/s), 1-byte activations (a nanosecond each, left out below), a
  // straight pipeline of 8 minibatches. At 21 s GPU 0 drops to half speed.
  //
  // Before: 2 | 2 (4 s per minibatch; 1 | 3 and 3 | 1 take 6 s), 2 s per op, stage 0 limit 2:
  //   S0: F0 0-2, F1 2-4, B0 6-8, F2 8-10, B1 10-12, F3 12-14, B2 14-16, F4 16-18, B3 18-20,
  //       F5 20-23 (1 s done at 21, the rest 2 s at half speed)
  //   S1: F0 2-4, B0 4-6, F1 6-8, B1 8-10, ..., F4 18-20, B4 20-22
  // At 21 s the plan is 1 | 3 (max(4, 6) = 6 s against 2 | 2's max(8, 4) = 8 s): the segment ends
  // with the 6 minibatches stage 0 has started, and layer 1 moves from host 0 to host 1 (14 s:
  // it arrives at 35 s). The drain: S0 B4 23-27 (4 s at half speed), S1 F5 23-25, B5 25-27,
  // S0 B5 27-31: drained at 31 s.
  // After (1 | 3: S0 f = b = 2 s at half speed, S1 f = b = 3 s), minibatches 6 and 7 from R:
  //   S0 F6 R..R+2, F7 ..R+4; S1 F6 from the later of R+2 and layer 1, B6 +3..+6; S0 B6 2 s;
  //   S1 F7 after B6, B7 +3..+6; S0 B7 2 s.
  // Drain and copy: R = 35 (the copy), S1 F6 37-40, B6 40-43, S0 B6 43-45, S1 F7 43-46, B7
  //   46-49, S0 B7 49-51: 51 s, a switch of 35 - 21 = 14 s.
  // Layer by layer: R = 31 (the drain); S0 F6 31-33, F7 33-35; S1 waits for layer 1 until 35:
  //   F6 35-38, B6 38-41, S0 B6 41-43, S1 F7 41-44, B7 44-47, S0 B7 47-49: 49 s, a switch of
  //   31 - 21 = 10 s, one layer awaited.
  TrainingParams p;
  p.layers.assign(4, LayerCost{1, 1, 1, 0});
  p.layers[1].parameter_bytes = 7e9;
  p.minibatches = 8;
  p.straight = true;
  p.policy = Policy::kAutoPipe;
  PlatformEvent slow;
  slow.at = Time::s(21);
  slow.change = EventChange::kSpeed;
  slow.nodes = {0};
  slow.speed = 0.5;
  struct Expected {
    Switching mode;
    double time_s, switch_s, awaited;
  };
  for (const Expected& e : {Expected{Switching::kDrainAndCopy, 51, 14, 0},
                            Expected{Switching::kLayerByLayer, 49, 10, 1}}) {
    p.switching = e.mode;
    const Outcome r = simulate(p, 2, 1e9, Time::ns(1), {slow});
    const auto& m = r.results.metrics();
    EXPECT_EQ(m.at("repartitions"), 1);
    EXPECT_NEAR(m.at("time_s"), e.time_s, 1e-6);
    EXPECT_NEAR(m.at("switch_time_s"), e.switch_s, 1e-6);
    EXPECT_EQ(m.at("layers_awaited"), e.awaited);
    EXPECT_EQ(m.at("migrated_bytes"), 14e9);
    EXPECT_EQ(r.results.details()["partitions"][1]["first_layer"],
              (std::vector<std::size_t>{0, 1, 4}));
    EXPECT_EQ(r.totals.transfers_started, r.totals.transfers_delivered);
  }
}
