#pragma once
// Shared fixtures for the serving tests: the shipped catalogs, resolved against the source tree.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <map>

#include "models/serving/model_catalog.hpp"
#include "models/serving/replica.hpp"
#include "models/serving/request_source.hpp"
#include "models/serving/tp_allreduce.hpp"
#include "models/serving/transformer_cost.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/hardware/compute.hpp"
#include "sim_core/hardware/hardware.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim::serving::fixtures {

inline std::filesystem::path source_dir() {
  return MLSIM_SOURCE_DIR;
}
inline std::filesystem::path shared_data_dir() {
  return MLSIM_SHARED_DATA_DIR;
}

inline ModelCatalog llama2() {
  return ModelCatalog::load(source_dir() / "workloads/models/llama2.json");
}

inline HardwareCatalog gpus() {
  std::ifstream in(source_dir() / "workloads/hardware/gpus.json");
  auto j = nlohmann::json::parse(in);
  JsonReader root(j, "gpus.json");
  auto hw = root.object("hardware");
  HardwareCatalog c;
  c.add_from_json(hw);
  return c;
}

// A GPU with round numbers for hand-computed timings: 100 TFLOP/s fp16, 1 TB/s HBM, 80 GiB.
inline GpuSpec toy_gpu() {
  GpuSpec g;
  g.name = "toy";
  g.peak[Dtype::kFp16] = FlopRate{100e12};
  g.hbm_bandwidth = Bandwidth{1e12};
  g.hbm_capacity = Bytes{80LL << 30};
  return g;
}

// A small transformer (hidden 512, 8 heads, ffn 1024, vocabulary 1000) of `layers` layers.
inline TransformerShape toy_transformer(int layers, std::string name) {
  TransformerShape m;
  m.name = std::move(name);
  m.layers = layers;
  m.hidden = 512;
  m.heads = 8;
  m.kv_heads = 8;
  m.ffn = 1024;
  m.vocab = 1000;
  return m;
}

// The ideal roofline (efficiency 1, no overhead, one regime) for every serving operator on `gpu`.
inline std::unique_ptr<RooflineProvider> ideal_roofline(const std::string& gpu) {
  auto p = std::make_unique<RooflineProvider>();
  for (std::size_t i = 0; i < kOpCount; ++i)
    p->add(gpu, std::string(op_name(static_cast<Op>(i))), {RooflineRegime{0, true, 1, 1, 0, 1}});
  return p;
}

// The platform a replica runs on in these tests: `gpu` on every listed host, the ideal roofline,
// nominal speeds. Not movable (Compute keeps references).
struct Platform {
  Platform(Engine& engine, GpuSpec g, std::size_t nodes, const std::vector<NodeId>& hosts)
      : gpu(std::move(g)), hardware(nodes), speeds(nodes) {
    for (NodeId h : hosts) hardware.set_host(h, HostHardware{&gpu, 1, nullptr, std::nullopt});
    costs.add(ideal_roofline(gpu.name));
    compute = std::make_unique<Compute>(engine, hardware, speeds, costs);
  }
  Platform(const Platform&) = delete;
  Platform& operator=(const Platform&) = delete;
  GpuSpec gpu;
  NodeHardware hardware;
  HostSpeeds speeds;
  CostModel costs;
  std::unique_ptr<Compute> compute;
};

// Simple numbers for hand-worked schedules: the MLP up-projection costs 10 us per token and every
// other operator nothing, so a layer costs 10 us per token.
class TenMicrosPerTokenPerLayer final : public CostProvider {
 public:
  std::string_view name() const override { return "test"; }
  std::optional<double> operator_seconds(const OperatorWork& w, const GpuSpec&) const override {
    return w.op == op_name(Op::kMlpUpGate) ? 10e-6 * static_cast<double>(w.tokens) : 0.0;
  }
  bool total_for(const GpuSpec&, std::string_view) const override { return true; }
};

