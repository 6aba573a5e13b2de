// Invariants over randomised workloads, for every scheduler, router and serving mode: every
// request finishes or is reported dropped; the KV pool never holds more blocks than its budget
// and is empty at the end; the tokens generated equal the tokens requested; the router's running
// total of outstanding tokens equals the walk over the queues after every event, and the
// least-outstanding-tokens router's indexed pick is the replica a scan in order would pick.
#include <gtest/gtest.h>

#include "models/serving/serving_system.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "test_support.hpp"

using namespace mlsim;
using namespace mlsim::serving;

namespace {

// A source of `n` requests with random lengths and bursty arrivals (fixed seed per case).
class RandomSource final : public RequestSource {
 public:
  // With `hashes`, prompts continue one of five conversations: block i of conversation c has
  // content id c * 1000 + i, a partial last block a unique id (prefix caching's workload).
  RandomSource(std::uint64_t seed, int n, int max_prompt, int max_output, bool hashes = false)
      : rng_(seed, "property"),
        n_(n),
        max_prompt_(max_prompt),
        max_output_(max_output),
        hashes_(hashes) {}
  static constexpr std::int32_t kBlock = 64;
  std::int32_t hash_block_tokens() const override { return hashes_ ? kBlock : 0; }
  std::optional<RequestSpec> next() override {
    if (i_ >= n_) return std::nullopt;
    RequestSpec r;
    r.id = static_cast<std::uint64_t>(i_++);
    t_ += rng_.exponential(20.0);
    r.arrival = Time::from_seconds(t_);
    r.prompt_tokens =
        1 + static_cast<std::int32_t>(rng_.below(static_cast<std::uint64_t>(max_prompt_)));
    r.output_tokens =
        1 + static_cast<std::int32_t>(rng_.below(static_cast<std::uint64_t>(max_output_)));
    if (hashes_) {
      const std::uint64_t conversation = rng_.below(5);
      const std::int32_t blocks = (r.prompt_tokens + kBlock - 1) / kBlock;
      for (std::int32_t b = 0; b < blocks; ++b)
        r.block_hashes.push_back((b + 1) * kBlock <= r.prompt_tokens
                                     ? conversation * 1000 + static_cast<std::uint64_t>(b)
                                     : 1'000'000 + r.id);
    }
    return r;
  }

 private:
  RandomStream rng_;
  int n_, max_prompt_, max_output_, i_ = 0;
  bool hashes_;
  double t_ = 0;
};

struct Case {
  std::string mode, scheduler, router;
  double utilisation;  // small values squeeze the KV pool to force preemptions and drops
  double escalation;
  bool prefix_caching = false;
  int pp = 1;  // pipeline stages of every replica (separate mode): activations over the network
  // Separate mode: each member's replicas split into a prefill pool and a decode pool.
  bool disaggregated = false;
  int replicas_7b = 2;  // separate mode, colocated: the 7B's replicas (TP 1)
};

}  // namespace

class ServingInvariants : public ::testing::TestWithParam<Case> {};

