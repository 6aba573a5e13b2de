// The bytes of a stage boundary (LayerCost::boundary_bytes, from the profile's edges): every
// activation made before the cut and consumed after it. A branching profile of four layers by
// hand, the shipped profiles (chains unchanged, ResNet-50's residual inputs counted), and every
// user of a boundary's bytes on it: stage_costs, the 1F1B timing model and the run's transfers,
// the bottleneck bound and the DP planner, PipeDream's activation term.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "tests/pipeline/simulate.hpp"

#include "models/pipeline/bottleneck.hpp"
#include "models/pipeline/dp_planner.hpp"
#include "models/pipeline/one_f_one_b.hpp"
#include "models/pipeline/pipedream_partitioner.hpp"
#include "models/pipeline/pipeline_costs.hpp"
#include "models/pipeline/stage_memory.hpp"
#include "sim_core/hardware/dnn_profile.hpp"

using namespace mlsim;
using namespace mlsim::pipeline;

namespace {

// An input and four layers; L0 feeds L1 and, by a skip edge, L2 (a residual block's input):
//   input -> L0 -> L1 -> L2 -> L3,  L0 -> L2.
// Activations (bytes): L0 0.35e9, L1 0.15e9, L2 0.1e9, L3 4. Times (ms, forward/backward):
// L0 500/1000, L1 500/1000, L2 200/400, L3 800/1600, so layers 0-1 and 2-3 each take 1 s
// forward and 2 s backward. By hand, the cut after
//   L0: L0 (consumed by L1, L2)                 0.35e9
//   L1: L0 (consumed by L2) + L1 (by L2)        0.5e9   (L1's own output: 0.15e9)
//   L2: L2 (by L3); L0's last consumer is L2    0.1e9
//   L3: nothing is consumed after it            0
const char* const kSkipProfile =
    "node1 -- Input0 -- forward_compute_time=0.000, backward_compute_time=0.000, "
    "activation_size=1000.0, parameter_size=0.000\n"
    "node2 -- L0 -- forward_compute_time=500.0, backward_compute_time=1000.0, "
    "activation_size=350000000.0, parameter_size=0.000\n"
    "node3 -- L1 -- forward_compute_time=500.0, backward_compute_time=1000.0, "
    "activation_size=150000000.0, parameter_size=0.000\n"
    "node4 -- L2 -- forward_compute_time=200.0, backward_compute_time=400.0, "
    "activation_size=100000000.0, parameter_size=0.000\n"
    "node5 -- L3 -- forward_compute_time=800.0, backward_compute_time=1600.0, "
    "activation_size=4.0, parameter_size=0.000\n"
    "\tnode1 -- node2\n"
    "\tnode2 -- node3\n"
    "\tnode3 -- node4\n"
    "\tnode4 -- node5\n"
    "\tnode2 -- node4\n";

std::vector<LayerCost> skip_layers() {
  std::istringstream in(kSkipProfile);
  return layer_costs(parse_pipedream_graph(in, "skip"));
}

// The same layers as a chain would count them (each cut carries its layer's own output).
std::vector<LayerCost> as_chain(std::vector<LayerCost> l) {
  for (LayerCost& x : l) x.boundary_bytes.reset();
  return l;
}

Conditions two_hosts(const std::vector<LayerCost>& l, double bandwidth, double latency) {
  Conditions c;
  for (int h = 0; h < 2; ++h) c.hosts.push_back(profiled_host(l, 1));
  c.bandwidth.assign(2, bandwidth);
  c.latency_out.assign(2, latency);
  c.latency_in.assign(2, 0);
  return c;
}

std::vector<LayerCost> shipped(const std::string& model) {
  return layer_costs(read_pipedream_graph(std::string(MLSIM_SOURCE_DIR) +
                                          "/workloads/dnn/pipedream/" + model + "/graph.txt"));
}

}  // namespace

