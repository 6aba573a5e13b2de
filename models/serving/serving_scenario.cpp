#include "models/serving/serving_scenario.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "models/serving/policies.hpp"
#include "models/serving/register.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/base/input_file.hpp"
#include "sim_core/collectives/read_costs.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim::serving {

namespace {

std::filesystem::path resolve(const std::filesystem::path& dir, const std::string& p) {
  std::filesystem::path path(p);
  return path.is_absolute() ? path : dir / path;
}

// The replicas of a deployment or of one of its pools: tp, replicas, pp, stage_layers.
DeploymentConfig read_pool(JsonReader& r, const TransformerShape& model, const std::string& name) {
  DeploymentConfig d;
  d.name = name;
  d.where = r.path();
  d.model = model;
  d.tp = static_cast<int>(r.integer("tp", 1, 64));
  d.replicas = static_cast<int>(r.integer_or("replicas", 1, 1, 4096));
  if (d.model.heads % d.tp != 0)
    throw InputError(r.path_of("tp"), fmt::format("tp {} must divide the {} heads of {}", d.tp,
                                                  d.model.heads, d.model.name));
  if (d.model.kv_heads % d.tp != 0) {
    // More GPUs than KV heads: as vLLM's QKVParallelLinear (vllm/model_executor/layers/linear.py:
    // tp_size >= total_num_kv_heads gives every GPU one KV head, num_kv_head_replicas = tp_size /
    // total_num_kv_heads), each KV head is replicated on tp / kv_heads GPUs. The replica then
    // costs and stores as a model of tp KV heads: each GPU computes, holds and reads one KV head
    // (K/V projection weights, KV cache, attention reads), tp / kv_heads times the unique KV.
    if (d.tp % d.model.kv_heads != 0)
      throw InputError(r.path_of("tp"),
                       fmt::format("tp {} must divide the KV heads ({}) of {} or be a multiple of "
                                   "them (each KV head then replicated tp / KV heads times)",
                                   d.tp, d.model.kv_heads, d.model.name));
    d.kv_head_replicas = d.tp / d.model.kv_heads;
    d.model.kv_heads = d.tp;
  }
  // Mixture of experts: expert parallelism over the replica's tp GPUs, and the busiest GPU's
  // expert load over the mean (compute_model.hpp, ExpertParallel).
  if (d.model.moe()) {
    d.expert.ep = static_cast<int>(r.integer_or("ep", 1, 1, 1024));
    if (d.expert.ep != 1 && d.expert.ep != d.tp)
      throw InputError(r.path_of("ep"),
                       fmt::format("ep {} must be 1 (experts split by tensor parallelism) or the "
                                   "tp degree ({}): expert parallelism runs over the replica's "
                                   "tensor-parallel GPUs (other layouts are not modelled)",
                                   d.expert.ep, d.tp));
    if (d.model.experts % d.expert.ep != 0)
      throw InputError(r.path_of("ep"), fmt::format("ep {} must divide the {} experts of {}",
                                                    d.expert.ep, d.model.experts, d.model.name));
    d.expert.imbalance = r.number_or("expert_imbalance", 1.0, 1.0, 1e6);
    // GShard / Switch Transformer expert capacity (compute_model.hpp, ExpertParallel): none is
    // dropless.
    if (r.has("capacity_factor")) {
      d.expert.capacity_factor = r.number("capacity_factor", 1e-3, 1e3);
      if (d.expert.imbalance != 1.0)
        throw InputError(r.path_of("capacity_factor"),
                         "a capacity factor pads every expert to its capacity (the routing "
                         "draw decides what drops): give no expert_imbalance with it");
    }
  } else {
    for (const char* key : {"ep", "expert_imbalance", "capacity_factor"})
      if (r.has(key))
        throw InputError(r.path_of(key),
                         fmt::format("{} is not a mixture-of-experts model (the catalog gives "
                                     "it no experts)",
                                     d.model.name));
  }
  // Pipeline stages: the model's layers split evenly (the first layers % pp stages one more), or
  // as given.
  d.pp = static_cast<int>(r.integer_or("pp", 1, 1, 1024));
  if (d.pp > d.model.layers)
    throw InputError(r.path_of("pp"), fmt::format("{} has {} layers, fewer than pp {}",
                                                  d.model.name, d.model.layers, d.pp));
  if (r.has("stage_layers")) {
    const auto layers = r.integers("stage_layers", 1, d.model.layers);
    std::int64_t sum = 0;
    for (auto l : layers) sum += l;
    if (static_cast<int>(layers.size()) != d.pp || sum != d.model.layers)
      throw InputError(r.path_of("stage_layers"),
                       fmt::format("expected pp ({}) layer counts summing to the {} layers of {}, "
                                   "got {} summing to {}",
                                   d.pp, d.model.layers, d.model.name, layers.size(), sum));
    d.stage_layers.assign(layers.begin(), layers.end());
  } else {
    for (int s = 0; s < d.pp; ++s)
      d.stage_layers.push_back(d.model.layers / d.pp + (s < d.model.layers % d.pp ? 1 : 0));
  }
  return d;
}

DeploymentConfig read_deployment(JsonReader& r, const ModelCatalog& catalog,
                                 const std::string& name) {
  return read_pool(r, catalog.get(r.string("model"), r.path_of("model")), name);
}

// system.separate[i].elastic: replicated stages with process-group semantics (elastic.hpp).
ElasticConfig read_elastic(JsonReader& e, DeploymentConfig& d) {
  ElasticConfig c;
  const auto policy =
      serving_policies().process_groups.choose_or(e, "process_groups", "multiworld");
  c.process_groups = policy.name;
  c.semantics = policy.value;
  const auto routing = serving_policies().stage_routers.choose_or(e, "stage_router", "round_robin");
  c.stage_router = routing.name;
  c.routing = routing.value;
  const auto rebalance =
      serving_policies().rebalancers.choose_or(e, "rebalance", kDefaultRebalance);
  c.rebalance = rebalance.name;
  c.rebalancing = rebalance.value;
  auto stages = e.objects("stages");
  if (stages.empty()) throw InputError(e.path_of("stages"), "expected at least one stage");
  std::int64_t sum = 0;
  for (auto& st : stages) {
    ElasticStage x;
    x.layers = static_cast<std::int32_t>(st.integer("layers", 1, d.model.layers));
    x.replicas = static_cast<int>(st.integer_or("replicas", 1, 0, 4096));
    x.max_replicas = static_cast<int>(st.integer_or("max_replicas", x.replicas, 1, 4096));
    if (x.max_replicas < x.replicas)
      throw InputError(st.path_of("max_replicas"),
                       fmt::format("expected at least replicas ({})", x.replicas));
    sum += x.layers;
    st.finish();
    c.stages.push_back(x);
  }
  if (sum != d.model.layers)
    throw InputError(e.path_of("stages"),
                     fmt::format("the stages' layers must sum to the {} layers of {}, got {}",
                                 d.model.layers, d.model.name, sum));
  if (c.stages.front().replicas < 1)
    throw InputError(e.path_of("stages") + "[0].replicas",
                     "the first stage needs a replica at the start (it holds the queues)");
  // Costs: no defaults, each scenario states its values with their sources.
  c.costs.polling_overhead = e.duration("polling_overhead");
  // Optional: zero leaves the host-side polling rounds out (the busy-polling time is reported
  // whatever it is).
  c.costs.poll_step = e.duration_or("poll_step", "0s");
  c.costs.world_creation = e.duration("world_creation");
  c.costs.weight_load = e.bandwidth("weight_load");
  auto wd = e.object_or_empty("watchdog");
  // pymultiworld v0.2.3, multiworld/watchdog.py: UPDATE_PERIOD, UPDATES_PER_CHECK.
  c.costs.watchdog.update_period = wd.duration_or("update_period", "300ms");
  if (c.costs.watchdog.update_period <= Time::zero())
    throw InputError(wd.path_of("update_period"), "expected a duration > 0");
  c.costs.watchdog.updates_per_check =
      static_cast<int>(wd.integer_or("updates_per_check", 10, 1, 1000000));
  wd.finish();
  c.virtual_engines = static_cast<int>(e.integer_or("virtual_engines", 0, 0, 4096));
  c.kv_migration = e.boolean_or("kv_migration", false);
  c.drain_scale_in = e.choice_or("scale_in", {"immediate", "drain"}, "immediate") == "drain";
  c.drain_timeout = e.duration_or("drain_timeout", "60s");
  if (c.drain_timeout <= Time::zero())
    throw InputError(e.path_of("drain_timeout"), "expected a duration > 0");
  const auto last_stage = static_cast<std::int64_t>(c.stages.size()) - 1;
  if (e.has("scale")) {
    for (auto& x : e.objects("scale")) {
      ScaleCommand cmd;
      cmd.at = x.duration("at");
      cmd.stage = static_cast<int>(x.integer("stage", 0, last_stage));
      cmd.delta = static_cast<int>(x.integer("add", -4096, 4096));
      if (cmd.delta == 0) throw InputError(x.path_of("add"), "expected a non-zero count");
      x.finish();
      c.scale.push_back(cmd);
    }
  } else {
    e.ignore("scale");
  }
  if (auto a = e.optional_object("autoscaler")) {
    auto& as = c.autoscaler;
    as.enabled = true;
    as.stage = static_cast<int>(a->integer_or("stage", 0, 0, last_stage));
    as.interval = a->duration_or("interval", "10s");
    if (as.interval <= Time::zero())
      throw InputError(a->path_of("interval"), "expected a duration > 0");
    // Either the waiting requests per front replica or the SLO attainment drives it.
    as.slo_signal =
        a->choice_or("signal", {"waiting", "slo_attainment"}, "waiting") == "slo_attainment";
    if (as.slo_signal) {
      as.scale_out_below = a->number("scale_out_below", 0, 1);
      as.scale_in_above = a->number_or("scale_in_above", 1, 0, 1);
      if (as.scale_in_above <= as.scale_out_below)
        throw InputError(a->path_of("scale_in_above"),
                         fmt::format("expected above scale_out_below ({})", as.scale_out_below));
    } else {
      as.scale_out_above = a->number("scale_out_above", 0, 1e12);
      as.scale_in_below = a->number_or("scale_in_below", 0, 0, 1e12);
      if (as.scale_in_below >= as.scale_out_above)
        throw InputError(a->path_of("scale_in_below"),
                         fmt::format("expected below scale_out_above ({})", as.scale_out_above));
    }
    as.min_replicas = static_cast<int>(a->integer_or("min_replicas", 1, 1, 4096));
    as.cooldown = a->duration_or("cooldown", "60s");
    a->finish();
  }
  e.finish();
  d.pp = static_cast<int>(c.stages.size());
  d.stage_layers.clear();
  for (const auto& st : c.stages) d.stage_layers.push_back(st.layers);
  d.replicas = c.stages.front().replicas;
  return c;
}

}  // namespace