// A request source replaying a fixed list.
class ListSource final : public RequestSource {
 public:
  explicit ListSource(std::vector<RequestSpec> specs) : specs_(std::move(specs)) {}
  std::optional<RequestSpec> next() override {
    if (i_ >= specs_.size()) return std::nullopt;
    return specs_[i_++];
  }

 private:
  std::vector<RequestSpec> specs_;
  std::size_t i_ = 0;
};

// Two hosts with the toy GPU on a star whose links are 1 GB/s (1 byte per ns) with 100 ns
// latency (a message between the hosts crosses two links: 200 ns at 1 GB/s), the flow backend,
// and GPU work priced at 10 us per token per layer. Not movable (members keep references).
struct TwoHostStar {
  TwoHostStar() {
    for (NodeId h : topo.hosts())
      hardware.set_host(h, HostHardware{&gpu, 1, nullptr, std::nullopt});
    costs.add(std::make_unique<TenMicrosPerTokenPerLayer>());
    compute = std::make_unique<Compute>(engine, hardware, speeds, costs);
  }
  TwoHostStar(const TwoHostStar&) = delete;
  TwoHostStar& operator=(const TwoHostStar&) = delete;
  NodeId host(int i) const { return topo.hosts()[static_cast<std::size_t>(i)]; }

  Engine engine;
  Topology topo = build_topology(StarSpec{2, LinkSpec{Bandwidth{1e9}, Time::ns(100)}});
  FluidNetwork network{engine, topo, Sharing::kMaxMin};
  LinkConditions links{topo, network};
  GpuSpec gpu = toy_gpu();
  NodeHardware hardware{topo.nodes().size()};
  HostSpeeds speeds{topo.nodes().size()};
  CostModel costs;
  std::unique_ptr<Compute> compute;
};

// Records when each request got its first token, finished, or was dropped.
class TimesRecorder : public ReplicaObserver {
 public:
  explicit TimesRecorder(Engine& e) : engine_(e) {}
  void on_first_token(Replica&, Request& r) override { first[r.spec.id] = engine_.now(); }
  void on_answer_done(Replica&, Request& r) override { done[r.spec.id] = engine_.now(); }
  void on_dropped(Replica&, Request& r) override { dropped.push_back(r.spec.id); }
  std::map<std::uint64_t, Time> first, done;
  std::vector<std::uint64_t> dropped;

 protected:
  Engine& engine_;
};

// Records every iteration's end and batch size; a drop fails the test (none is expected).
struct IterationEnds : ReplicaObserver {
  Engine& engine;
  explicit IterationEnds(Engine& e) : engine(e) {}
  std::vector<Time> ends;
  std::vector<std::size_t> batch_sizes;
  void on_first_token(Replica&, Request&) override {}
  void on_answer_done(Replica&, Request&) override {}
  void on_dropped(Replica&, Request&) override { ADD_FAILURE() << "unexpected drop"; }
  void on_iteration(Replica& rep) override {
    ends.push_back(engine.now());
    batch_sizes.push_back(rep.last_batch().entries.size());
  }
};

// Round numbers for hand-computed collectives: a 100 GB/s link, 1 us per message, 5 us launch,
// and NCCL-shaped protocols: LL (500 ns per step, half the bandwidth), LL128 (1 us, 0.9375),
// Simple (5 us, 1).
inline TpAllReduce round_link_costs() {
  TpAllReduce a;
  a.bandwidth = Bandwidth{100e9};
  a.route_latency = Time::us(1);
  a.costs.launch = Time::us(5);
  a.costs.of(collectives::Protocol::kLL) = {true, Time::ns(500), 0.5};
  a.costs.of(collectives::Protocol::kLL128) = {true, Time::us(1), 0.9375};
  a.costs.of(collectives::Protocol::kSimple) = {true, Time::us(5), 1.0};
  return a;
}

}  // namespace mlsim::serving::fixtures
