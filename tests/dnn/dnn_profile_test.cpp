#include "sim_core/hardware/dnn_profile.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "sim_core/base/error.hpp"

using namespace mlsim;

namespace {
DnnProfile parse(const std::string& text) {
  std::istringstream in(text);
  return parse_pipedream_graph(in, "test.txt");
}
}  // namespace

TEST(DnnProfile, ParsesLayersInTopologicalOrder) {
  // Lines are out of order, as PipeDream writes them; edges give the order 1 -> 3 -> 2.
  auto p = parse(
      "node2 -- Linear(in_features=4, out_features=2, bias=True) -- forward_compute_time=0.5, "
      "backward_compute_time=0.75, activation_size=8.000, parameter_size=40.000\n"
      "node1 -- Input -- forward_compute_time=10.0, backward_compute_time=0.0, "
      "activation_size=16.0, parameter_size=0.0\n"
      "node3 -- LSTM(4, 4) -- forward_compute_time=1.25, backward_compute_time=2.0, "
      "activation_size=[6.0; 2.0; 2.0], parameter_size=128.000\n"
      "\tnode1 -- node3\n"
      "\tnode3 -- node2\n");
  ASSERT_EQ(p.layers.size(), 3u);
  EXPECT_EQ(p.layers[0].id, "node1");
  EXPECT_TRUE(p.layers[0].is_input);
  EXPECT_EQ(p.layers[1].id, "node3");
  EXPECT_EQ(p.layers[1].activation.count, 10);  // 6 + 2 + 2
  EXPECT_EQ(p.layers[1].parameters.count, 128);
  EXPECT_EQ(p.layers[2].description, "Linear(in_features=4, out_features=2, bias=True)");
  EXPECT_DOUBLE_EQ(p.layers[2].backward_ms, 0.75);
  EXPECT_EQ(p.total_parameters().count, 168);
  EXPECT_DOUBLE_EQ(p.forward_ms(), 1.75);       // Input excluded
  EXPECT_DOUBLE_EQ(p.forward_ms(true), 11.75);  // data loading included
  EXPECT_DOUBLE_EQ(p.backward_ms(), 2.75);
  ASSERT_EQ(p.edges.size(), 2u);
  EXPECT_EQ(p.edges[0], (std::pair<std::size_t, std::size_t>{0, 1}));
}

TEST(DnnProfile, RejectsMalformedInput) {
  EXPECT_THROW(parse(""), InputError);
  EXPECT_THROW(parse("node1 -- X -- forward_compute_time=1, backward_compute_time=1\n"),
               InputError);
  EXPECT_THROW(parse("node1 -- X -- forward_compute_time=-1, backward_compute_time=1, "
                     "activation_size=1, parameter_size=1\n"),
               InputError);
  EXPECT_THROW(parse("node1 -- X -- forward_compute_time=1, backward_compute_time=1, "
                     "activation_size=1, parameter_size=1, colour=2\n"),
               InputError);
  const std::string a =
      "node1 -- A -- forward_compute_time=1, backward_compute_time=1, activation_size=1, "
      "parameter_size=1\n";
  const std::string b =
      "node2 -- B -- forward_compute_time=1, backward_compute_time=1, activation_size=1, "
      "parameter_size=1\n";
  EXPECT_THROW(parse(a + a), InputError);                     // defined twice
  EXPECT_THROW(parse(a + "\tnode1 -- node9\n"), InputError);  // undefined layer
  EXPECT_THROW(parse(a + b + "\tnode1 -- node2\n\tnode2 -- node1\n"), InputError);  // cycle
  try {
    parse(a + "garbage\n");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "test.txt:2");
  }
  EXPECT_THROW(read_pipedream_graph("/nonexistent/graph.txt"), InputError);
}

// The shipped copies: parameter counts must equal the published torchvision model sizes
// (AlexNet 61,100,840; VGG16 138,357,544; ResNet-50 25,557,032 parameters, fp32).
TEST(DnnProfile, ShippedCopiesMatchPublishedParameterCounts) {
  const std::filesystem::path dir =
      std::filesystem::path(MLSIM_SOURCE_DIR) / "workloads/dnn/pipedream";
  EXPECT_EQ(read_pipedream_graph(dir / "alexnet/graph.txt").total_parameters().count,
            4 * 61'100'840LL);
  EXPECT_EQ(read_pipedream_graph(dir / "vgg16/graph.txt").total_parameters().count,
            4 * 138'357'544LL);
  auto resnet = read_pipedream_graph(dir / "resnet50/graph.txt");
  EXPECT_EQ(resnet.total_parameters().count, 4 * 25'557'032LL);
  EXPECT_EQ(resnet.layers.front().id, "node1");  // the input comes first
  EXPECT_TRUE(resnet.layers.front().is_input);
  auto gnmt = read_pipedream_graph(dir / "gnmt/graph.txt");
  EXPECT_GT(gnmt.layers.size(), 40u);
}

// Piper's BERT as converted by tools/piper_to_pipedream.py (workloads/dnn/piper/README.md). By
// hand from bert32a100.json: an embedding of 200,824,320 bytes, 32 transformer layers of
// 176,997,120 and a pooler of 14,749,440: 5,879,481,600 bytes. Node 5's timePerSample is
// 0.030474 s: forward 30.474 / 3 = 10.158 ms and backward 20.316 ms per sample, four times that
// with 4 samples. The three zero-time "tensor" nodes are inputs.
TEST(DnnProfile, ShippedPiperBertConversion) {
  const std::filesystem::path dir =
      std::filesystem::path(MLSIM_SOURCE_DIR) / "workloads/dnn/piper/bert32";
  const DnnProfile one = read_pipedream_graph(dir / "graph_mb1.txt");
  const DnnProfile four = read_pipedream_graph(dir / "graph_mb4.txt");
  EXPECT_EQ(one.total_parameters().count, 5'879'481'600LL);
  EXPECT_EQ(four.total_parameters().count, 5'879'481'600LL);
  ASSERT_EQ(one.layers.size(), 37u);
  int inputs = 0, transformers = 0;
  for (const LayerProfile& l : one.layers) {
    inputs += l.is_input;
    transformers += l.description == "ParallelTransformerLayer";
    if (l.id == "node5") {
      EXPECT_NEAR(l.forward_ms, 10.158, 1e-6);
      EXPECT_NEAR(l.backward_ms, 20.316, 1e-6);
    }
  }
  EXPECT_EQ(inputs, 3);
  EXPECT_EQ(transformers, 32);
  EXPECT_NEAR(four.forward_ms(), 4 * one.forward_ms(), 1e-5);
  EXPECT_NEAR(four.backward_ms(), 4 * one.backward_ms(), 1e-5);
  // Forward + backward = 1000 x the sum of the file's timePerSample, 0.972864 s (rounded to
  // 1e-6 ms per layer when written).
  EXPECT_NEAR(one.forward_ms() + one.backward_ms(), 972.864, 1e-4);
}

// Every PipeDream profile in the shared data parses and is acyclic.
TEST(DnnProfile, AllSharedPipeDreamProfilesParse) {
  const std::filesystem::path root =
      std::filesystem::path(MLSIM_SHARED_DATA_DIR) / "dnn_profiles/pipedream";
  if (!std::filesystem::exists(root)) GTEST_SKIP() << "shared data not found at " << root;
  int files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    if (e.path().filename() != "graph.txt") continue;
    auto p = read_pipedream_graph(e.path());
    EXPECT_GT(p.layers.size(), 1u) << e.path();
    EXPECT_GT(p.total_parameters().count, 0) << e.path();
    ++files;
  }
  EXPECT_GE(files, 10);
}