std::int32_t tier_depth(const TransformerShape& member, const TransformerShape& largest,
                        const std::string& rule) {
  if (rule == "equal_layers") return std::min(member.layers, largest.layers);
  const double layers = static_cast<double>(member.params_per_layer()) * member.layers /
                        static_cast<double>(largest.params_per_layer());
  return std::clamp(static_cast<std::int32_t>(std::lround(layers)), 1, largest.layers);
}

ServingScenario parse_serving_scenario(JsonReader& root, const HardwareCatalog& hardware,
                                       const std::vector<NodeId>& hosts,
                                       const NodeHardware& node_hardware, const CostModel& costs,
                                       const std::filesystem::path& dir) {
  const int topology_hosts = static_cast<int>(hosts.size());
  ServingScenario s;
  auto& c = s.config;
  auto sys = root.object("system");
  sys.ignore("model");
  // A file named by a key: an error opening it names the key (errors inside it name the file).
  const auto catalog_file = resolve(dir, sys.string("catalog"));
  const auto catalog = [&] {
    try {
      return ModelCatalog::load(catalog_file);
    } catch (const InputError& e) {
      if (e.path().empty()) throw InputError(sys.path_of("catalog"), e.message());
      throw;
    }
  }();
  const auto family = sys.strings("family");
  if (family.empty()) throw InputError(sys.path_of("family"), "expected at least one model");
  std::vector<TransformerShape> members;
  for (std::size_t i = 0; i < family.size(); ++i)
    members.push_back(catalog.get(family[i], sys.path_of("family") + fmt::format("[{}]", i)));
  c.tiers = static_cast<std::int32_t>(members.size());
  const DeploymentMode mode = serving_policies().modes.choose(sys, "mode").value;

  BatchLimits limits;
  limits.max_requests =
      static_cast<std::int32_t>(sys.integer_or("max_batch_requests", 256, 1, 1 << 20));
  limits.max_tokens =
      static_cast<std::int32_t>(sys.integer_or("max_batch_tokens", 4096, 1, 1 << 24));
  const std::string scheduler =
      serving_policies().schedulers.choose_or(sys, "scheduler", "continuous").name;
  const std::string router =
      serving_policies().routers.choose_or(sys, "router", "least_outstanding_tokens").name;
  c.block_tokens = static_cast<std::int32_t>(sys.integer_or("block_tokens", 16, 1, 4096));
  c.gpu_memory_utilization = sys.number_or("gpu_memory_utilization", 0.9, 0.01, 1.0);
  c.prefix_caching = sys.boolean_or("prefix_caching", false);
  c.request_log = sys.boolean_or("request_log", false);
  const std::string prefix_path = sys.path_of("prefix_caching");
  // The engine's per-iteration framework overhead: a catalog entry with its source, or a duration.
  if (sys.has("engine")) {
    c.iteration_overhead =
        hardware.engine(sys.string("engine"), sys.path_of("engine")).iteration_overhead;
    if (sys.has("iteration_overhead"))
      throw InputError(sys.path_of("iteration_overhead"),
                       "give either \"engine\" (a catalog entry) or \"iteration_overhead\", not "
                       "both");
  } else {
    c.iteration_overhead = sys.duration_or("iteration_overhead", "0s");
  }
  if (sys.has("allreduce_latency"))
    throw InputError(sys.path_of("allreduce_latency"),
                     "moved: a tensor-parallel all-reduce is costed by the collective layer, from "
                     "\"system.costs\" (launch, per-step latency, protocols; include "
                     "workloads/collectives/nccl_a100.json for the A100-fitted values) and the "
                     "GPUs' intra_node link of topology.hardware (docs/serving.md, \"Tensor "
                     "parallelism\")");
  if (auto costs = sys.optional_object("costs"))
    c.tp_allreduce.costs = collectives::read_cost_model(*costs);
  c.sampling_pass_overhead = sys.duration_or("sampling_pass_overhead", "0s");
  c.series_interval = sys.duration_or("series_interval", "1s");
  if (c.series_interval <= Time::zero())
    throw InputError(sys.path_of("series_interval"), "expected a duration > 0");
  auto slo = sys.object_or_empty("slo");
  c.slo.ttft = slo.duration_or("ttft", "2s");
  c.slo.tpot = slo.duration_or("tpot", "200ms");
  slo.finish();

  auto apply_common = [&](DeploymentConfig& d) {
    d.scheduler = scheduler;
    d.limits = limits;
    d.router = router;
  };
  if (mode == DeploymentMode::kMfs) {
    auto m = sys.object("mfs");
    DeploymentConfig d = read_deployment(m, catalog, "mfs");
    const auto rule =
        m.choice_or("tier_depth", {"equal_parameters", "equal_layers"}, "equal_parameters");
    d.multi_level_sampling = m.boolean_or("multi_level_sampling", true);
    d.mfs = true;
    if (d.pp > 1)
      throw InputError(m.path_of("pp"),
                       "pipeline stages with MFS tiers (exits inside stages) are not modelled");
    // Tier depths from the catalog's shape (replicated KV heads are no parameters of the model).
    TransformerShape largest = d.model;
    largest.kv_heads /= d.kv_head_replicas;
    for (const auto& member : members) d.exit_layers.push_back(tier_depth(member, largest, rule));
    for (std::size_t i = 1; i < d.exit_layers.size(); ++i)
      if (d.exit_layers[i] <= d.exit_layers[i - 1])
        throw InputError(sys.path_of("family"),
                         "family members must grow in size (tier depths "
                         "must increase)");
    d.exit_layers.back() = d.model.layers;  // the largest tier is the whole model
    apply_common(d);
    m.finish();
    c.deployments.push_back(std::move(d));
    sys.ignore("separate");
  } else {
    auto deps = sys.objects("separate");
    if (deps.size() != members.size())
      throw InputError(sys.path_of("separate"),
                       fmt::format("expected one deployment per family member ({}), got {}",
                                   members.size(), deps.size()));
    for (std::size_t i = 0; i < deps.size(); ++i) {
      auto& e = deps[i];
      if (e.has("prefill") || e.has("decode")) {
        // Prefill/decode disaggregation: the member's replicas in two pools, each with its own
        // tp and replicas (and GPU type: that of its hosts); KV moves from a prefill replica to
        // a decode replica after each prefill.
        for (const char* key : {"tp", "replicas", "pp", "stage_layers"})
          if (e.has(key))
            throw InputError(e.path_of(key),
                             "a disaggregated deployment gives tp and replicas per pool "
                             "(\"prefill\" and \"decode\"), not for the whole");
        const TransformerShape model = catalog.get(e.string("model"), e.path_of("model"));
        if (model.name != members[i].name)
          throw InputError(
              e.path_of("model"),
              fmt::format("deployment {} must serve family member \"{}\"", i, members[i].name));
        auto pre = e.object("prefill");
        auto dec = e.object("decode");
        DeploymentConfig p = read_pool(pre, model, members[i].name + ".prefill");
        DeploymentConfig d = read_pool(dec, model, members[i].name + ".decode");
        for (auto* pool : {&p, &d})
          if (pool->pp > 1)
            throw InputError(pool->where + ".pp",
                             "pipeline stages in a disaggregated pool are not modelled (the KV "
                             "hand-off is between single-stage replicas)");
        pre.finish();
        dec.finish();
        e.finish();
        p.role = PoolRole::kPrefill;
        d.role = PoolRole::kDecode;
        for (auto* pool : {&p, &d}) {
          pool->exit_layers.assign(members.size(), 0);
          pool->exit_layers[i] = model.layers;
          apply_common(*pool);
        }
        p.decode_pool = static_cast<int>(c.deployments.size()) + 1;
        c.deployments.push_back(std::move(p));
        c.deployments.push_back(std::move(d));
        continue;
      }
      const bool elastic = e.has("elastic");
      if (elastic)
        for (const char* key : {"replicas", "pp", "stage_layers"})
          if (e.has(key))
            throw InputError(e.path_of(key),
                             "an elastic deployment gives its stages, their layers and replica "
                             "counts in \"elastic.stages\"");
      DeploymentConfig d = read_deployment(e, catalog, members[i].name);
      if (elastic) {
        if (c.deployments.end() !=
            std::find_if(c.deployments.begin(), c.deployments.end(),
                         [](const DeploymentConfig& x) { return x.elastic.has_value(); }))
          throw InputError(e.path_of("elastic"), "at most one elastic deployment per scenario");
        auto el = e.object("elastic");
        d.elastic = read_elastic(el, d);
      } else {
        e.ignore("elastic");
      }
      if (d.model.name != members[i].name)
        throw InputError(
            e.path_of("model"),
            fmt::format("deployment {} must serve family member \"{}\"", i, members[i].name));
      d.exit_layers.assign(members.size(), 0);
      d.exit_layers[i] = d.model.layers;
      apply_common(d);
      e.finish();
      c.deployments.push_back(std::move(d));
    }
    sys.ignore("mfs");
  }
  s.gpus = ServingSystem::gpus_needed(c);
  // Placement: a replica's tensor-parallel group lives on one host with at least tp GPUs
  // (topology.hardware's gpus_per_host), so its all-reduces run over that host's intra_node link,
  // or, when tp is larger than the host it would start on, on whole hosts of g GPUs each (tp a
  // multiple of g; every host of the span with g GPUs): its collectives then cross the network
  // between them (tp_allreduce.hpp, across_hosts). Replicas are packed onto the hosts in order,
  // deployment by deployment; GPUs a replica cannot use (fewer than tp left on a host) stay idle.
  // s.gpu_slots gets one host per GPU used.
  std::size_t host_index = 0;
  int used_on_host = 0;
  auto gpus_on = [&](std::size_t i) {
    const HostHardware* h = node_hardware.host(hosts[i]);
    return h == nullptr ? 1 : h->gpus;
  };
  auto too_few_hosts = [&] {
    return InputError(sys.path_of("mode"),
                      fmt::format("the deployments need {} GPUs in groups of tp (on one host, or "
                                  "on whole hosts for a group larger than a host), more than the "
                                  "topology's {} hosts hold",
                                  s.gpus, topology_hosts));
  };
  std::vector<std::size_t> first_slot;                 // of each deployment in s.gpu_slots
  std::vector<std::optional<IntraNodeLink>> any_link;  // a host's intra_node link, if any
  for (auto& d : c.deployments) {
    first_slot.push_back(s.gpu_slots.size());
    any_link.emplace_back();
    std::optional<IntraNodeLink> link;
    // An elastic deployment: each later stage's GPU and intra_node link (index 0 unused: the
    // first stage's are the deployment's).
    std::vector<std::optional<GpuSpec>> elastic_gpus(d.elastic ? d.elastic->stages.size() : 0);
    std::vector<std::optional<IntraNodeLink>> elastic_links(elastic_gpus.size());
    // A replica is pp groups of tp GPUs (its stages), each group on one host (or on whole hosts);
    // consecutive stages on the same host send their activations over its intra_node link, on
    // different hosts over the network.
    // An elastic deployment's groups are its stage workers (spares included), stage by stage.
    int groups = d.replicas * d.pp;
    if (d.elastic) {
      groups = 0;
      for (const auto& st : d.elastic->stages) groups += st.max_replicas;
    }
    for (int group = 0; group < groups; ++group) {
      const int replica = d.elastic ? group : group / d.pp;
      const int stage = d.elastic ? (group > 0 ? 1 : 0) : group % d.pp;
      // A partly used host without room for the group: on to the next, empty, one.
      while (host_index < hosts.size() && used_on_host > 0 &&
             gpus_on(host_index) - used_on_host < d.tp) {
        ++host_index;
        used_on_host = 0;
      }
      if (host_index >= hosts.size()) throw too_few_hosts();
      // The hosts of the group with the GPUs it uses on each, and their indices.
      std::vector<std::size_t> span{host_index};
      int per_host = d.tp;
      bool shares_host_with_previous_stage = false;
      if (gpus_on(host_index) >= d.tp) {
        shares_host_with_previous_stage =
            stage > 0 && used_on_host > 0 && s.gpu_slots.back() == hosts[host_index];
        used_on_host += d.tp;
      } else {
        // A group larger than the host: whole hosts of the same size.
        per_host = gpus_on(host_index);
        if (d.elastic)
          throw InputError(d.where + ".tp",
                           fmt::format("an elastic deployment's stage worker lives on one host, "
                                       "but host {} has {} GPU(s) for tp {} "
                                       "(topology.hardware.gpus_per_host)",
                                       host_index, per_host, d.tp));
        if (d.tp % per_host != 0)
          throw InputError(
              d.where + ".tp",
              fmt::format("tp {} is larger than host {} ({} GPU(s)): a tensor-parallel group "
                          "across hosts takes whole hosts, so tp must be a multiple of {} "
                          "(topology.hardware.gpus_per_host)",
                          d.tp, host_index, per_host, per_host));
        const auto hosts_needed = static_cast<std::size_t>(d.tp / per_host);
        if (host_index + hosts_needed > hosts.size()) throw too_few_hosts();
        for (std::size_t k = 1; k < hosts_needed; ++k) {
          if (gpus_on(host_index + k) != per_host)
            throw InputError(
                d.where + ".tp",
                fmt::format("a tensor-parallel group across hosts takes whole hosts of one size, "
                            "but tp {} would span host {} ({} GPU(s)) and host {} ({})",
                            d.tp, host_index, per_host, host_index + k, gpus_on(host_index + k)));
          span.push_back(host_index + k);
        }
        host_index += hosts_needed;
        used_on_host = 0;
      }
      for (const std::size_t hi : span) {
        const NodeId host = hosts[hi];
        for (int g = 0; g < per_host; ++g) s.gpu_slots.push_back(host);
        // Each deployment runs one GPU type and one intra_node link; deployments may differ (a
        // heterogeneous fleet).
        const GpuSpec& gpu = node_hardware.gpu(host, "topology.hardware");
        // An elastic deployment's stages may run different GPU types (one per stage).
        std::size_t es = 0;
        if (d.elastic)
          for (int before = d.elastic->stages[0].max_replicas; group >= before;
               before += d.elastic->stages[es].max_replicas)
            ++es;
        if (es > 0) {
          auto& stage_gpu = elastic_gpus[es];
          if (!stage_gpu)
            stage_gpu = gpu;
          else if (stage_gpu->name != gpu.name)
            throw InputError("topology.hardware",
                             fmt::format("an elastic stage runs one GPU type, but stage {} of {} "
                                         "has {} and {} (host {})",
                                         es, d.where, stage_gpu->name, gpu.name, hi));
        } else if (!d.gpu) {
          d.gpu = gpu;
        } else if (gpu.name != d.gpu->name) {
          throw InputError("topology.hardware",
                           fmt::format("a deployment runs one GPU type, but {} has {} and {} "
                                       "(replica {} on host {})",
                                       d.where, d.gpu->name, gpu.name, replica, hi));
        }
        if (const HostHardware* hh = node_hardware.host(host);
            hh != nullptr && hh->intra_node && !any_link.back())
          any_link.back() = hh->intra_node;
        if (per_host == 1 && !shares_host_with_previous_stage) continue;
        // The link between a replica's GPUs: the host's intra_node link (the GPU catalog's, or
        // the scenario's override), needed as soon as two GPUs of a group or two of its stages
        // share a host.
        const HostHardware* h = node_hardware.host(host);
        if (h == nullptr || !h->intra_node)
          throw InputError(
              "topology.hardware",
              fmt::format("{} needs the link between the GPUs of a host, but "
                          "GPU \"{}\" has no intra_node entry in the catalog: set "
                          "topology.hardware.intra_node",
                          per_host > 1 ? "tensor parallelism" : "pipeline stages on one host",
                          gpu.name));
        auto& this_link = es > 0 ? elastic_links[es] : link;
        if (!this_link) {
          this_link = h->intra_node;
        } else if (h->intra_node->bandwidth.bytes_per_s != this_link->bandwidth.bytes_per_s ||
                   h->intra_node->latency != this_link->latency) {
          throw InputError("topology.hardware",
                           fmt::format("a deployment runs one intra_node link (an elastic "
                                       "deployment one per stage), but host {} of {} differs",
                                       hi, d.where));
        }
      }
    }
    if (d.elastic) {
      // Stages after the first on another GPU type or link price their layers with their own.
      for (std::size_t es = 1; es < d.elastic->stages.size(); ++es) {
        auto& st = d.elastic->stages[es];
        if (elastic_gpus[es] && elastic_gpus[es]->name != d.gpu->name) {
          st.gpu = elastic_gpus[es];
          OperatorTimer::check(costs, *st.gpu, "compute");
        }
        const auto& l = elastic_links[es];
        if (l && (!link || l->bandwidth.bytes_per_s != link->bandwidth.bytes_per_s ||
                  l->latency != link->latency)) {
          st.tp_allreduce = c.tp_allreduce;
          st.tp_allreduce->bandwidth = l->bandwidth;
          st.tp_allreduce->route_latency = l->latency;
        }
        if (!link && l) link = l;  // for activations between workers sharing a host
      }
    }
    if (link) {
      d.tp_allreduce = c.tp_allreduce;  // the costs (system.costs) are common
      d.tp_allreduce->bandwidth = link->bandwidth;
      d.tp_allreduce->route_latency = link->latency;
      d.host_link = HostLink{link->bandwidth, link->latency};
    }
    OperatorTimer::check(costs, *d.gpu, "compute");
  }
  first_slot.push_back(s.gpu_slots.size());
  // Disaggregated pools that share a host move KV over its intra_node link.
  for (std::size_t i = 0; i < c.deployments.size(); ++i) {
    const auto& p = c.deployments[i];
    if (p.role != PoolRole::kPrefill) continue;
    auto& d = c.deployments[static_cast<std::size_t>(p.decode_pool)];
    bool share = false;
    for (std::size_t a = first_slot[i]; a < first_slot[i + 1]; ++a)
      for (std::size_t b = first_slot[i + 1]; b < first_slot[i + 2]; ++b)
        share = share || s.gpu_slots[a] == s.gpu_slots[b];
    if (!share || d.host_link) continue;
    const auto& link = any_link[i + 1] ? any_link[i + 1] : any_link[i];
    if (!link)
      throw InputError("topology.hardware",
                       fmt::format("{} and {} share a host, whose GPUs have no intra_node link to "
                                   "move KV over: set topology.hardware.intra_node",
                                   p.where, d.where));
    d.host_link = HostLink{link->bandwidth, link->latency};
  }
  c.gpu = *c.deployments.front().gpu;
  sys.finish();

  auto w = root.object("workload");
  const auto kind = w.choice("source", {"trace", "generator"});
  if (kind == "trace") {
    s.workload.kind = WorkloadParams::Kind::kTrace;
    s.workload.trace = resolve(dir, w.string("trace"));
    const auto format = w.choice_or("format", {"azure", "mooncake", "burstgpt"}, "azure");
    s.workload.format = format == "mooncake"   ? WorkloadParams::Format::kMooncake
                        : format == "burstgpt" ? WorkloadParams::Format::kBurstGpt
                                               : WorkloadParams::Format::kAzure;
    s.workload.rate_scale = w.number_or("rate_scale", 1.0, 1e-6, 1e6);
    s.workload.limit = w.integer_or("limit", -1, -1, std::int64_t{1} << 40);
    // Opened now (and again at the start) so that a missing file or a folder is an input error
    // before the run.
    (void)open_input_file(s.workload.trace, w.path_of("trace"), "request trace");
    w.ignore("generator");
  } else {
    s.workload.kind = WorkloadParams::Kind::kGenerator;
    auto g = w.object("generator");
    g.only_keys({"rate", "arrival_cv", "count", "lengths_from", "prompt_tokens", "output_tokens"});
    auto& p = s.workload.generator;
    p.rate_per_s = g.number("rate", 1e-9, 1e9);
    p.arrival_cv = g.number_or("arrival_cv", 1.0, 1e-3, 100);
    p.count = g.integer("count", 1, std::int64_t{1} << 40);
    // Lengths: log-normal fitted to a trace, or fixed (controlled studies).
    const bool fixed = g.has("prompt_tokens") || g.has("output_tokens");
    if (fixed && g.has("lengths_from"))
      throw InputError(g.path_of("lengths_from"),
                       "give either \"lengths_from\" (a trace to fit) or \"prompt_tokens\" and "
                       "\"output_tokens\" (fixed lengths), not both");
    if (fixed) {
      p.fixed_prompt = static_cast<std::int32_t>(g.integer("prompt_tokens", 1, 1 << 30));
      p.fixed_output = static_cast<std::int32_t>(g.integer("output_tokens", 1, 1 << 30));
    } else {
      const auto lengths = resolve(dir, g.string("lengths_from"));
      if (!std::filesystem::exists(lengths))
        throw InputError(g.path_of("lengths_from"), "no such file: " + lengths.string());
      p.lengths = fit_lengths(lengths);
    }
    g.finish();
    w.ignore("trace");
    w.ignore("rate_scale");
    w.ignore("limit");
    w.ignore("format");
  }
  if (w.has("tier_mix")) {
    c.tier_mix = w.numbers("tier_mix", 0, 1);
  } else {
    c.tier_mix.assign(static_cast<std::size_t>(c.tiers), 1.0 / c.tiers);
    w.ignore("tier_mix");
  }
  if (static_cast<std::int32_t>(c.tier_mix.size()) != c.tiers)
    throw InputError(w.path_of("tier_mix"),
                     fmt::format("expected {} fractions (one per family member)", c.tiers));
  const double sum = std::accumulate(c.tier_mix.begin(), c.tier_mix.end(), 0.0);
  if (std::abs(sum - 1.0) > 1e-6)
    throw InputError(w.path_of("tier_mix"), fmt::format("fractions must sum to 1, got {}", sum));
  c.escalation_probability = w.number_or("escalation_probability", 0.0, 0.0, 1.0);
  w.finish();
  if (c.prefix_caching) {
    const bool hashes = s.workload.kind == WorkloadParams::Kind::kTrace &&
                        s.workload.format == WorkloadParams::Format::kMooncake;
    if (!hashes)
      throw InputError(prefix_path,
                       "prefix caching needs the prompts' block content ids: a "
                       "Mooncake trace (workload.format \"mooncake\")");
    for (const auto& d : c.deployments)
      if (d.pp > 1)
        throw InputError(
            prefix_path,
            fmt::format("prefix caching with pipeline stages ({}.pp) is not modelled", d.where));
    if (mode == DeploymentMode::kMfs)
      throw InputError(prefix_path,
                       "prefix caching with MFS tiers (KV of different depths) is not modelled; "
                       "use mode \"separate\"");
    if (MooncakeTraceSource::kBlockTokens % c.block_tokens != 0)
      throw InputError(prefix_path,
                       fmt::format("the trace's {}-token blocks must be whole KV blocks of "
                                   "system.block_tokens ({})",
                                   MooncakeTraceSource::kBlockTokens, c.block_tokens));
  }
  return s;
}

