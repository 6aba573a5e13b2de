// MessageNetwork (sim_core/network/switch_program.hpp): a switch program on a switch node
// receives what is addressed to it and sends onward over the backend, by hand on a star of
// 10 Gbps links (1250 bytes = 1 us on the wire) with 1 us latency, flow backend.
#include <gtest/gtest.h>

#include <vector>

#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/switch_program.hpp"
#include "sim_core/network/topology_builders.hpp"

using namespace mlsim;

namespace {

struct Note {
  int id = 0;
};

struct Arrival {
  int id;
  NodeId from;
  Time at;
};

class Recorder : public MessageReceiver<Note> {
 public:
  explicit Recorder(Engine& e) : engine_(e) {}
  void on_message(const Note& n, NodeId from) override {
    log.push_back({n.id, from, engine_.now()});
  }
  std::vector<Arrival> log;

 private:
  Engine& engine_;
};

// Forwards every note to host 1 after a 200 ns pipeline.
class Relay : public SwitchProgram<Note> {
 public:
  Relay(Engine& e, MessageNetwork<Note>*& net, NodeId self, NodeId to)
      : engine_(e), net_(net), self_(self), to_(to) {}
  Time pipeline_latency() const override { return Time::ns(200); }
  void on_message(const Note& n, NodeId) override {
    seen.push_back(engine_.now());
    net_->send(self_, to_, Bytes{1250}, n);
  }
  std::vector<Time> seen;

 private:
  Engine& engine_;
  MessageNetwork<Note>*& net_;
  NodeId self_, to_;
};

struct Star {
  Topology topology = build_topology(StarSpec{2, LinkSpec{Bandwidth{1.25e9}, Time::us(1)}});
  NodeId host(int i) const { return topology.hosts()[static_cast<std::size_t>(i)]; }
  NodeId sw() const { return *topology.find("sw0"); }
};

// The star on the flow backend, with a recorder attached at host 1.
struct StarNet {
  explicit StarNet(Egress egress = Egress::kFifo) : net(engine, flow, s.topology, egress) {
    net.attach(s.host(1), host1);
  }
  Star s;
  Engine engine;
  FluidNetwork flow{engine, s.topology, Sharing::kMaxMin};
  MessageNetwork<Note> net;
  Recorder host1{engine};
};

}  // namespace

// Three notes of 1250 B sent at once from host 0 to the switch. FIFO egress: they leave host 0
// at 0-1, 1-2 and 2-3 us, so the program sees them at 1 + 1 + 0.2 = 2.2, 3.2 and 4.2 us, and
// forwards each at once: the switch's port to host 1 is free each time, so host 1 gets them at
// 2.2 + 2 = 4.2, 5.2 and 6.2 us. With shared egress the three are sent together and share host
// 0's link max-min: all three have left at 3 us and reach the program at 4.2 us; the switch
// forwards all three at once, they share its link to host 1 and all arrive at 4.2 + 3 + 1 =
// 8.2 us.
TEST(MessageNetwork, SwitchProgramReceivesAndSendsOnwardInFifoOrder) {
  for (const Egress egress : {Egress::kFifo, Egress::kShared}) {
    SCOPED_TRACE(egress == Egress::kFifo ? "fifo" : "shared");
    StarNet r(egress);
    auto& [s, engine, flow, net, host1] = r;
    MessageNetwork<Note>* handle = &net;
    Relay relay(engine, handle, s.sw(), s.host(1));
    net.host(s.sw(), relay);
    for (int i = 0; i < 3; ++i) net.send(s.host(0), s.sw(), Bytes{1250}, Note{i});
    engine.run();
    ASSERT_EQ(host1.log.size(), 3u);
    const bool fifo = egress == Egress::kFifo;
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(relay.seen[static_cast<std::size_t>(i)],
                fifo ? Time::ns(2200 + 1000 * i) : Time::ns(4200));
      EXPECT_EQ(host1.log[static_cast<std::size_t>(i)].at,
                fifo ? Time::ns(4200 + 1000 * i) : Time::ns(8200));
      EXPECT_EQ(host1.log[static_cast<std::size_t>(i)].from, s.sw());
    }
    EXPECT_EQ(net.sent(), 6u);
    EXPECT_EQ(flow.totals().bytes_delivered, Bytes{6 * 1250});
  }
}

// The backlog an ECN threshold reads: three notes queued at host 0's port at time 0 are 3750 B
// (one leaving, two waiting); at 1.5 us, half of the second is left plus the third: 1875 B.
TEST(MessageNetwork, EgressBacklogCountsWhatHasNotLeft) {
  StarNet r;
  auto& [s, engine, flow, net, host1] = r;
  for (int i = 0; i < 3; ++i) net.send(s.host(0), s.host(1), Bytes{1250}, Note{i});
  EXPECT_DOUBLE_EQ(net.egress_backlog_bytes(s.host(0), s.host(1)), 3750);
  double at_1500 = -1;
  engine.schedule_at(Time::ns(1500),
                     [&] { at_1500 = net.egress_backlog_bytes(s.host(0), s.host(1)); });
  engine.run();
  EXPECT_DOUBLE_EQ(at_1500, 1875);
  // host 0 -> host 1 crosses two links of 1 us latency: 1 + 2 = 3, 4, 5 us (the switch forwards
  // transfers in the backend, no program on the way).
  ASSERT_EQ(host1.log.size(), 3u);
  EXPECT_EQ(host1.log[0].at, Time::ns(3000));
  EXPECT_EQ(host1.log[2].at, Time::ns(5000));
}