TEST(BoundaryBytes, SkipEdgeByHand) {
  const std::vector<LayerCost> l = skip_layers();
  ASSERT_EQ(l.size(), 4u);  // the input is left out
  const double expected[] = {0.35e9, 0.5e9, 0.1e9, 0};
  for (std::size_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(l[i].boundary_bytes.has_value()) << i;
    EXPECT_DOUBLE_EQ(l[i].cut_bytes(), expected[i]) << i;
  }
  EXPECT_DOUBLE_EQ(l[1].activation_bytes, 0.15e9);
  // A chain's cut carries the layer's own output.
  EXPECT_DOUBLE_EQ(as_chain(l)[1].cut_bytes(), 0.15e9);
  // stage_costs: the boundary of 0-1 | 2-3 carries 0.5e9.
  const StageCosts costs = stage_costs(l, Partition{{0, 2, 4}, {}}, two_hosts(l, 1e9, 0));
  EXPECT_EQ(costs.boundary_bytes, (std::vector<double>{0.5e9}));
  // Three stages, 0 | 1-2 | 3: the cuts after L0 and L2.
  Conditions three = two_hosts(l, 1e9, 0);
  three.hosts.push_back(profiled_host(l, 1));
  three.bandwidth.push_back(1e9);
  three.latency_out.push_back(0);
  three.latency_in.push_back(0);
  EXPECT_EQ(stage_costs(l, Partition{{0, 1, 3, 4}, {}}, three).boundary_bytes,
            (std::vector<double>{0.35e9, 0.1e9}));
}

TEST(BoundaryBytes, ChainsAreTheLayersOwnOutputs) {
  // VGG-16 and AlexNet are chains but for the flatten: the last pool feeds Size and View, so the
  // cut between Size and View carries the pool's output too. Everywhere else a cut carries
  // exactly its layer's output (the last layer's cut carries nothing: nothing follows it).
  for (const char* model : {"vgg16", "alexnet"}) {
    const std::vector<LayerCost> l = shipped(model);
    std::size_t differ = 0;
    for (std::size_t i = 0; i + 1 < l.size(); ++i) {
      if (l[i].cut_bytes() == l[i].activation_bytes) continue;
      ++differ;
      EXPECT_EQ(l[i].cut_bytes(), l[i].activation_bytes + l[i - 1].activation_bytes)
          << model << " layer " << i;
    }
    EXPECT_EQ(differ, 1u) << model;
    EXPECT_EQ(l.back().cut_bytes(), 0) << model;
  }
}

TEST(BoundaryBytes, ResNet50CountsTheResidualInputs) {
  // docs/pipeline.md ("The antichain DAG"): at 137 of the chain's 175 cuts more than the last
  // layer's output crosses; after layer 29 (inside a block) the block's input (411.0 MB) and the
  // branch's output (102.8 MB), where the layer's own output is the branch's 102.8 MB.
  const std::vector<LayerCost> l = shipped("resnet50");
  ASSERT_EQ(l.size(), 176u);
  std::size_t more = 0;
  for (std::size_t i = 0; i + 1 < l.size(); ++i) {
    EXPECT_GE(l[i].cut_bytes(), l[i].activation_bytes) << i;
    if (l[i].cut_bytes() > l[i].activation_bytes) ++more;
  }
  EXPECT_EQ(more, 137u);
  EXPECT_NEAR(l[28].activation_bytes / 1e6, 102.8, 0.05);
  EXPECT_NEAR(l[28].cut_bytes() / 1e6, 513.8, 0.05);
}

// The run's transfers and the 1F1B timing model use the cut's bytes: the hand schedule of
// mechanisms_test (PipelineTraining.SimulatedRunMatchesTheHandSchedule: two stages of f = 1 s,
// b = 2 s, 3 minibatches, 0.5 GB crossings at 1 GB/s over two 50 ms hops, 14.4 s) with the
// boundary of 0-1 | 2-3, whose 0.5e9 bytes are L0's and L1's outputs together. Counting L1's
// output alone (0.15e9, 0.25 s a crossing) the same schedule takes 12 + 4 x 0.25 = 13 s.
TEST(BoundaryBytes, TheRunAndTheTimingModelSendTheCutsBytes) {
  TrainingParams p;
  p.layers = skip_layers();
  p.minibatches = 3;
  p.samples_per_minibatch = 32;
  p.straight = true;  // PipeDream by compute: 0-1 | 2-3 (3 s) over 0 | 1-3 (4.5) and 0-2 | 3 (3.6)
  const test_support::Outcome r = test_support::simulate(p, 2, 1e9, Time::ms(50));
  EXPECT_EQ(r.results.details()["partitions"][0]["first_layer"],
            (std::vector<std::size_t>{0, 2, 4}));
  EXPECT_NEAR(r.results.metrics().at("time_s"), 14.4, 1e-8);
  EXPECT_EQ(r.totals.transfers_delivered, 6u);
  EXPECT_EQ(r.totals.bytes_delivered.count, std::int64_t{6} * 500'000'000);
  const Conditions c = two_hosts(p.layers, 1e9, 0.1);
  EXPECT_NEAR(estimate_1f1b(stage_costs(p.layers, Partition{{0, 2, 4}, {}}, c), c, 3), 14.4, 1e-8);
  EXPECT_NEAR(estimate_1f1b(stage_costs(as_chain(p.layers), Partition{{0, 2, 4}, {}}, c), c, 3), 13,
              1e-8);
  p.layers = as_chain(p.layers);
  const test_support::Outcome chain = test_support::simulate(p, 2, 1e9, Time::ms(50));
  EXPECT_EQ(chain.totals.bytes_delivered.count, std::int64_t{6} * 150'000'000);
  EXPECT_NEAR(chain.results.metrics().at("time_s"), 13, 1e-8);
}