std::unique_ptr<RequestSource> make_request_source(const WorkloadParams& w, std::uint64_t seed) {
  if (w.kind == WorkloadParams::Kind::kTrace) {
    // The run streams the trace; reading it through once now makes a bad line an input error
    // of the prepare step (and of `mlsim validate`), not of the middle of the run.
    if (w.format == WorkloadParams::Format::kMooncake) {
      for (MooncakeTraceSource scan(w.trace, w.rate_scale, w.limit); scan.next();) {
      }
      return std::make_unique<MooncakeTraceSource>(w.trace, w.rate_scale, w.limit);
    }
    if (w.format == WorkloadParams::Format::kBurstGpt) {
      for (BurstGptTraceSource scan(w.trace, w.rate_scale, w.limit); scan.next();) {
      }
      return std::make_unique<BurstGptTraceSource>(w.trace, w.rate_scale, w.limit);
    }
    for (AzureTraceSource scan(w.trace, w.rate_scale, w.limit); scan.next();) {
    }
    return std::make_unique<AzureTraceSource>(w.trace, w.rate_scale, w.limit);
  }
  return std::make_unique<GeneratedSource>(w.generator, RandomStream(seed, "serving.arrivals"),
                                           RandomStream(seed, "serving.lengths"));
}

namespace {
ServingConfig with_seed(ServingConfig c, std::uint64_t seed) {
  c.seed = seed;
  return c;
}
}  // namespace

