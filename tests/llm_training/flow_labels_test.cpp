// ECMP flow labels (sim_core/workload/flow_labels.hpp): the execution graph and the training
// core label the k-th message between two ranks alike, so on a fabric with several equal paths
// both route it over the same spine. Hand-computed on the smallest such fabric.
//
// Two leaves of one host each, two spines: host links 2 GB/s, each leaf-spine link
// 1 x 2 GB/s / 2 spines = 1 GB/s (LeafSpineSpec's rule), no latency, no collective costs. Two
// 1 MB messages from host 0 to host 1 at the same instant:
//   on different spines: each is held to 1 GB/s by its spine link (the host link's fair share
//     is 2 / 2 = 1 GB/s too), both arrive at 1 MB / 1 GB/s = 1 ms;
//   on the same spine: they share its 1 GB/s link, 0.5 GB/s each, both arrive at 2 ms.
// Which spine a label takes is the router's hash (routing.hpp), checked here by asking the
// router for each transfer's path: per the rule, the pair's messages 0 and 1 take different
// spines; the training core's former label 0 for every message put both on one.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim_core/collectives/point_to_point.hpp"
#include "sim_core/collectives/sender.hpp"
#include "sim_core/hardware/compute.hpp"
#include "sim_core/hardware/cost_model.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "sim_core/workload/flow_labels.hpp"
#include "sim_core/workload/graph_executor.hpp"

namespace mlsim::workload {
namespace {

constexpr std::int64_t kMessage = 1'000'000;

struct TwoSpines {
  Topology topo = build_topology(
      LeafSpineSpec{2, 1, 2, 1.0, LinkSpec{Bandwidth{2e9}, Time::zero()}, Time::zero()});
  Engine engine;
  FluidNetwork net{engine, topo, Sharing::kMaxMin};
  LinkConditions links{topo, net};
  HostSpeeds speeds{topo.nodes().size()};
  NodeHardware hardware{topo.nodes().size()};
  CostModel cost_model;
  Compute compute{engine, hardware, speeds, cost_model};

  // The spine a message with `label` crosses from host 0 to host 1: a send/recv collective of
  // two participants sends one transfer, participant 0 to 1, labelled transfer_label(label, 0, 1).
  std::string spine(std::uint64_t label) {
    const auto path = links.router().route(topo.hosts()[0], topo.hosts()[1],
                                           collectives::transfer_label(label, 0, 1));
    EXPECT_TRUE(path.has_value());
    for (LinkId l : path->links) {
      const std::string& name = topo.node(topo.link(l).dst).name;
      if (name.rfind("spine", 0) == 0) return name;
    }
    ADD_FAILURE() << "no spine on the path";
    return {};
  }
};

// Rank 0 sends `messages` messages of 1 MB to rank 1, none depending on another: all start at
// once (rank 1 posts every receive at the start).
class Burst final : public GraphSource {
 public:
  explicit Burst(int messages) : messages_(messages) {}
  RankId ranks() const override { return 2; }
  std::int64_t first_gpu(RankId r) const override { return r; }
  int width(RankId) const override { return 1; }
  const std::vector<Group>& groups() const override { return groups_; }
  const std::vector<std::vector<Work>>& kernels() const override { return kernels_; }
  const std::vector<std::string>& phases() const override { return phases_; }
  bool next(RankId r, std::vector<Node>& out) override {
    if (given_[static_cast<std::size_t>(r)]) return false;
    given_[static_cast<std::size_t>(r)] = true;
    for (int i = 0; i < messages_; ++i) {
      Node n;
      n.kind = r == 0 ? NodeKind::kSend : NodeKind::kRecv;
      n.target = 1 - r;
      n.phase = 1;
      n.bytes = Bytes{kMessage};
      out.push_back(n);
    }
    return true;
  }

 private:
  int messages_;
  std::vector<Group> groups_;
  std::vector<std::vector<Work>> kernels_;
  std::vector<std::string> phases_ = {"compute", "p2p"};
  bool given_[2] = {false, false};
};

TEST(FlowLabels, TheRuleSendsAPairsFirstTwoMessagesOverDifferentSpines) {
  TwoSpines f;
  EXPECT_NE(f.spine(message_label(0, 1, 0)), f.spine(message_label(0, 1, 1)));
  // A group's label depends on its members and their order only.
  const std::vector<RankId> a = {0, 1, 2}, b = {0, 1, 2}, c = {2, 1, 0};
  EXPECT_EQ(group_label(a), group_label(b));
  EXPECT_NE(group_label(a), group_label(c));
  EXPECT_NE(message_label(0, 1, 0), message_label(1, 0, 0));
}

// The graph: both messages arrive at 1 ms (different spines, above), and both ranks end then.
TEST(FlowLabels, GraphSpreadsAPairsMessagesOverTheSpines) {
  TwoSpines f;
  Burst source(2);
  ExecutorOptions options;
  options.mode = CommunicationMode::kNetwork;
  GraphExecutor executor(f.engine, f.net, f.compute, f.links, source, options, "test");
  executor.start();
  f.engine.run();
  ASSERT_TRUE(executor.done());
  EXPECT_EQ(executor.counts().network_collectives, 2u);
  for (const RankReport& r : executor.reports()) EXPECT_EQ(r.finished.count_ns(), 1'000'000);
}

// The core's messages (collectives::PointToPoint) with the same labels: 1 ms each; both with
// label 0, as the core sent them before, they share one spine: 2 ms each.
TEST(FlowLabels, CoreMessagesWithTheGraphsLabelsTakeItsTime) {
  for (const bool graph_labels : {true, false}) {
    TwoSpines f;
    collectives::PointToPoint p2p(f.engine, f.net, {});
    std::vector<Time> arrived;
    for (std::uint64_t k = 0; k < 2; ++k)
      p2p.send(
          f.topo.hosts()[0], f.topo.hosts()[1], Bytes{kMessage},
          [&](const collectives::CollectiveResult&) { arrived.push_back(f.engine.now()); },
          graph_labels ? message_label(0, 1, k) : 0);
    f.engine.run();
    ASSERT_EQ(arrived.size(), 2u);
    const std::int64_t expected = graph_labels ? 1'000'000 : 2'000'000;
    for (Time t : arrived) EXPECT_EQ(t.count_ns(), expected) << graph_labels;
  }
}

}  // namespace
}  // namespace mlsim::workload