// The planners' objectives at 0.1 GB/s (straight pipelines of two stages; layer f + b: 1.5, 1.5,
// 0.6, 2.4 s). NIC seconds of a cut: after L0 3.5, after L1 5, after L2 1 (as a chain: 3.5, 1.5,
// 1). Bottleneck (max over stages of max(GPU, NIC of its boundary)):
//   0 | 1-3:  max(1.5, 3.5), max(4.5, 3.5) = 4.5
//   0-1 | 2-3: max(3, 5), max(3, 5)        = 5     (as a chain: max(3, 1.5) = 3)
//   0-2 | 3:  max(3.6, 1), max(2.4, 1)     = 3.6
// so the DP planner picks 0-2 | 3 (a chain count would pick 0-1 | 2-3). PipeDream with
// --activation_compression_ratio 1 takes the max with 2 x the cut / B: 0 | 1-3 -> 7, 0-1 | 2-3 ->
// 10 (as a chain 3), 0-2 | 3 -> max(3.6, 2.4, 2) = 3.6.
TEST(BoundaryBytes, PlannersPriceTheCutsBytes) {
  const std::vector<LayerCost> l = skip_layers();
  const Conditions c = two_hosts(l, 1e8, 0);
  const Partition p01{{0, 1, 4}, {}}, p12{{0, 2, 4}, {}}, p23{{0, 3, 4}, {}};
  const Bottleneck bound(l, c);
  EXPECT_DOUBLE_EQ(bound.of(p01), 4.5);
  EXPECT_DOUBLE_EQ(bound.of(p12), 5);
  EXPECT_NEAR(bound.of(p23), 3.6, 1e-12);
  EXPECT_DOUBLE_EQ(Bottleneck(as_chain(l), c).of(p12), 3);
  PlannerOptions straight;
  straight.straight = true;
  EXPECT_EQ(dp_plan(l, c, straight).partition, p23);
  EXPECT_EQ(dp_plan(as_chain(l), c, straight).partition, p12);

  const PipeDreamOptions with_activations{.straight = true, .activation_compression_ratio = 1.0};
  EXPECT_DOUBLE_EQ(pipedream_objective(l, p01, c, with_activations), 7);
  EXPECT_DOUBLE_EQ(pipedream_objective(l, p12, c, with_activations), 10);
  EXPECT_NEAR(pipedream_objective(l, p23, c, with_activations), 3.6, 1e-12);
  EXPECT_DOUBLE_EQ(pipedream_objective(as_chain(l), p12, c, with_activations), 3);
  EXPECT_EQ(pipedream_partition(l, c, with_activations), p23);
  EXPECT_EQ(pipedream_partition(as_chain(l), c, with_activations), p12);
}

// GPU memory (stage_memory.hpp): a stage keeps what it receives for its backward, the whole cut.
// Stage 2-3 on host 1 of 2 (1F1B, k = 1 minibatch in flight, no parameters): k (A + a_in) =
// (0.1e9 + 4) + 0.5e9 (0.15e9 as a chain).
TEST(BoundaryBytes, AStageKeepsTheWholeCut) {
  const std::vector<LayerCost> l = skip_layers();
  const MemoryLimit ample{{1e12, 1e12}, 1};
  EXPECT_DOUBLE_EQ(StageMemory(l, ample, {}, 2).bytes(2, 4, 1, 1), 0.6e9 + 4);
  const std::vector<LayerCost> chain = as_chain(l);
  EXPECT_DOUBLE_EQ(StageMemory(chain, ample, {}, 2).bytes(2, 4, 1, 1), 0.25e9 + 4);
}
