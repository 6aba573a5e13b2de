// What a training job needs of the collectives, against times computed by hand: workers that
// join a parameter-server all-reduce at different times with per-participant events, shards cut
// at whole elements, a per-message latency, and one host send clock shared by two collectives.
// Links are 1e6 bytes/s without latency unless said; on a star a message crosses two links.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "sim_core/collectives/collective.hpp"
#include "sim_core/collectives/host_send_clock.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology_builders.hpp"

using namespace mlsim;
using namespace mlsim::collectives;

namespace {

CollectiveSpec ps(std::int64_t bytes, int servers = 1) {
  CollectiveSpec s;
  s.operation = Operation::kAllReduce;
  s.algorithm = Algorithm::kParameterServer;
  s.bytes = Bytes{bytes};
  s.servers = servers;
  s.window = 0;
  return s;
}

struct Event {
  std::uint32_t participant;
  ParticipantEvent what;
  double at_s;
  bool operator==(const Event&) const = default;
};

}  // namespace

// 2 workers + 1 server, S = 1 MB. Worker 0 joins at 0: its push takes [0, 1] alone. Worker 1
// joins at 2: push [2, 3]. The server then has both and pulls to both at once over its one link
// to the switch, each at half rate: both end at 3 + 2 = 5.
TEST(StaggeredEntry, WorkersJoinAParameterServerAtDifferentTimes) {
  const Topology topo = build_topology(StarSpec{3, LinkSpec{Bandwidth{1e6}, Time::zero()}});
  Engine engine;
  FluidNetwork net(engine, topo, Sharing::kMaxMin);
  std::vector<Event> events;
  Time done = Time::max();
  Collective c(engine, net, topo.hosts(), ps(1'000'000),
               [&](const CollectiveResult& r) { done = r.finished; });
  ASSERT_TRUE(c.supports_join());
  c.set_participant_callback([&](std::uint32_t p, ParticipantEvent e) {
    events.push_back({p, e, engine.now().seconds()});
  });
  c.join(0);
  engine.schedule_at(Time::s(2), [&] { c.join(1); });
  engine.run();
  EXPECT_EQ(done, Time::s(5));
  // The two pulls end at the same time: in the backend's order, here by participant.
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return std::tie(a.at_s, a.participant) < std::tie(b.at_s, b.participant);
  });
  EXPECT_EQ(events, (std::vector<Event>{{0, ParticipantEvent::kSent, 1},
                                        {1, ParticipantEvent::kSent, 3},
                                        {0, ParticipantEvent::kHolds, 5},
                                        {1, ParticipantEvent::kHolds, 5}}));
  EXPECT_EQ(c.result().bytes_delivered, Bytes{4'000'000});  // 2 pushes + 2 pulls of 1 MB
}

// 1 worker, 4 servers, S = 20 bytes of 4-byte values on links of 4 bytes/s. Shards of whole
// values are 2, 1, 1, 1 values = 8, 4, 4, 4 bytes (by bytes they would be 5 each).
// Pushes share the worker's uplink: 1 B/s each; the 4-byte ones end at 4, the 8-byte one has 4
// left and ends alone at 5. Pulls of the small shards start at 4 on the worker's downlink at 4/3
// B/s each; at 5 each has 8/3 left and the big pull joins: 1 B/s each, the small ones end at
// 5 + 8/3; the big one has 8 - 8/3 = 16/3 left, alone at 4 B/s: ends at 5 + 8/3 + 4/3 = 9.
// With 5-byte shards all four share equally: pushes end at 5, pulls at 10.
TEST(StaggeredEntry, ParameterServerShardsAreWholeElements) {
  const Topology topo = build_topology(StarSpec{5, LinkSpec{Bandwidth{4}, Time::zero()}});
  for (std::int64_t element : {4, 1}) {
    Engine engine;
    FluidNetwork net(engine, topo, Sharing::kMaxMin);
    CollectiveSpec spec = ps(20, 4);
    spec.element_bytes = element;
    const CollectiveResult r = run_collective(engine, net, topo.hosts(), spec);
    EXPECT_NEAR(r.seconds(), element == 4 ? 9.0 : 10.0, 1e-6) << element;
  }
  CollectiveSpec bad = ps(22, 4);
  bad.element_bytes = 4;
  EXPECT_THROW(validate(bad, 5, "system"), InputError);
}

