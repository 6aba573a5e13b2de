// The closed-form gradient syncs (models/training/closed_form_sync.hpp) against times computed by
// hand: ring_closed_form and reduce_scatter_all_gather_closed_form over 4 workers on a star of
// 1 GB/s, 100 ns links (a route crosses two: 200 ns), costs 5 us launch and the Simple protocol
// at 1 us per hop. A chunk of 1M parameters of 2 bytes is 2 MB.
#include <gtest/gtest.h>

#include <vector>

#include "models/training/policies.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "sim_core/network/topology_builders.hpp"

using namespace mlsim;
using namespace mlsim::training;

namespace closed_form_sync_test {

// When each chunk was reported, and how.
struct Recorder : SyncEvents {
  explicit Recorder(Engine& e) : engine(e) {}
  void on_chunk(std::size_t owner, const Chunk& c, bool release, bool arrived) override {
    EXPECT_EQ(owner, 0u);
    EXPECT_TRUE(release);
    EXPECT_TRUE(arrived);
    chunks.push_back(c);
    at.push_back(engine.now());
  }
  Engine& engine;
  std::vector<Chunk> chunks;
  std::vector<Time> at;
};

struct Bench {
  Bench()
      : topo(build_topology(StarSpec{4, LinkSpec{Bandwidth{1e9}, Time::ns(100)}})),
        net(engine, topo, Sharing::kMaxMin),
        links(topo, net),
        events(engine) {}
  // The strategy `sync` over the first `workers` hosts, `sharers` GPUs per host link.
  std::unique_ptr<GradientSync> make(const std::string& sync, std::size_t workers, int sharers) {
    SyncOptions o;
    o.workers.assign(topo.hosts().begin(),
                     topo.hosts().begin() + static_cast<std::ptrdiff_t>(workers));
    o.layer_parameters = {1'000'000};
    o.bytes_per_parameter = 2;
    o.costs.launch = Time::us(5);
    o.costs.of(collectives::Protocol::kSimple) = {true, Time::us(1), 1.0};
    o.links = &links;
    o.host_link_sharers = sharers;
    return training_policies().syncs.get(sync, "").value(SyncSetup{engine, net, events, o});
  }
  // When the chunk of 1M parameters arrives, started at 0.
  Time run(const std::string& sync, std::size_t workers, int sharers) {
    last = make(sync, workers, sharers);
    EXPECT_EQ(last->entry(), GradientSync::Entry::kAllWorkers);
    EXPECT_TRUE(last->one_tensor_at_a_time());
    events.chunks.clear();
    events.at.clear();
    const Time start = engine.now();
    last->start(0, Chunk{0, 0, 1'000'000});
    engine.run();
    EXPECT_EQ(events.chunks.size(), 1u);
    return events.at.empty() ? Time::zero() : events.at.back() - start;
  }

  Engine engine;
  Topology topo;
  FluidNetwork net;
  LinkConditions links;
  Recorder events;
  std::unique_ptr<GradientSync> last;  // the strategy of the last run
};

}  // namespace closed_form_sync_test

// All-reduce: 5 us + 2(n-1) = 6 steps x (1 us + 200 ns) + 2(n-1)/n x 2 MB / 1 GB/s
//   = 5,000 + 7,200 + 3,000,000 = 3,012,200 ns; with 2 GPUs per host link (0.5 GB/s each)
//   5,000 + 7,200 + 6,000,000 = 6,012,200 ns.
// Reduce-scatter then all-gather, each 5 us + (n-1) = 3 steps x 1.2 us + (n-1)/n x 2 MB / 1 GB/s
//   = 5,000 + 3,600 + 1,500,000 = 1,508,600 ns: 3,017,200 ns, one launch more than the all-reduce.
// Two workers (one route, both ways 200 ns): 5,000 + 2 x 1,200 + 1 x 2 MB / 1 GB/s = 2,007,400 ns.
// One worker: nothing to reduce with, at once.
TEST(ClosedFormSync, ChunkTimesByHand) {
  closed_form_sync_test::Bench b;
  EXPECT_EQ(b.run("ring_closed_form", 4, 1).count_ns(), 3'012'200);
  EXPECT_EQ(b.last->bytes_sent(), 0);  // nothing crosses the network
  EXPECT_EQ(b.last->bytes_delivered(), 0);
  EXPECT_EQ(b.last->messages(), 0u);
  EXPECT_EQ(b.run("ring_closed_form", 4, 2).count_ns(), 6'012'200);
  EXPECT_EQ(b.run("reduce_scatter_all_gather_closed_form", 4, 1).count_ns(), 3'017'200);
  EXPECT_EQ(b.run("ring_closed_form", 2, 1).count_ns(), 2'007'400);
  EXPECT_EQ(b.run("ring_closed_form", 1, 1).count_ns(), 0);
  EXPECT_EQ(b.run("reduce_scatter_all_gather_closed_form", 1, 1).count_ns(), 0);
}

// The closed form is what the ring takes on idle links: the event-driven ring (the "ring" sync,
// the same costs, through the flow backend) ends at the same nanosecond for 4 workers.
TEST(ClosedFormSync, EqualsTheRingOnIdleLinks) {
  closed_form_sync_test::Bench b;
  const Time closed = b.run("ring_closed_form", 4, 1);
  EXPECT_EQ(b.run("ring", 4, 1), closed);
  EXPECT_EQ(b.last->bytes_delivered(), 4 * 6 * 500'000);  // 4 workers x 6 steps of S/4
  EXPECT_EQ(b.run("reduce_scatter_all_gather", 4, 1),
            b.run("reduce_scatter_all_gather_closed_form", 4, 1));
}