ServingModel::ServingModel(ServingScenario scenario, ModelEnv& env)
    : scenario_(std::move(scenario)),
      system_(std::make_unique<ServingSystem>(
          env.engine, env.compute, scenario_.gpu_slots, with_seed(scenario_.config, env.seed),
          make_request_source(scenario_.workload, env.seed), env.stream("serving.tiers"),
          env.stream("serving.escalation"), &env.network, &env.links)) {
  if (env.trace) system_->set_trace(env.trace);
  system_->watch(env.nodes);
}

void ServingModel::start(ModelEnv&) {
  system_->start();
}

void ServingModel::finish(ModelEnv&, Results& out) {
  system_->finish(out);
}

double ServingModel::progress(const ModelEnv&) const {
  return system_->progress();
}

}  // namespace mlsim::serving

namespace mlsim {

void register_serving(ModelRegistry& registry) {
  registry.add(
      {"serving",
       "LLM serving: Llama-style transformers on GPU replicas (platform Compute), paged "
       "KV cache, static / continuous (vLLM) / chunked-prefill (Sarathi) batching, "
       "routers, Azure traces or generators; MFS tiered serving vs separate models",
       serving::serving_policies().describe(), [](ModelSetup& setup) -> std::unique_ptr<Model> {
         return std::make_unique<serving::ServingModel>(
             serving::parse_serving_scenario(setup.root, setup.hardware, setup.topology.hosts(),
                                             setup.node_hardware, setup.costs, setup.scenario_dir),
             setup.env);
       }});
}

}  // namespace mlsim
