#pragma once
// The serving system: deployments of replicas behind routers, fed by one request source, with
// tier assignment, escalation between tiers and metrics. Two ways to serve a model family:
//  - separate: one deployment per family member (its own weights and KV), each serving its tier;
//    an escalated answer is a new request to the larger member's deployment (full prefill);
//  - MFS [inferred from the paper's abstract, see docs/serving.md]: one deployment of the largest
//    model whose tiers are layer prefixes with their own exit heads; requests of all tiers share
//    the batch (each leaves at its exit), the KV pool and the weights; an escalated answer keeps
//    the prompt's KV below the lower exit and prefills only above it from stored exit features.
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/serving/compute_model.hpp"
#include "models/serving/elastic.hpp"
#include "models/serving/metrics.hpp"
#include "models/serving/model_catalog.hpp"
#include "models/serving/replica.hpp"
#include "models/serving/request_source.hpp"
#include "models/serving/router.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/engine/random.hpp"
#include "sim_core/hardware/compute.hpp"
#include "sim_core/hardware/hardware.hpp"

namespace mlsim::serving {

// Colocated: a replica prefills and decodes its requests. Prefill/decode disaggregation
// (Splitwise, DistServe): a prefill pool's replicas run prefills only and hand each request's KV
// to a replica of their decode pool, which decodes it.
enum class PoolRole { kColocated, kPrefill, kDecode };

struct DeploymentConfig {
  std::string name;
  PoolRole role = PoolRole::kColocated;
  // kPrefill: the index (in ServingConfig::deployments) of the decode pool it hands off to.
  int decode_pool = -1;
  std::string where;  // JSON path of its settings ("system.mfs", "system.separate[1]"), for errors
  TransformerShape model;
  int tp = 1;
  // tp / the catalog's KV heads when tp exceeds them (vLLM replicates each KV head on that many
  // GPUs; `model.kv_heads` is then tp: one KV head per GPU), else 1. serving_scenario.cpp.
  int kv_head_replicas = 1;
  // A mixture-of-experts model's expert parallelism over the tp GPUs (1 or tp) and the busiest
  // GPU's expert load over the mean (compute_model.hpp, ExpertParallel).
  ExpertParallel expert;
  // Pipeline stages of a replica and the layers of each (summing to the model's depth; the
  // parser splits evenly unless given). A replica uses tp x pp GPUs, stage by stage.
  int pp = 1;
  std::vector<std::int32_t> stage_layers;
  int replicas = 1;
  // exit_layers[tier]: depth at which that tier's requests leave (0: tier not served here).
  std::vector<std::int32_t> exit_layers;
  std::string scheduler = "continuous";
  BatchLimits limits;
  std::string router = "least_outstanding_tokens";
  bool mfs = false;  // exit heads per served tier, feature sharing, in-place escalation
  bool multi_level_sampling = true;
  // The GPU of its hosts and the all-reduce over their intra_node link; absent: ServingConfig's.
  std::optional<GpuSpec> gpu;
  std::optional<TpAllReduce> tp_allreduce;
  // The intra_node link of its hosts (activations between stages on one host); absent when no
  // two GPUs of a replica share a host.
  std::optional<HostLink> host_link;
  // Replicated pipeline stages with process-group semantics (elastic.hpp): `pp` and
  // `stage_layers` are the stages', `replicas` the front (stage 0) workers at the start.
  std::optional<ElasticConfig> elastic;
};

struct ServingConfig {
  std::vector<DeploymentConfig> deployments;
  GpuSpec gpu;  // of a deployment's hosts unless the deployment names its own
  std::int32_t tiers = 1;
  std::vector<double> tier_mix{1.0};  // probability of each tier for a new request
  double escalation_probability = 0;  // an answer below the top tier is escalated one tier up
  std::int32_t block_tokens = 16;     // vLLM default block size
  // Prefix caching of each replica (its blocks are the request source's hash blocks).
  bool prefix_caching = false;
  // One row per request in serving_requests.csv (memory grows with the trace: off by default).
  bool request_log = false;
  double gpu_memory_utilization = 0.9;  // vLLM default: fraction of HBM for weights + KV
  Time iteration_overhead;
  // A tensor-parallel all-reduce among the GPUs of one host: the collective layer's costs
  // (system.costs) over the GPUs' intra_node link (topology.hardware).
  TpAllReduce tp_allreduce;
  Time sampling_pass_overhead;
  // The scenario's seed: MoE routing draws (a capacity factor) come from it, one stream per
  // replica ("serving.expert_routing.<replica index>").
  std::uint64_t seed = 0;
  SloTargets slo;
  Time series_interval = Time::s(1);
};

class ServingSystem final : public ReplicaObserver, public ElasticHost {
 public:
  // `hosts` are the topology hosts the GPUs map to, in order: deployment by deployment, replica by
  // replica, stage by stage, tp GPUs each. GPU time is priced by `compute`'s cost model and runs
  // on `compute` (per-host speed); tensor-parallel all-reduces are costed by config.tp_allreduce.
  // Transfers between GPUs (activations between pipeline stages) go through `network` (needed
  // when a deployment has pp > 1; `links` when config.tp_allreduce.costs enables several
  // protocols).
  ServingSystem(Engine& engine, Compute& compute, std::vector<NodeId> hosts, ServingConfig config,
                std::unique_ptr<RequestSource> source, RandomStream tier_stream,
                RandomStream escalation_stream, Network* network = nullptr,
                const LinkConditions* links = nullptr);
  ~ServingSystem() override;

  // Number of GPUs the configuration uses.
  static int gpus_needed(const ServingConfig& config);