// A message whose route is gone is not delivered; the handler sees it once.
TEST(MessageNetwork, FailedRouteIsReportedUndelivered) {
  StarNet r;
  auto& [s, engine, flow, net, host1] = r;
  std::vector<int> lost;
  net.on_undelivered([&](const Note& n, NodeId, NodeId) { lost.push_back(n.id); });
  flow.set_link_up(s.topology.out_links(s.host(0)).front(), false);
  net.send(s.host(0), s.host(1), Bytes{1250}, Note{7});
  engine.run();
  EXPECT_TRUE(host1.log.empty());
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0], 7);
  EXPECT_EQ(net.undelivered(), 1u);
  EXPECT_EQ(net.paths_in_flight(), 0u);  // a path emptied by a loss is erased too
}

namespace {

// A program on sw0 that sends a long note (12,500 B) and then a short one (1,250 B) to h1 under
// sw1 when the test starts it: sw0 -> sw1 at 1e10 B/s, sw1 -> h1 at 1.25e9 B/s, 1 us latency
// each (a ToR's fast uplink, then a host's slower access link in another rack).
struct TwoHops {
  Topology topology = build_topology(ExplicitSpec{
      {{"sw0", NodeKind::kSwitch}, {"sw1", NodeKind::kSwitch}, {"h1", NodeKind::kHost}},
      {{"sw0", "sw1", LinkSpec{Bandwidth{1e10}, Time::us(1)}},
       {"sw1", "h1", LinkSpec{Bandwidth{1.25e9}, Time::us(1)}}}});
  NodeId node(const char* name) const { return *topology.find(name); }
};

class SilentProgram : public SwitchProgram<Note> {
 public:
  Time pipeline_latency() const override { return Time::zero(); }
  void on_message(const Note&, NodeId) override {}
};

// TwoHops on the flow backend with `sharing` (kNone: analytic), a silent program on sw0 and a
// recorder on h1; send() sends a note from sw0 to h1.
struct TwoHopsNet {
  explicit TwoHopsNet(Sharing sharing)
      : backend(engine, t.topology, sharing), net(engine, backend, t.topology) {
    net.host(t.node("sw0"), program);
    net.attach(t.node("h1"), h1);
  }
  void send(Bytes bytes, int id, std::uint64_t flow_label = 0) {
    net.send(t.node("sw0"), t.node("h1"), bytes, Note{id}, flow_label);
  }
  TwoHops t;
  Engine engine;
  FluidNetwork backend;
  MessageNetwork<Note> net;
  SilentProgram program;
  Recorder h1{engine};
};

}  // namespace

