#include "models/pipeline/pipeline_model.hpp"

#include <algorithm>

#include "sim_core/base/error.hpp"
#include "sim_core/hardware/dnn_profile.hpp"
#include "sim_core/run/simulation_model.hpp"

namespace mlsim::pipeline {
namespace {

// A host's one link to the network and the link back to it.
std::pair<const Link*, const Link*> host_links(const Topology& t, NodeId h, std::size_t stage) {
  const auto& out = t.out_links(h);
  if (out.size() != 1)
    throw InputError("topology", "pipeline stage " + std::to_string(stage) + " runs on host " +
                                     t.node(h).name +
                                     ", which needs exactly one link to the network");
  const Link& up = t.link(out[0]);
  for (LinkId l : t.out_links(up.dst))
    if (t.link(l).dst == h) return {&up, &t.link(l)};
  throw InputError("topology", "host " + t.node(h).name + " has no link back from the network");
}

}  // namespace

TrainingParams read_training_params(JsonReader& system, JsonReader& workload,
                                    const Topology& topology,
                                    const std::filesystem::path& scenario_dir) {
  TrainingParams p;
  p.policy = system.choice("policy", {"pipedream", "autopipe"}) == "pipedream" ? Policy::kPipeDream
                                                                               : Policy::kAutoPipe;
  const auto hosts = static_cast<std::int64_t>(topology.hosts().size());
  const auto stages = static_cast<std::size_t>(
      system.integer_or("stages", hosts, 1, std::max<std::int64_t>(hosts, 1)));
  p.min_gain = system.number_or("min_gain", 0.05, 0, 1);
  p.migrated_state_factor = system.number_or("migrated_state_factor", 2, 0, 100);

  const DnnProfile profile = read_pipedream_graph_field(workload, "profile", scenario_dir);
  p.layers = layer_costs(profile);
  if (p.layers.size() < stages)
    throw InputError(workload.path_of("profile"),
                     "the profile has " + std::to_string(p.layers.size()) +
                         " layers, fewer than the " + std::to_string(stages) + " stages");
  p.samples_per_minibatch = workload.number("samples_per_minibatch", 1, 1e9);
  p.minibatches = static_cast<std::size_t>(workload.integer("minibatches", 1, 100'000'000));

  p.initial.gpu_speed.assign(stages, 1.0);
  if (workload.has("gpu_speed")) {
    p.initial.gpu_speed = workload.numbers("gpu_speed", 1e-6, 1e6);
    if (p.initial.gpu_speed.size() != stages)
      throw InputError(workload.path_of("gpu_speed"),
                       "expected one speed factor per stage (" + std::to_string(stages) + ")");
  }
  for (std::size_t s = 0; s < stages; ++s) {
    const NodeId h = topology.hosts()[s];
    p.hosts.push_back(h);
    const auto [up, down] = host_links(topology, h, s);
    p.host_bandwidth.push_back(std::min(up->bandwidth.bytes_per_s, down->bandwidth.bytes_per_s));
    if (s > 0) {
      // Estimates assume the host links are the bottleneck (a star or a non-blocking fabric).
      const auto [prev_up, prev_down] = host_links(topology, p.hosts[s - 1], s - 1);
      p.initial.link_bandwidth.push_back(std::min(p.host_bandwidth[s - 1], p.host_bandwidth[s]));
      p.initial.link_latency.push_back((prev_up->latency + down->latency).seconds());
    }
  }

  if (workload.has("changes")) {
    std::size_t i = 0;
    for (JsonReader c : workload.objects("changes")) {
      Change ch;
      ch.at = c.duration("at");
      ch.target =
          static_cast<std::size_t>(c.integer("stage", 0, static_cast<std::int64_t>(stages) - 1));
      const bool speed = c.has("gpu_speed"), bw = c.has("host_bandwidth");
      if (speed == bw)
        throw InputError(workload.path_of("changes") + "[" + std::to_string(i) + "]",
                         "expected exactly one of \"gpu_speed\" or \"host_bandwidth\"");
      if (speed) {
        ch.kind = Change::Kind::kGpuSpeed;
        ch.value = c.number("gpu_speed", 1e-6, 1e6);
      } else {
        ch.kind = Change::Kind::kHostBandwidth;
        ch.value = c.bandwidth("host_bandwidth").bytes_per_s;
      }
      c.finish();
      p.changes.push_back(ch);
      ++i;
    }
  }
  return p;
}

std::unique_ptr<Model> make_pipeline_model(ModelSetup& setup) {
  JsonReader system = setup.root.object("system");
  system.ignore("model");
  JsonReader workload = setup.root.object("workload");
  TrainingParams params =
      read_training_params(system, workload, setup.topology, setup.scenario_dir);
  system.finish();
  workload.finish();
  return std::make_unique<SimulationModel<PipelineTraining>>(
      [params = std::move(params)](ModelEnv& env) {
        return std::make_unique<PipelineTraining>(env.engine, env.network, env.topology, params);
      });
}

}  // namespace mlsim::pipeline