  void start();
  // Elastic deployments follow the failures and repairs of their workers' hosts.
  void watch(NodeHealth& nodes);
  ElasticDeployment* elastic() const { return elastic_.get(); }
  // Every replica's iterations as spans on `trace` (span_trace.hpp).
  void set_trace(SpanTrace* trace) {
    for (auto& r : replicas_) r->set_trace(trace);
  }
  void finish(Results& out) const;
  double progress() const;
  const ServingMetrics& metrics() const { return metrics_; }
  std::size_t live_request_objects() const { return pool_.size(); }
  const std::vector<std::unique_ptr<Replica>>& replicas() const { return replicas_; }
  // Deployments (in the configuration's order): their replicas and router (for tests).
  std::size_t deployment_count() const { return deployments_.size(); }
  const std::vector<Replica*>& deployment_replicas(std::size_t d) const {
    return deployments_[d].replicas;
  }
  // The router of deployment d; a decode pool's is never asked (arrivals go to its prefill
  // pool) and indexes nothing: its hand-off index answers instead (decode_least_loaded).
  Router& router(std::size_t d) { return *deployments_[d].router; }
  // A decode pool's replica with the fewest outstanding tokens (the earliest among equals), as
  // the hand-off sees it; null for other deployments.
  Replica* decode_least_loaded(std::size_t d) {
    auto& idx = deployments_[d].decode_index;
    return idx ? &idx->least_loaded() : nullptr;
  }
  // Transfers between GPUs (activations between stages); needs the network given at construction.
  const PointToPoint& transfers() const { return *transfers_; }

  // ReplicaObserver
  void on_first_token(Replica& replica, Request& r) override;
  void on_answer_done(Replica& replica, Request& r) override;
  void on_dropped(Replica& replica, Request& r) override;
  void on_iteration(Replica& replica) override;
  void on_kv_changed(Replica& replica) override;
  void on_prefill_done(Replica& replica, Request& r) override;

  // ElasticHost
  void reroute(Request& r) override;
  std::uint64_t completed() const override { return metrics_.completed(); }
  std::uint64_t tokens_generated() const override { return metrics_.tokens_generated(); }
  std::int64_t in_system() const override { return in_system_; }
  bool arrivals_done() const override { return arrivals_done_; }
  LatencySums latency_sums() const override {
    return {metrics_.ttft_sum_s(), metrics_.e2e_sum_s(), metrics_.slo_met()};
  }

 private:
  // A request whose prefill is done, waiting for room in its decode pool.
  struct HandOff {
    Request* request = nullptr;
    Replica* from = nullptr;
    Time since;
  };
  struct Deployment {
    DeploymentConfig config;
    std::vector<Replica*> replicas;
    std::unique_ptr<Router> router;
    std::deque<HandOff> awaiting_decode;  // a decode pool's queue, first come first served
    // A decode pool's replicas by outstanding tokens, for the hand-off (its router, which
    // arrivals never ask, indexes nothing): the least-loaded one in O(log n).
    std::unique_ptr<ReplicaLoadIndex> decode_index;
  };
  // Builds a replica of deployment `di` from `rc` on the deployment's GPU timer (the last one
  // made) and registers it: in `dep`, in the replica-to-deployment map, owned by the system.
  Replica& add_replica(std::size_t di, Deployment& dep, ReplicaConfig rc, std::int64_t blocks,
                       std::int32_t feature_layers, const TpAllReduce& tp_allreduce);
  void build_elastic(std::size_t di, Deployment& dep, const std::vector<NodeId>& hosts,
                     std::size_t& next_host, std::int64_t blocks, std::int32_t feature_layers,
                     const TpAllReduce& tp_allreduce);
  // Moves the KV of the decode pool's waiting requests to its replicas while they have room.
  void hand_off(Deployment& decode);
  // The next request of the source with its tier and escalation drawn; nothing when exhausted.
  std::optional<RequestSpec> pull_next_arrival();
  void schedule_next_arrival();
  // Dispatches the pending request and every following one that arrives at the same instant.
  void arrive();
  void dispatch(Request& r);
  // A request into the elastic deployment: to a live first-stage replica, or held until one is
  // (recompute: its KV was lost with a failed worker).
  void submit_elastic(Request& r, bool recompute);
  Request& new_request(RequestSpec spec);
  void retire(Request& r);

  Engine& engine_;
  Compute& compute_;
  ServingConfig config_;
  std::unique_ptr<RequestSource> source_;
  std::optional<RequestSpec> pending_;  // the next arrival, scheduled on the engine
  RandomStream tier_stream_, escalation_stream_;
  // One per deployment, pricing its model's operators on its GPU (GPU types may differ).
  std::vector<std::unique_ptr<OperatorTimer>> timers_;
  std::vector<Deployment> deployments_;
  std::unique_ptr<PointToPoint> transfers_;     // when a network is given
  std::unique_ptr<ElasticDeployment> elastic_;  // the elastic deployment, if any (at most one)
  // Its stages on their own GPU types: their operator prices and iteration costs.
  std::vector<std::unique_ptr<OperatorTimer>> stage_timers_;
  std::vector<std::unique_ptr<IterationCostModel>> stage_costs_;
  std::size_t elastic_deployment_ = 0;
  std::uint64_t routed_version_ = 0;  // of the elastic deployment's routable set, last assigned
  bool arrivals_done_ = false;
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::vector<double> replica_kv_bytes_;  // last reported, per replica
  std::vector<std::size_t> replica_deployment_;
  bool disaggregated_ = false;
  double kv_bytes_total_ = 0;
  ServingMetrics metrics_;
  // Requests are recycled: memory grows with the requests in flight, not with the trace.
  std::vector<std::unique_ptr<Request>> pool_;
  std::vector<Request*> free_;
  std::int64_t in_system_ = 0;
  std::uint64_t consumed_ = 0;
  Time last_completion_ = Time::zero();
};

}  // namespace mlsim::serving