// Egress pacing uses the first link: the long note leaves sw0 over 0-1.25 us and the short one
// starts at 1.25 us. Both then cross sw1 -> h1, the slower link.
// - flow (max-min): the long note alone sends 1.25e9 x 1.25 us = 1,562.5 B by 1.25 us; then the
//   two share 0.625e9 B/s each; the short one's 1,250 B take 2 us, sent by 3.25 us, delivered
//   at 3.25 + 2 (latency) = 5.25 us; the long one has 12,500 - 1,562.5 - 1,250 = 9,687.5 B left,
//   alone at 1.25e9: 7.75 us, sent by 11 us, delivered at 13 us.
// - analytic (latency + bytes / bottleneck, no sharing): the long note at 2 + 10 = 12 us, the
//   short one at 1.25 + 2 + 1 = 4.25 us.
// Both backends finish the short note first (before 2026-12-07 MessageNetwork handed it on
// then: h1 saw note 1 at 5.25 us (flow) / 4.25 us (analytic), then note 0). A real port keeps
// one queue per path, so the short note is handed on when the long one arrives, after it.
TEST(MessageNetwork, MessagesOnOnePathAreHandedOnInSendOrderThoughTheBackendEndsThemSwapped) {
  for (const Sharing sharing : {Sharing::kMaxMin, Sharing::kNone}) {
    const bool flow = sharing == Sharing::kMaxMin;
    SCOPED_TRACE(flow ? "flow" : "analytic");
    TwoHopsNet r(sharing);
    r.send(Bytes{12'500}, 0);
    r.send(Bytes{1'250}, 1);
    r.engine.run();
    const auto& h1 = r.h1;
    ASSERT_EQ(h1.log.size(), 2u);
    EXPECT_EQ(h1.log[0].id, 0);
    EXPECT_EQ(h1.log[1].id, 1);
    const Time long_done = flow ? Time::ns(13'000) : Time::ns(12'000);
    EXPECT_EQ(h1.log[0].at, long_done);
    EXPECT_EQ(h1.log[1].at, long_done);  // it arrived first and waited for note 0
  }
}

// On another flow label (another route, in general) no order is kept: the short note is handed
// on when it arrives. And a failed message does not hold back the one sent after it.
TEST(MessageNetwork, OrderIsPerFlowLabelAndAFailedMessageReleasesTheNext) {
  {
    TwoHopsNet r(Sharing::kNone);
    r.send(Bytes{12'500}, 0, /*flow_label=*/0);
    r.send(Bytes{1'250}, 1, /*flow_label=*/1);
    r.engine.run();
    const auto& h1 = r.h1;
    ASSERT_EQ(h1.log.size(), 2u);
    EXPECT_EQ(h1.log[0].id, 1);  // as analytic ends it: 4.25 us
    EXPECT_EQ(h1.log[0].at, Time::ns(4'250));
    EXPECT_EQ(h1.log[1].at, Time::ns(12'000));
  }
  {
    // Analytic: the long note would end at 12 us, the short one at 4.25 us and waits for it.
    // sw1 -> h1 fails at 6 us with the long note still on it: that transfer fails (no other
    // route), and the short note is handed on then.
    TwoHopsNet r(Sharing::kNone);
    const TwoHops& t = r.t;
    std::vector<int> lost;
    r.net.on_undelivered([&](const Note& n, NodeId, NodeId) { lost.push_back(n.id); });
    r.send(Bytes{12'500}, 0);
    r.send(Bytes{1'250}, 1);
    LinkId down = 0;  // sw1 -> h1
    for (const LinkId l : t.topology.out_links(t.node("sw1")))
      if (t.topology.link(l).dst == t.node("h1")) down = l;
    r.engine.schedule_at(Time::ns(6'000), [&] { r.backend.set_link_up(down, false); });
    r.engine.run();
    ASSERT_EQ(lost, std::vector<int>{0});
    const auto& h1 = r.h1;
    ASSERT_EQ(h1.log.size(), 1u);
    EXPECT_EQ(h1.log[0].id, 1);
    EXPECT_EQ(h1.log[0].at, Time::ns(6'000));
    EXPECT_EQ(r.net.paths_in_flight(), 0u);  // the failed note emptied the path with the other
  }
}

// A path's state lives while it has a message in flight and is erased when its last one is
// handed on, so memory follows the messages on the way, not the paths ever used. Analytic, as
// above: on label 0 the long note ends at 12 us and the short one at 4.25 us (it waits); a note
// on label 1 leaves sw0 after both (1.25 + 0.125 = 1.375 us at 1e10 B/s) and ends at 1.375 + 2
// (latency) + 1 (1,250 B at 1.25e9 B/s) = 4.375 us. At 5 us only label 0's path is left; at the
// end none, and label 0's order was kept (note 0 then note 1, both at 12 us).
TEST(MessageNetwork, APathsStateIsErasedWhenItsLastMessageIsHandedOn) {
  TwoHopsNet r(Sharing::kNone);
  r.send(Bytes{12'500}, 0, /*flow_label=*/0);
  r.send(Bytes{1'250}, 1, /*flow_label=*/0);
  r.send(Bytes{1'250}, 2, /*flow_label=*/1);
  EXPECT_EQ(r.net.paths_in_flight(), 2u);
  std::size_t at_5us = 0;
  std::size_t handed_on_at_5us = 0;
  r.engine.schedule_at(Time::ns(5'000), [&] {
    at_5us = r.net.paths_in_flight();
    handed_on_at_5us = r.h1.log.size();
  });
  r.engine.run();
  EXPECT_EQ(at_5us, 1u);
  EXPECT_EQ(handed_on_at_5us, 1u);
  EXPECT_EQ(r.net.paths_in_flight(), 0u);
  ASSERT_EQ(r.h1.log.size(), 3u);
  EXPECT_EQ(r.h1.log[0].id, 2);
  EXPECT_EQ(r.h1.log[0].at, Time::ns(4'375));
  EXPECT_EQ(r.h1.log[1].id, 0);
  EXPECT_EQ(r.h1.log[2].id, 1);
  EXPECT_EQ(r.h1.log[1].at, Time::ns(12'000));
  EXPECT_EQ(r.h1.log[2].at, Time::ns(12'000));
  // A path used again after it was erased starts afresh: sent at 12 us with sw0's uplink free,
  // the transfer starts at once and ends at 12 + 2 + 1 = 15 us.
  r.send(Bytes{1'250}, 3, /*flow_label=*/0);
  EXPECT_EQ(r.net.paths_in_flight(), 1u);
  r.engine.run();
  EXPECT_EQ(r.net.paths_in_flight(), 0u);
  ASSERT_EQ(r.h1.log.size(), 4u);
  EXPECT_EQ(r.h1.log[3].at, Time::ns(15'000));
}
