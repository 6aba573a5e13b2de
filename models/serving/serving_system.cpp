#include "models/serving/serving_system.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <set>

#include "models/serving/policies.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/collectives/ring_bottleneck.hpp"

namespace mlsim::serving {

namespace {

// Weight bytes of pipeline stage `stage` of a replica: its layers, the embedding on the first
// stage, the final norm and LM head on the last.
double stage_weight_bytes(const DeploymentConfig& d, std::size_t stage) {
  const auto& m = d.model;
  const std::int64_t embedding = std::int64_t{m.vocab} * m.hidden;
  std::int64_t params = std::int64_t{d.stage_layers[stage]} * m.params_per_layer();
  if (stage == 0) params += embedding;
  if (stage + 1 == d.stage_layers.size()) params += m.params_outside_layers() - embedding;
  return static_cast<double>(params) * m.dtype_bytes();
}

// Weight bytes of one replica: the model, plus one exit head (final norm and LM head) for every
// served tier that exits below the top (MFS).
double replica_weight_bytes(const DeploymentConfig& d) {
  double bytes = static_cast<double>(d.model.weight_bytes());
  if (d.mfs) {
    const double head =
        (static_cast<double>(d.model.vocab) + 1) * d.model.hidden * d.model.dtype_bytes();
    for (auto exit : d.exit_layers)
      if (exit > 0 && exit < d.model.layers) bytes += head;
  }
  return bytes;
}

std::vector<std::int32_t> cost_exits(const DeploymentConfig& d) {
  std::set<std::int32_t> s(d.exit_layers.begin(), d.exit_layers.end());
  s.erase(0);
  s.insert(d.model.layers);
  return {s.begin(), s.end()};
}

// The collectives of a replica whose tensor-parallel groups span hosts (the parser places such a
// group on whole hosts of equal size): the collective layer's hierarchical all-reduce over the
// network routes between its hosts (ring_routes: narrowest bandwidth, longest latency; re-read
// when the links change: HostRoutes; tp_allreduce.hpp); `intra` for groups on one host.
TpAllReduce group_collectives(const TpAllReduce& intra, const std::vector<NodeId>& gpus, int tp,
                              const LinkConditions* links, const std::string& where,
                              const std::string& replica) {
  int per_host = tp;
  std::vector<std::vector<NodeId>> groups;
  std::vector<NodeId> distinct;
  for (std::size_t first = 0; first + static_cast<std::size_t>(tp) <= gpus.size();
       first += static_cast<std::size_t>(tp)) {
    distinct.clear();
    for (std::size_t g = first; g < first + static_cast<std::size_t>(tp); ++g)
      if (std::find(distinct.begin(), distinct.end(), gpus[g]) == distinct.end())
        distinct.push_back(gpus[g]);
    if (distinct.size() < 2) continue;
    MLSIM_CHECK(links != nullptr, "a tensor-parallel group across hosts needs the network");
    per_host = tp / static_cast<int>(distinct.size());
    if (collectives::ring_routes(*links, distinct, 0).narrowest.bytes_per_s <= 0)
      throw InputError(where + ".tp",
                       "a tensor-parallel group across hosts needs a route between its hosts, "
                       "and the topology has none");
    groups.push_back(distinct);
  }
  if (per_host == tp) return intra;
  auto live = std::make_shared<const HostRoutes>(*links, std::move(groups), replica);
  return intra.across_hosts(Bandwidth{0}, Time::zero(), per_host, std::move(live));
}

// The topology nodes a replica's GPUs are on, each once, in placement order.
std::vector<NodeId> replica_hosts(const Replica& r) {
  std::vector<NodeId> out;
  for (NodeId h : r.config().gpus)
    if (std::find(out.begin(), out.end(), h) == out.end()) out.push_back(h);
  return out;
}

}  // namespace

int ServingSystem::gpus_needed(const ServingConfig& config) {
  int n = 0;
  for (const auto& d : config.deployments) {
    if (d.elastic) {
      for (const auto& st : d.elastic->stages) n += d.tp * st.max_replicas;
      continue;
    }
    n += d.tp * d.pp * d.replicas;
  }
  return n;
}

ServingSystem::ServingSystem(Engine& engine, Compute& compute, std::vector<NodeId> hosts,
                             ServingConfig config, std::unique_ptr<RequestSource> source,
                             RandomStream tier_stream, RandomStream escalation_stream,
                             Network* network, const LinkConditions* links)
    : engine_(engine),
      compute_(compute),
      config_(std::move(config)),
      source_(std::move(source)),
      tier_stream_(tier_stream),
      escalation_stream_(escalation_stream),
      metrics_(config_.slo, config_.tiers, config_.series_interval, config_.request_log) {
  MLSIM_CHECK(static_cast<int>(hosts.size()) >= gpus_needed(config_), "too few hosts for the GPUs");
  MLSIM_CHECK(static_cast<std::int32_t>(config_.tier_mix.size()) == config_.tiers, "tier mix size");
  if (network != nullptr)
    transfers_ =
        std::make_unique<PointToPoint>(engine_, *network, links, config_.tp_allreduce.costs);
  std::size_t next_host = 0;
  for (std::size_t di = 0; di < config_.deployments.size(); ++di) {
    auto& d = config_.deployments[di];
    if (d.stage_layers.empty()) d.stage_layers.assign(1, d.model.layers);
    MLSIM_CHECK(static_cast<int>(d.stage_layers.size()) == d.pp, "layers per stage");
    MLSIM_CHECK(d.pp == 1 || (transfers_ && !d.mfs),
                "pipeline stages need the network, and are not modelled with MFS tiers");
    MLSIM_CHECK(static_cast<std::int32_t>(d.exit_layers.size()) == config_.tiers,
                "exit layers per tier");
    const double weights = replica_weight_bytes(d);
    const GpuSpec& gpu = d.gpu ? *d.gpu : config_.gpu;
    const TpAllReduce& tp_allreduce = d.tp_allreduce ? *d.tp_allreduce : config_.tp_allreduce;
    timers_.push_back(std::make_unique<OperatorTimer>(compute.costs(), gpu, d.model.dtype));
    const double stage_memory =
        config_.gpu_memory_utilization * static_cast<double>(gpu.hbm_capacity.count) * d.tp;
    const double budget = stage_memory - weights;
    const double block_bytes = static_cast<double>(config_.block_tokens) *
                               static_cast<double>(d.model.kv_bytes_per_token_layer());
    auto blocks = static_cast<std::int64_t>(budget / block_bytes);
    if (d.pp > 1) {
      // Each stage holds the KV of its own layers for every token in flight, so the replica holds
      // as many tokens as its tightest stage: min over stages of (memory - weights) / (layers x
      // a block's bytes per layer) blocks, times the model's depth in layer-blocks.
      std::int64_t per_layer = std::numeric_limits<std::int64_t>::max();
      for (std::size_t s = 0; s < d.stage_layers.size(); ++s) {
        double memory = stage_memory;
        if (d.elastic && d.elastic->stages[s].gpu)  // a stage on its own GPU type
          memory = config_.gpu_memory_utilization *
                   static_cast<double>(d.elastic->stages[s].gpu->hbm_capacity.count) * d.tp;
        auto stage_blocks = static_cast<std::int64_t>((memory - stage_weight_bytes(d, s)) /
                                                      (block_bytes * d.stage_layers[s]));
        if (d.elastic) {
          // Replicated stages: a stage-s worker holds the KV of the engines bound to it, from
          // every front replica; a front replica counts on its share of stage s's workers at
          // the start (at most one worker's worth) [simplification: the share is fixed].
          const auto& st = d.elastic->stages;
          const double share = std::min(
              1.0, static_cast<double>(st[s].replicas) / static_cast<double>(st[0].replicas));
          stage_blocks = static_cast<std::int64_t>(static_cast<double>(stage_blocks) * share);
        }
        per_layer = std::min(per_layer, stage_blocks);
      }
      blocks = std::max<std::int64_t>(0, per_layer) * d.model.layers;
    }
    if (blocks < d.model.layers)
      throw InputError(
          d.where,
          fmt::format("{} ({:.1f} GB of weights) leaves no room for a KV cache on {} x {} at "
                      "gpu_memory_utilization {}",
                      d.model.name, weights / 1e9, d.tp, gpu.name, config_.gpu_memory_utilization));
    const std::int32_t feature_layers =
        d.mfs ? static_cast<std::int32_t>((std::int64_t{d.model.hidden} * d.model.dtype_bytes() +
                                           d.model.kv_bytes_per_token_layer() - 1) /
                                          d.model.kv_bytes_per_token_layer())
              : 0;
    Deployment dep;
    dep.config = d;
    dep.router = make_router(d.router, "system.router");
    if (d.elastic) {
      build_elastic(di, dep, hosts, next_host, blocks, feature_layers, tp_allreduce);
      deployments_.push_back(std::move(dep));
      continue;
    }
    for (int i = 0; i < d.replicas; ++i) {
      ReplicaConfig rc;
      rc.name = d.replicas == 1 ? d.name : fmt::format("{}.{}", d.name, i);
      rc.index = static_cast<std::int32_t>(replicas_.size());
      rc.tp = d.tp;
      for (int g = 0; g < d.tp * d.pp; ++g) rc.gpus.push_back(hosts[next_host++]);
      if (d.pp > 1) rc.stage_layers = d.stage_layers;
      if (d.host_link) rc.host_link = *d.host_link;
      rc.iteration_overhead = config_.iteration_overhead;
      rc.multi_level_sampling = d.multi_level_sampling;
      rc.sampling_pass_overhead = config_.sampling_pass_overhead;
      rc.reuse_across_tiers = d.mfs;
      rc.hand_off_after_prefill = d.role == PoolRole::kPrefill;
      if (config_.prefix_caching) {
        rc.prefix_block_tokens = source_->hash_block_tokens();
        MLSIM_CHECK(rc.prefix_block_tokens > 0 && !d.mfs,
                    "prefix caching needs block hashes and a single-depth deployment");
      }
      const TpAllReduce collectives =
          group_collectives(tp_allreduce, rc.gpus, d.tp, links, d.where, rc.name);
      add_replica(di, dep, std::move(rc), blocks, feature_layers, collectives);
      metrics_.add_weight_bytes(weights);
    }
    deployments_.push_back(std::move(dep));
  }
  replica_kv_bytes_.assign(replicas_.size(), 0);
  for (std::size_t di = 0; di < deployments_.size(); ++di) {  // the elastic one: at each arrival
    auto& dep = deployments_[di];
    if (dep.replicas.empty() || (elastic_ && di == elastic_deployment_)) continue;
    if (dep.config.role == PoolRole::kDecode) {
      // A decode pool receives requests by hand-off only (a replica reports its load to one
      // index: this one, not the unused router's).
      dep.decode_index = std::make_unique<ReplicaLoadIndex>();
      dep.decode_index->assign(dep.replicas);
    } else {
      dep.router->assign(dep.replicas);
    }
  }
  for (const auto& dep : deployments_) {
    if (dep.config.role != PoolRole::kPrefill) continue;
    disaggregated_ = true;
    const auto pool = static_cast<std::size_t>(dep.config.decode_pool);
    MLSIM_CHECK(pool < deployments_.size() && deployments_[pool].config.role == PoolRole::kDecode &&
                    deployments_[pool].config.exit_layers == dep.config.exit_layers,
                "a prefill pool hands off to a decode pool of the same model");
    MLSIM_CHECK(transfers_ != nullptr, "disaggregation sends KV through the network");
  }
  for (std::int32_t t = 0; t < config_.tiers; ++t) {
    int serving = 0;
    for (const auto& dep : deployments_)
      if (dep.config.exit_layers[static_cast<std::size_t>(t)] > 0 &&
          dep.config.role != PoolRole::kDecode)
        ++serving;
    // The scenario parser builds one deployment per tier (separate) or one for all (MFS).
    MLSIM_CHECK(serving == 1, "every tier must be served by exactly one deployment");
  }
}

Replica& ServingSystem::add_replica(std::size_t di, Deployment& dep, ReplicaConfig rc,
                                    std::int64_t blocks, std::int32_t feature_layers,
                                    const TpAllReduce& tp_allreduce) {
  const DeploymentConfig& d = config_.deployments[di];
  auto cost = std::make_unique<IterationCostModel>(d.model, d.tp, *timers_.back(), cost_exits(d),
                                                   tp_allreduce, d.expert);
  if (d.model.moe() && d.expert.capacity_factor)
    cost->set_routing_stream(
        RandomStream(config_.seed, fmt::format("serving.expert_routing.{}", rc.index)));
  auto replica = std::make_unique<Replica>(
      engine_, compute_, std::move(rc), std::move(cost), KvBlockPool(blocks, config_.block_tokens),
      d.exit_layers, feature_layers, d.limits, make_scheduler(d.scheduler, "system.scheduler"),
      *this, transfers_.get());
  Replica& added = *replica;
  dep.replicas.push_back(&added);
  replica_deployment_.push_back(di);
  replicas_.push_back(std::move(replica));
  return added;
}

void ServingSystem::build_elastic(std::size_t di, Deployment& dep, const std::vector<NodeId>& hosts,
                                  std::size_t& next_host, std::int64_t blocks,
                                  std::int32_t feature_layers, const TpAllReduce& tp_allreduce) {
  // The system's own copy (not dep.config, which moves): stage timers keep references to its GPUs.
  const DeploymentConfig& d = config_.deployments[di];
  MLSIM_CHECK(elastic_ == nullptr, "one elastic deployment per system");
  MLSIM_CHECK(transfers_ != nullptr && !d.mfs && d.role == PoolRole::kColocated,
              "elastic stages send activations through the network, without MFS or pools");
  const ElasticConfig& e = *d.elastic;
  MLSIM_CHECK(static_cast<int>(e.stages.size()) == d.pp, "one elastic stage per pipeline stage");
  // The workers: max_replicas per stage, tp GPUs of one host each, stage by stage.
  std::vector<std::vector<std::unique_ptr<StageWorker>>> workers(e.stages.size());
  std::vector<double> weights;
  std::int32_t layer = 0;
  for (std::size_t s = 0; s < e.stages.size(); ++s) {
    for (int i = 0; i < e.stages[s].max_replicas; ++i) {
      auto w = std::make_unique<StageWorker>();
      w->name = fmt::format("{}.s{}.{}", d.name, s, i);
      w->stage = static_cast<int>(s);
      w->first_layer = layer;
      w->last_layer = layer + e.stages[s].layers;
      for (int g = 0; g < d.tp; ++g) {
        const NodeId h = hosts[next_host++];
        if (std::find(w->hosts.begin(), w->hosts.end(), h) == w->hosts.end()) w->hosts.push_back(h);
      }
      w->nominal.resize(w->hosts.size());
      workers[s].push_back(std::move(w));
    }
    // A stage on another GPU type (or intra_node link) prices its layers with its own costs.
    const ElasticStage& st = e.stages[s];
    if (st.gpu || st.tp_allreduce) {
      stage_timers_.push_back(std::make_unique<OperatorTimer>(
          compute_.costs(), st.gpu ? *st.gpu : (d.gpu ? *d.gpu : config_.gpu), d.model.dtype));
      stage_costs_.push_back(std::make_unique<IterationCostModel>(
          d.model, d.tp, *stage_timers_.back(), cost_exits(d),
          st.tp_allreduce ? *st.tp_allreduce : tp_allreduce, d.expert));
      for (auto& w : workers[s]) w->cost = stage_costs_.back().get();
    }
    layer += e.stages[s].layers;
    weights.push_back(stage_weight_bytes(d, s));
  }
  const int engines = ElasticDeployment::virtual_engines(e);
  std::vector<Replica*> front;
  for (int i = 0; i < e.stages.front().max_replicas; ++i) {
    ReplicaConfig rc;
    rc.name = fmt::format("{}.{}", d.name, i);
    rc.index = static_cast<std::int32_t>(replicas_.size());
    rc.tp = d.tp;
    for (std::size_t s = 0; s < workers.size(); ++s)
      rc.stage_workers.push_back(workers[s][s == 0 ? static_cast<std::size_t>(i) : 0].get());
    for (int g = 0; g < d.tp; ++g)
      rc.gpus.push_back(workers[0][static_cast<std::size_t>(i)]->hosts.front());
    if (d.host_link) rc.host_link = *d.host_link;
    rc.iteration_overhead = config_.iteration_overhead;
    rc.virtual_engines = engines;
    rc.send_overhead = e.semantics.polls ? e.costs.polling_overhead : Time::zero();
    rc.polls = e.semantics.polls;
    rc.poll_step = e.semantics.polls ? e.costs.poll_step : Time::zero();
    front.push_back(&add_replica(di, dep, std::move(rc), blocks, feature_layers, tp_allreduce));
  }
  for (std::size_t s = 0; s < e.stages.size(); ++s)
    metrics_.add_weight_bytes(weights[s] * e.stages[s].replicas);
  elastic_deployment_ = di;
  elastic_ =
      std::make_unique<ElasticDeployment>(engine_, e, std::move(workers), std::move(front),
                                          std::move(weights), d.tp, *this, config_.series_interval);
}

void ServingSystem::watch(NodeHealth& nodes) {
  if (elastic_) elastic_->watch(nodes);
}

void ServingSystem::reroute(Request& r) {
  submit_elastic(r, /*recompute=*/true);
}

void ServingSystem::submit_elastic(Request& r, bool recompute) {
  const auto& routable = elastic_->routable();
  if (routable.empty()) {
    // Nothing can serve now (a restart, a stage without a live worker): it waits.
    elastic_->hold(r);
    return;
  }
  Router& router = *deployments_[elastic_deployment_].router;
  if (elastic_->routable_version() != routed_version_) {  // the live replicas changed
    router.assign(routable);
    routed_version_ = elastic_->routable_version();
  }
  Replica& replica = router.pick(r);
  r.replica = replica.config().index;
  if (recompute)
    replica.submit_recompute(r);
  else
    replica.submit(r);
}

ServingSystem::~ServingSystem() = default;

void ServingSystem::start() {
  metrics_.set_kv_bytes(engine_.now(), 0);
  schedule_next_arrival();
  if (elastic_) elastic_->start();
}

std::optional<RequestSpec> ServingSystem::pull_next_arrival() {
  auto spec = source_->next();
  if (!spec) {
    arrivals_done_ = true;
    return spec;
  }
  ++consumed_;
  // Both draws are made for every request, so the tier of request i and whether it escalates do
  // not depend on anything but the seed (the same workload for every variant).
  const double u = tier_stream_.uniform();
  const double e = escalation_stream_.uniform();
  double cumulative = 0;
  spec->tier = config_.tiers - 1;
  for (std::int32_t t = 0; t < config_.tiers; ++t) {
    cumulative += config_.tier_mix[static_cast<std::size_t>(t)];
    if (u < cumulative) {
      spec->tier = t;
      break;
    }
  }
  spec->escalate_to =
      spec->tier + 1 < config_.tiers && e < config_.escalation_probability ? spec->tier + 1 : -1;
  return spec;
}

void ServingSystem::schedule_next_arrival() {
  auto spec = pull_next_arrival();
  if (!spec) return;
  const Time at = std::max(spec->arrival, engine_.now());
  pending_ = std::move(*spec);
  engine_.schedule_at(at, [this] { arrive(); });
}

void ServingSystem::arrive() {
  // Every request arriving at this instant is dispatched in this one event, before the start
  // event a replica schedules for the current time runs: a burst is batched together. (With one
  // event per arrival the first request of a burst started alone, since the next arrival's event
  // was scheduled only after the replica's start.)
  // The pending spec (with its block hashes) is held here, not in the event, and moved into the
  // request: memory follows the requests in flight.
  std::optional<RequestSpec> spec = std::move(pending_);
  while (spec) {
    Request& r = new_request(std::move(*spec));
    metrics_.on_arrival(r);
    ++in_system_;
    dispatch(r);
    spec = pull_next_arrival();
    if (spec && spec->arrival > engine_.now()) {
      const Time at = spec->arrival;
      pending_ = std::move(*spec);
      engine_.schedule_at(at, [this] { arrive(); });
      return;
    }
  }
}

Request& ServingSystem::new_request(RequestSpec spec) {
  Request* r;
  if (free_.empty()) {
    pool_.push_back(std::make_unique<Request>());
    r = pool_.back().get();
  } else {
    r = free_.back();
    free_.pop_back();
  }
  *r = Request{};
  r->tier = spec.tier;
  r->spec = std::move(spec);
  return *r;
}

void ServingSystem::retire(Request& r) {
  --in_system_;
  free_.push_back(&r);
}

void ServingSystem::dispatch(Request& r) {
  for (auto& dep : deployments_) {
    if (dep.config.exit_layers[static_cast<std::size_t>(r.tier)] == 0 ||
        dep.config.role == PoolRole::kDecode)
      continue;
    // The model's context limit, as vLLM applies max_model_len: a prompt that leaves no room for
    // one output token is refused (reported dropped, counted apart); an output that would run
    // past the limit stops there (counted).
    const std::int32_t context = dep.config.model.context;
    if (r.spec.prompt_tokens >= context) {
      metrics_.on_rejected_context(r);
      retire(r);
      return;
    }
    if (r.spec.output_tokens > context - r.spec.prompt_tokens) {
      metrics_.on_output_capped(r, context - r.spec.prompt_tokens);
      r.spec.output_tokens = context - r.spec.prompt_tokens;
    }
    if (dep.config.role == PoolRole::kPrefill) {
      // Its whole length must fit a decode replica too (the pools' KV budgets may differ).
      const auto& decode = deployments_[static_cast<std::size_t>(dep.config.decode_pool)];
      if (!decode.replicas.front()->fits_at_all(r)) {
        metrics_.on_dropped(r);
        retire(r);
        return;
      }
    }
    if (dep.config.elastic) {
      submit_elastic(r, /*recompute=*/false);
      return;
    }
    Replica& replica = dep.router->pick(r);
    r.replica = replica.config().index;
    replica.submit(r);
    return;
  }
  MLSIM_CHECK(false, "no deployment serves the request's tier");
}

void ServingSystem::on_first_token(Replica&, Request&) {}

void ServingSystem::on_answer_done(Replica&, Request& r) {
  if (r.spec.escalate_to >= 0 && !r.escalated) {
    // Separate serving: the larger model answers from scratch.
    r.tier = r.spec.escalate_to;
    r.escalated = true;
    r.reused_layers = 0;
    r.kv_blocks = 0;
    r.feature_blocks = 0;
    dispatch(r);
    return;
  }
  last_completion_ = engine_.now();
  metrics_.on_completed(r, engine_.now());
  retire(r);
}

void ServingSystem::on_dropped(Replica&, Request& r) {
  metrics_.on_dropped(r);
  retire(r);
}

void ServingSystem::on_kv_changed(Replica& replica) {
  // A replica's index is its position in replicas_ (add_replica, build_elastic): O(1), where a
  // search of the list cost O(replicas) on every change of KV (every iteration).
  const auto idx = static_cast<std::size_t>(replica.config().index);
  MLSIM_CHECK(idx < replicas_.size() && replicas_[idx].get() == &replica, "replica index");
  const auto& model = deployments_[replica_deployment_[idx]].config.model;
  const double bytes = static_cast<double>(replica.kv().used()) * config_.block_tokens *
                       static_cast<double>(model.kv_bytes_per_token_layer());
  kv_bytes_total_ += bytes - replica_kv_bytes_[idx];
  replica_kv_bytes_[idx] = bytes;
  metrics_.set_kv_bytes(engine_.now(), kv_bytes_total_);
}

void ServingSystem::on_prefill_done(Replica& replica, Request& r) {
  const auto& from =
      deployments_[replica_deployment_[static_cast<std::size_t>(replica.config().index)]];
  auto& decode = deployments_[static_cast<std::size_t>(from.config.decode_pool)];
  decode.awaiting_decode.push_back({&r, &replica, engine_.now()});
  hand_off(decode);
}

void ServingSystem::hand_off(Deployment& decode) {
  const auto& d = decode.config;
  while (!decode.awaiting_decode.empty()) {
    const HandOff h = decode.awaiting_decode.front();
    Request& r = *h.request;
    // The decode replica with the fewest outstanding tokens among those with room for the KV
    // (first come first served: the head waits for room, those behind it wait too). The index's
    // least-loaded replica (the earliest among equals, as the scan) is that replica whenever it
    // has room: O(log n). Only when it has none are the others scanned, O(n).
    Replica* to = nullptr;
    if (Replica& least = decode.decode_index->least_loaded(); least.has_room_for_incoming(r))
      to = &least;
    else
      for (Replica* c : decode.replicas)
        if (c->has_room_for_incoming(r) &&
            (to == nullptr || c->outstanding_tokens() < to->outstanding_tokens()))
          to = c;
    if (to == nullptr) return;
    const bool reserved = to->reserve_incoming(r);
    MLSIM_CHECK(reserved, "the decode replica had room");
    decode.awaiting_decode.pop_front();
    // The prompt's KV, every layer: layers x KV heads x head dim x 2 (K and V) x dtype bytes x
    // tokens (kv_bytes_per_token_layer() is 2 x KV heads x head dim x dtype bytes).
    const std::int64_t bytes = d.model.kv_bytes_per_token_layer() *
                               std::int64_t{to->exit_layer(r.tier)} * std::int64_t{r.cached};
    // Within a host each GPU of the smaller TP group sends its shard over its own link.
    const int lanes = std::min(h.from->config().tp, to->config().tp);
    const Time start = engine_.now();
    const Time waited = start - h.since;
    Replica* from = h.from;
    transfers_->send(
        from->config().gpus.front(), to->config().gpus.front(), Bytes{bytes},
        d.host_link ? *d.host_link : HostLink{},
        [this, &r, from, to, start, waited, bytes] {
          from->release_handed_off(r);
          to->accept_decode(r);
          metrics_.on_kv_transfer(waited, engine_.now() - start, bytes);
        },
        lanes);
  }
}

void ServingSystem::on_iteration(Replica& replica) {
  if (disaggregated_) {
    // A decode replica's iteration may have freed KV (answers done): KV waiting for it moves.
    auto& dep = deployments_[replica_deployment_[static_cast<std::size_t>(replica.config().index)]];
    if (dep.config.role == PoolRole::kDecode && !dep.awaiting_decode.empty()) hand_off(dep);
  }
  // The waiting count sums every replica's queue: only when a sample of the series is due (once
  // per series_interval), not at every iteration of every replica (O(replicas) each).
  if (!metrics_.sample_due(engine_.now())) return;
  std::int64_t waiting = 0;
  for (const auto& r : replicas_) waiting += static_cast<std::int64_t>(r->waiting_count());
  metrics_.maybe_sample(engine_.now(), in_system_, waiting);
}

double ServingSystem::progress() const {
  const auto n = source_->expected_count();
  if (n <= 0) return -1;
  return static_cast<double>(metrics_.completed() + metrics_.dropped()) / static_cast<double>(n);
}

void ServingSystem::finish(Results& out) const {
  const Time makespan = last_completion_;
  metrics_.write(out, makespan);
  if (elastic_) elastic_->report(out, makespan);
  if (std::any_of(deployments_.begin(), deployments_.end(), [](const Deployment& d) {
        return d.config.model.moe() && d.config.expert.capacity_factor.has_value();
      })) {
    // MoE with a capacity factor: (token, expert) assignments routed and dropped over capacity
    // (GShard / Switch Transformer semantics; compute_model.hpp, ExpertParallel), over every MoE
    // layer of every iteration.
    double routed = 0, dropped = 0;
    for (const auto& r : replicas_) {
      routed += static_cast<double>(r->moe_routed_pairs());
      dropped += static_cast<double>(r->moe_dropped_pairs());
    }
    out.set_metric("serving_moe_routed_pairs", routed);
    out.set_metric("serving_moe_dropped_pairs", dropped);
    out.set_metric("serving_moe_drop_fraction", routed > 0 ? dropped / routed : 0);
  }
  if (config_.prefix_caching) {
    // Prefix caching: prompt tokens of admitted prefills (re-admissions after a preemption
    // included), those found cached (prefill saved), requests with a hit, blocks evicted.
    double lookup = 0, hit = 0, hit_requests = 0, evicted = 0;
    for (const auto& r : replicas_) {
      lookup += static_cast<double>(r->state().prefix_lookup_tokens());
      hit += static_cast<double>(r->state().prefix_hit_tokens_total());
      hit_requests += static_cast<double>(r->state().prefix_hit_requests());
      evicted += static_cast<double>(r->state().prefix_cache()->evicted_blocks());
    }
    out.set_metric("serving_prefix_lookup_tokens", lookup);
    out.set_metric("serving_prefix_hit_tokens", hit);
    out.set_metric("serving_prefix_hit_rate", lookup > 0 ? hit / lookup : 0);
    out.set_metric("serving_prefix_hit_requests", hit_requests);
    out.set_metric("serving_prefix_evicted_blocks", evicted);
  }
  auto& per_replica = out.details()["serving_replicas"];
  per_replica = nlohmann::json::array();
  for (std::size_t i = 0; i < replicas_.size(); ++i) {
    const auto& r = *replicas_[i];
    const auto& dep = deployments_[replica_deployment_[i]].config;
    const double block_bytes = static_cast<double>(config_.block_tokens) *
                               static_cast<double>(dep.model.kv_bytes_per_token_layer());
    const double util = makespan.count_ns() > 0 ? r.busy_seconds() / makespan.seconds() : 0;
    std::uint64_t cuts = 0;
    for (std::size_t v = 0; v < r.virtual_engines(); ++v)
      cuts += r.state(v).batches_cut_by_token_limit();
    out.set_metric("serving_utilisation_" + r.name(), util);
    per_replica.push_back({{"name", r.name()},
                           {"role", dep.role == PoolRole::kPrefill  ? "prefill"
                                    : dep.role == PoolRole::kDecode ? "decode"
                                                                    : "colocated"},
                           {"model", dep.model.name},
                           {"tp", dep.tp},
                           {"pp", dep.pp},
                           {"gpu", dep.gpu ? dep.gpu->name : config_.gpu.name},
                           {"hosts", replica_hosts(r)},
                           {"scheduler", dep.scheduler},
                           {"utilisation", util},
                           {"iterations", r.iterations()},
                           {"tokens_processed", r.tokens_processed()},
                           {"preemptions", r.preemptions()},
                           {"static_batches_cut_by_max_batch_tokens", cuts},
                           {"kv_capacity_bytes", static_cast<double>(r.kv().total()) * block_bytes},
                           {"kv_peak_bytes", static_cast<double>(r.kv().peak()) * block_bytes},
                           {"kv_mean_bytes", r.kv_usage().average(makespan) * block_bytes}});
    if (dep.kv_head_replicas > 1) per_replica.back()["kv_head_replicas"] = dep.kv_head_replicas;
    if (dep.model.moe()) {
      // Mixture of experts: the expert layout and the all-to-all bytes (per GPU send buffers).
      auto& entry = per_replica.back();
      entry["ep"] = dep.expert.ep;
      entry["expert_imbalance"] = dep.expert.imbalance;
      entry["alltoall_bytes"] = r.alltoall_bytes();
      if (dep.expert.capacity_factor) {
        entry["capacity_factor"] = *dep.expert.capacity_factor;
        entry["moe_routed_pairs"] = r.moe_routed_pairs();
        entry["moe_dropped_pairs"] = r.moe_dropped_pairs();
      }
    }
    if (dep.pp > 1) {
      // Pipeline stages: each stage's busy fraction and the activations sent between stages.
      auto& entry = per_replica.back();
      entry["stage_layers"] = dep.stage_layers;
      auto& stages = entry["stage_utilisation"];
      stages = nlohmann::json::array();
      for (int s = 0; s < r.pp(); ++s)
        stages.push_back(makespan.count_ns() > 0 ? r.stage_busy_seconds(s) / makespan.seconds()
                                                 : 0.0);
      entry["activation_bytes"] = r.activation_bytes();
    }
  }
}

}  // namespace mlsim::serving
