#include "models/embcache/embcache_model.hpp"

#include <cmath>

#include "models/embcache/policies.hpp"
#include "models/training/policies.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/collectives/read_costs.hpp"
#include "sim_core/run/simulation_model.hpp"

namespace mlsim::embcache {
ModelParams read_embcache_params(JsonReader& system, JsonReader& workload, const Topology& topology,
                                 const std::filesystem::path& scenario_dir) {
  ModelParams p;
  TrainingParams& t = p.training;
  // The policy presets both choices; setting one apart is an ablation.
  const EmbcachePolicies& policies = embcache_policies();
  const SystemPreset& preset = policies.systems.choose(system, "policy").value;
  t.allocation = policies.allocations.choose_or(system, "allocation", preset.allocation).value;
  t.sync = policies.syncs.choose_or(system, "sync", preset.sync).value;
  if (t.sync == Sync::kBounded) {
    // Hetu's pull and push bounds; 0 (Herald's README runs HET with --bound 0) is BSP-exact.
    t.pull_bound = system.integer_or("pull_bound", 0, 0, 1 << 30);
    t.push_bound = system.integer_or("push_bound", 0, 0, 1 << 30);
  } else {
    for (const char* key : {"pull_bound", "push_bound"})
      if (system.has(key))
        throw InputError(system.path_of(key), "only the bounded sync has staleness bounds");
  }
  p.cache_ratio = system.number_or("cache_ratio", 0.1, 0, 1);
  t.row_bytes = 4 * system.integer_or("embedding_dim", 128, 1, 1 << 20);
  // Every request and response is a send_recv call of the collective layer, with its costs; the
  // transport's profile gives the host costs the scenario's system.host does not.
  const TransportProfile transport =
      policies.transports.choose_or(system, "transport", "none").value;
  bool overhead_given = false, latency_given = false;
  if (system.has("host")) {
    const nlohmann::json& host = system.raw("host");
    overhead_given = host.is_object() && host.contains("message_overhead");
    latency_given = host.is_object() && host.contains("message_latency");
  }
  t.messages = collectives::read_message_costs(
      system, "not modelled by embcache (the PS applies rows without a cost)");
  if (!overhead_given) t.messages.host.message_overhead = transport.message_overhead;
  if (!latency_given) t.messages.host.message_latency = transport.message_latency;

  const auto hosts = static_cast<std::int64_t>(topology.hosts().size());
  if (hosts < 2)
    throw InputError("topology", "the embcache model needs at least two hosts (workers and a PS)");
  // PS servers, each a contiguous range of the table (ps-lite's AveragePartitioner): the hosts
  // after the workers.
  const std::int64_t servers = system.integer_or("servers", 1, 1, 64);
  if (servers > hosts - 1)
    throw InputError(system.path_of("servers"), "expected at most " + std::to_string(hosts - 1) +
                                                    " servers: the topology has " +
                                                    std::to_string(hosts) +
                                                    " hosts and needs a worker");
  const std::int64_t most = std::min<std::int64_t>(hosts - servers, 64);
  const auto workers = static_cast<std::size_t>(workload.integer_or("workers", most, 1, most));
  for (std::size_t w = 0; w < workers; ++w) t.workers.push_back(topology.hosts()[w]);
  for (std::int64_t s = 0; s < servers; ++s)
    t.servers.push_back(topology.hosts()[workers + static_cast<std::size_t>(s)]);
  t.batch_per_worker =
      static_cast<std::size_t>(workload.integer_or("batch_per_worker", 256, 1, 1 << 24));
  t.iterations = static_cast<std::size_t>(workload.integer("iterations", 1, 100'000'000));
  t.compute_per_sample = workload.duration("compute_per_sample");
  // The dense part's gradient, synchronised by the training core's ps (on the PS host) or ring.
  t.dense_parameters = workload.integer_or("dense_parameters", 0, 0, std::int64_t{1} << 40);
  t.dense_sync = training::training_policies().syncs.choose_or(system, "dense_sync", "ring").name;

  JsonReader samples = workload.object("samples");
  const std::string kind = samples.choice("source", {"zipf", "csv"});
  if (kind == "zipf") {
    const auto fields = static_cast<std::size_t>(samples.integer("fields", 1, 1024));
    const auto rows =
        static_cast<std::uint64_t>(samples.integer("rows_per_field", 1, std::int64_t{1} << 30));
    const double alpha = samples.number("alpha", 0, 10);
    p.make_source = [fields, rows, alpha](std::uint64_t seed) -> std::unique_ptr<SampleSource> {
      return std::make_unique<ZipfSource>(fields, rows, alpha,
                                          RandomStream(seed, "embcache.samples"));
    };
  } else {
    std::filesystem::path file = samples.string("file");
    if (file.is_relative()) file = scenario_dir / file;
    const std::vector<std::string> columns = samples.strings("columns");
    if (columns.empty())
      throw InputError(samples.path_of("columns"), "expected at least one column");
    // Read now, so a bad file is an input error before the run.
    auto csv = std::make_shared<CsvSource>(file, columns, samples.path_of("file"));
    p.make_source = [csv](std::uint64_t) -> std::unique_ptr<SampleSource> {
      return std::make_unique<CsvSource>(*csv);
    };
  }
  samples.finish();
  return p;
}

std::unique_ptr<Model> make_embcache_model(ModelSetup& setup) {
  JsonReader system = setup.root.object("system");
  system.ignore("model");
  JsonReader workload = setup.root.object("workload");
  ModelParams params = read_embcache_params(system, workload, setup.topology, setup.scenario_dir);
  system.finish();
  workload.finish();
  return std::make_unique<SimulationModel<EmbeddingTraining>>(
      setup.env, [params = std::move(params)](ModelEnv& env) {
        auto source = params.make_source(env.seed);
        TrainingParams t = params.training;
        t.cache_rows = static_cast<std::size_t>(
            std::ceil(params.cache_ratio * static_cast<double>(source->distinct_rows())));
        return std::make_unique<EmbeddingTraining>(env.engine, env.network, env.compute, t,
                                                   std::move(source), &env.links);
      });
}

}  // namespace mlsim::embcache