TEST_P(ServingInvariants, FinishOrDropKvWithinBudgetTokensConserved) {
  const auto& p = GetParam();
  const auto catalog = fixtures::llama2();
  const auto hw = fixtures::gpus();
  ServingConfig c;
  c.gpu = hw.gpu("A100-SXM4-80GB", "");
  c.tiers = 2;
  c.tier_mix = {0.5, 0.5};
  c.escalation_probability = p.escalation;
  c.gpu_memory_utilization = p.utilisation;
  c.prefix_caching = p.prefix_caching;
  // TP all-reduces over a 300 GB/s link, 1 us per message, 10 us launch, no protocols.
  c.tp_allreduce.bandwidth = Bandwidth{300e9};
  c.tp_allreduce.route_latency = Time::us(1);
  c.tp_allreduce.costs.launch = Time::us(10);
  const auto &m7 = catalog.get("llama-2-7b", ""), m13 = catalog.get("llama-2-13b", "");
  auto deployment = [&](const TransformerShape& m, int tp, int replicas,
                        std::vector<std::int32_t> exits, bool mfs) {
    DeploymentConfig d;
    d.name = m.name;
    d.model = m;
    d.tp = tp;
    d.replicas = replicas;
    d.exit_layers = std::move(exits);
    d.scheduler = p.scheduler;
    d.router = p.router;
    d.limits = {64, 512};
    d.mfs = mfs;
    d.pp = p.pp;
    for (int s = 0; s < p.pp; ++s) d.stage_layers.push_back(m.layers / p.pp);
    return d;
  };
  if (p.mode == "mfs") {
    c.deployments.push_back(deployment(m13, 2, 2, {20, 40}, true));
  } else if (p.disaggregated) {
    // 7B: one prefill and two decode replicas; 13B: one of each at TP 2 (8 GPUs).
    const std::vector<std::pair<DeploymentConfig, int>> pools = {
        {deployment(m7, 1, 1, {32, 0}, false), 2}, {deployment(m13, 2, 1, {0, 40}, false), 1}};
    for (const auto& [pool, decode_replicas] : pools) {
      DeploymentConfig pre = pool, dec = pool;
      pre.role = PoolRole::kPrefill;
      pre.decode_pool = static_cast<int>(c.deployments.size()) + 1;
      dec.role = PoolRole::kDecode;
      dec.replicas = decode_replicas;
      dec.host_link = HostLink{Bandwidth{300e9}, Time::us(1)};
      c.deployments.push_back(pre);
      c.deployments.push_back(dec);
    }
  } else {
    c.deployments.push_back(deployment(m7, 1, p.replicas_7b, {32, 0}, false));
    c.deployments.push_back(deployment(m13, 2, 1, {0, 40}, false));
  }
  Engine engine;
  const Topology topo = build_topology(StarSpec{8, {Bandwidth{300e9}, Time::us(1)}});
  fixtures::Platform platform(engine, c.gpu, topo.nodes().size(), topo.hosts());
  FluidNetwork network(engine, topo, Sharing::kMaxMin);
  LinkConditions links(topo, network);
  const int n = 120;
  ServingSystem sys(engine, *platform.compute, topo.hosts(), c,
                    std::make_unique<RandomSource>(7, n, 1500, 300, p.prefix_caching),
                    RandomStream(1, "tiers"), RandomStream(1, "esc"), &network, &links);
  // KV budget checked after every scheduling decision of every replica.
  // The router's running total of outstanding tokens equals the walk over the queues.
  std::int64_t violations = 0, load_mismatches = 0, lost_references = 0, pick_mismatches = 0;
  const Request probe;
  engine.set_periodic_hook(1, [&](Engine&) {
    // The indexed router picks what the scan it replaced picks: the fewest outstanding tokens,
    // the first replica of the deployment among equals; so does a decode pool's hand-off index
    // (whatever the router).
    for (std::size_t d = 0; d < sys.deployment_count(); ++d) {
      Replica* decode = sys.decode_least_loaded(d);
      if (decode == nullptr && sys.router(d).name() != "least_outstanding_tokens") continue;
      const auto& reps = sys.deployment_replicas(d);
      const Replica* scan = reps.front();
      for (const Replica* r : reps)
        if (r->outstanding_tokens() < scan->outstanding_tokens()) scan = r;
      if ((decode != nullptr ? decode : &sys.router(d).pick(probe)) != scan) ++pick_mismatches;
    }
    for (const auto& r : sys.replicas()) {
      if (r->kv().used() > r->kv().total()) ++violations;
      std::int64_t walk = 0;
      for (std::size_t v = 0; v < r->virtual_engines(); ++v) {
        for (const Request* q : r->state(v).waiting()) walk += q->outstanding_tokens();
        for (const Request* q : r->state(v).running()) walk += q->outstanding_tokens();
      }
      if (walk != r->outstanding_tokens()) ++load_mismatches;
      // Prefix caching: every block a queued request references is cached, and the cache's
      // reference count is the sum of the requests' references.
      if (const PrefixCache* cache = r->state().prefix_cache()) {
        std::int64_t refs = 0;
        auto check = [&](const Request* q) {
          refs += q->shared_blocks;
          for (std::int32_t b = 0; b < q->shared_blocks; ++b)
            if (cache->references(q->spec.block_hashes[static_cast<std::size_t>(b)]) < 1)
              ++lost_references;
        };
        for (const Request* q : r->state().waiting()) check(q);
        for (const Request* q : r->state().running()) check(q);
        if (refs != cache->total_references()) ++lost_references;
      }
    }
  });
  sys.start();
  engine.run();
  const auto& mt = sys.metrics();
  EXPECT_EQ(mt.arrived(), static_cast<std::uint64_t>(n));
  EXPECT_EQ(mt.completed() + mt.dropped(), mt.arrived());
  EXPECT_EQ(sys.in_system(), 0);
  EXPECT_EQ(mt.tokens_generated(), mt.tokens_requested());
  EXPECT_EQ(violations, 0);
  EXPECT_EQ(load_mismatches, 0);
  EXPECT_EQ(pick_mismatches, 0);
  EXPECT_EQ(lost_references, 0);
  for (const auto& r : sys.replicas()) {
    EXPECT_LE(r->kv().peak(), r->kv().total());
    // What stays in the pool is the prefix cache's (unreferenced: every reference was returned).
    const PrefixCache* cache = r->state().prefix_cache();
    EXPECT_EQ(r->kv().used(), cache ? cache->held_layer_blocks() : 0) << r->name();
    if (cache) {
      EXPECT_EQ(cache->total_references(), 0);
      EXPECT_EQ(cache->evictable_blocks(), cache->blocks());
    }
    for (std::size_t v = 0; v < r->virtual_engines(); ++v)
      EXPECT_TRUE(r->state(v).waiting().empty() && r->state(v).running().empty());
    if (p.pp > 1) {
      EXPECT_GT(r->activation_bytes(), 0);
    }
  }
  // Every activation sent between pipeline stages and every KV cache sent from a prefill replica
  // to a decode replica arrived.
  if (p.pp > 1 || p.disaggregated) {
    EXPECT_GT(sys.transfers().bytes_sent(), 0);
    EXPECT_EQ(sys.transfers().bytes_delivered(), sys.transfers().bytes_sent());
  }
  Results out;
  sys.finish(out);
  // Per request class (target tier): the classes' counts sum to the overall ones, both tiers are
  // drawn (mix 0.5/0.5 over 120 requests), and each class's goodput is its SLO-met count over
  // the makespan, so the goodputs sum to the overall goodput.
  {
    const auto& m = out.metrics();
    double arrived = 0, completed = 0, dropped = 0, slo_met = 0, goodput = 0;
    for (int t = 0; t < 2; ++t) {
      const std::string k = "serving_tier" + std::to_string(t) + "_";
      EXPECT_GT(m.at(k + "requests_arrived"), 0) << k;
      EXPECT_EQ(m.at(k + "requests_completed") + m.at(k + "requests_dropped"),
                m.at(k + "requests_arrived"))
          << k;
      arrived += m.at(k + "requests_arrived");
      completed += m.at(k + "requests_completed");
      dropped += m.at(k + "requests_dropped");
      slo_met += m.at(k + "requests_slo_met");
      goodput += m.at(k + "goodput_requests_per_s");
    }
    EXPECT_EQ(arrived, m.at("serving_requests_arrived"));
    EXPECT_EQ(completed, m.at("serving_requests_completed"));
    EXPECT_EQ(dropped, m.at("serving_requests_dropped"));
    EXPECT_EQ(slo_met, static_cast<double>(mt.slo_met()));
    EXPECT_NEAR(goodput, m.at("serving_goodput_requests_per_s"), 1e-9);
  }
  if (p.disaggregated) {
    EXPECT_EQ(static_cast<double>(sys.transfers().bytes_sent()),
              out.metrics().at("serving_kv_transfer_bytes"));
    std::printf("[disaggregated %s/%s u=%.2f] KV transfers %.0f, decode wait p99 %.4f s\n",
                p.scheduler.c_str(), p.router.c_str(), p.utilisation,
                out.metrics().at("serving_kv_transfer_count"),
                out.metrics().at("serving_kv_decode_wait_p99_s"));
  }
  if (p.utilisation < 0.3)
    std::printf("[%s/%s/%s u=%.2f] completed %llu dropped %llu preemptions %.0f\n", p.mode.c_str(),
                p.scheduler.c_str(), p.router.c_str(), p.utilisation,
                static_cast<unsigned long long>(mt.completed()),
                static_cast<unsigned long long>(mt.dropped()),
                out.metrics().at("serving_preemptions"));
  if (p.prefix_caching) {
    std::printf("[prefix caching %s/%s u=%.2f] hit rate %.3f, evicted blocks %.0f\n",
                p.scheduler.c_str(), p.router.c_str(), p.utilisation,
                out.metrics().at("serving_prefix_hit_rate"),
                out.metrics().at("serving_prefix_evicted_blocks"));
    EXPECT_GT(out.metrics().at("serving_prefix_hit_tokens"), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, ServingInvariants,
    ::testing::Values(
        Case{"separate", "continuous", "least_outstanding_tokens", 0.9, 0},
        Case{"separate", "static", "round_robin", 0.9, 0},
        Case{"separate", "chunked_prefill", "round_robin", 0.9, 0.3},
        Case{"separate", "continuous", "round_robin", 0.185, 0.3},
        Case{"separate", "chunked_prefill", "least_outstanding_tokens", 0.185, 0},
        // Six 7B replicas behind the indexed least-outstanding-tokens router, squeezed.
        Case{"separate", "continuous", "least_outstanding_tokens", 0.185, 0, false, 1, false, 6},
        Case{"mfs", "continuous", "least_outstanding_tokens", 0.9, 0.3},
        Case{"mfs", "chunked_prefill", "round_robin", 0.9, 0.5},
        Case{"mfs", "continuous", "round_robin", 0.17, 0.5},
        Case{"mfs", "static", "least_outstanding_tokens", 0.17, 0.3},
        Case{"separate", "continuous", "prefix_affinity", 0.9, 0.3, true},
        Case{"separate", "chunked_prefill", "least_outstanding_tokens", 0.185, 0, true},
        Case{"separate", "continuous", "round_robin", 0.185, 0.3, true},
        Case{"separate", "static", "prefix_affinity", 0.185, 0, true},
        // Pipelines of two stages (the 7B's and the 13B's layers split in half).
        Case{"separate", "continuous", "least_outstanding_tokens", 0.9, 0.3, false, 2},
        Case{"separate", "chunked_prefill", "round_robin", 0.1, 0.3, false, 2},
        Case{"separate", "continuous", "round_robin", 0.1, 0, false, 2},
        // Prefill and decode pools (squeezed: decode admission waits for KV).
        Case{"separate", "continuous", "least_outstanding_tokens", 0.9, 0.3, false, 1, true},
        Case{"separate", "chunked_prefill", "round_robin", 0.185, 0.3, false, 1, true},
        Case{"separate", "static", "least_outstanding_tokens", 0.185, 0, false, 1, true}));