// 1 worker + 1 server, S = 1 MB, message latency 0.5 s: push [0.5, 1.5], pull [2, 3].
TEST(StaggeredEntry, MessageLatencyDelaysEachMessageWithoutSerialising) {
  const Topology topo = build_topology(StarSpec{2, LinkSpec{Bandwidth{1e6}, Time::zero()}});
  Engine engine;
  FluidNetwork net(engine, topo, Sharing::kMaxMin);
  CollectiveSpec spec = ps(1'000'000);
  spec.host.message_latency = Time::ms(500);
  EXPECT_EQ(run_collective(engine, net, topo.hosts(), spec).finished, Time::s(3));
}

// Host 0 sends 1 MB to host 1 and 1 MB to host 2 in two send/recv collectives, each message
// costing its sender 1 s of overhead. With one clock for host 0, the first message leaves at 1
// and has sent everything by 2, when the second leaves: it ends at 3. With a clock per
// collective both leave at 1 and share host 0's uplink: both end at 3.
TEST(StaggeredEntry, ASharedHostSendClockSerialisesMessagesOfSeveralCollectives) {
  const Topology topo = build_topology(StarSpec{3, LinkSpec{Bandwidth{1e6}, Time::zero()}});
  for (bool shared : {true, false}) {
    Engine engine;
    FluidNetwork net(engine, topo, Sharing::kMaxMin);
    HostSendClock clock;
    CollectiveSpec spec;
    spec.operation = Operation::kSendRecv;
    spec.algorithm = Algorithm::kDirect;
    spec.bytes = Bytes{1'000'000};
    spec.host.message_overhead = Time::s(1);
    if (shared) spec.host.send_clock = &clock;
    std::vector<Time> done;
    auto record = [&](const CollectiveResult& r) { done.push_back(r.finished); };
    Collective a(engine, net, {topo.hosts()[0], topo.hosts()[1]}, spec, record);
    Collective b(engine, net, {topo.hosts()[0], topo.hosts()[2]}, spec, record);
    a.start();
    b.start();
    engine.run();
    EXPECT_EQ(done, shared ? (std::vector<Time>{Time::s(2), Time::s(3)})
                           : (std::vector<Time>{Time::s(3), Time::s(3)}))
        << shared;
  }
}

TEST(StaggeredEntry, OnlyTheParameterServerTakesStaggeredEntry) {
  const Topology topo = build_topology(StarSpec{3, LinkSpec{Bandwidth{1e6}, Time::zero()}});
  Engine engine;
  FluidNetwork net(engine, topo, Sharing::kMaxMin);
  CollectiveSpec ring = ps(3);
  ring.algorithm = Algorithm::kRing;
  Collective c(engine, net, topo.hosts(), ring);
  EXPECT_FALSE(c.supports_join());
}

// A finished collective rearmed runs the same round again on 2 hosts, 1 MB. ps (1 worker + 1
// server): push [0,1] pull [1,2]; rearmed and started at 5: done at 7. ring of 2: two steps of
// 0.5 MB each way, 0.5 s each: done at 1, then at 6. Traffic adds up over both rounds.
TEST(StaggeredEntry, ARearmedCollectiveRunsAnotherRound) {
  const Topology topo = build_topology(StarSpec{2, LinkSpec{Bandwidth{1e6}, Time::zero()}});
  for (Algorithm a : {Algorithm::kParameterServer, Algorithm::kRing}) {
    Engine engine;
    FluidNetwork net(engine, topo, Sharing::kMaxMin);
    CollectiveSpec spec = ps(1'000'000);
    spec.algorithm = a;
    std::vector<Time> done;
    Collective c(engine, net, topo.hosts(), spec,
                 [&](const CollectiveResult& r) { done.push_back(r.finished); });
    c.start();
    engine.run();
    ASSERT_TRUE(c.rearm());
    EXPECT_FALSE(c.done());
    engine.schedule_at(Time::s(5), [&] { c.start(); });
    engine.run();
    // ps: push 1 s then pull 1 s. ring of 2: each step sends 0.5 MB each way, 0.5 s, 2 steps.
    const Time one = a == Algorithm::kParameterServer ? Time::s(2) : Time::s(1);
    EXPECT_EQ(done, (std::vector<Time>{one, Time::s(5) + one})) << to_string(a);
    // ps: 1 MB pushed and pulled per round; ring: 2 steps x 2 x 0.5 MB per round.
    EXPECT_EQ(c.result().bytes_delivered, Bytes{4'000'000});
  }
}
