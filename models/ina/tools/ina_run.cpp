// mlsim_ina_run: runs one INA scenario directly (without the general runner), for the study's
// sweeps and timing. Resolves "include" (files merged under the main one) and "--set a.b=value"
// overrides, runs the model, and prints the metrics with wall time, events/s and peak memory as
// one JSON object.
//
//   mlsim_ina_run workloads/scenarios/ina_dsa_study.json --set system.policy=atp
#include <sys/resource.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "models/ina/ina_cluster.hpp"
#include "models/ina/ina_model.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/topology_builders.hpp"
#include "sim_core/network/topology_hardware.hpp"
#include "sim_core/network/topology_spec.hpp"

namespace {

using nlohmann::json;

json read_json(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw mlsim::InputError(file.string(), "cannot open");
  return json::parse(in);
}

void merge(json& base, const json& top) {
  if (!base.is_object() || !top.is_object()) {
    base = top;
    return;
  }
  for (auto it = top.begin(); it != top.end(); ++it) merge(base[it.key()], it.value());
}

json load(const std::filesystem::path& file) {
  json doc = read_json(file);
  if (!doc.contains("include")) return doc;
  json merged = json::object();
  for (const auto& inc : doc["include"])
    merge(merged, load(file.parent_path() / inc.get<std::string>()));
  doc.erase("include");
  merge(merged, doc);
  return merged;
}

void apply_override(json& doc, const std::string& assignment) {
  auto eq = assignment.find('=');
  if (eq == std::string::npos) throw mlsim::InputError("--set", "expected path=value");
  json* node = &doc;
  std::string path = assignment.substr(0, eq);
  std::size_t start = 0;
  while (true) {
    auto dot = path.find('.', start);
    const std::string step = path.substr(start, dot - start);
    if (node->is_array() && !step.empty() &&
        step.find_first_not_of("0123456789") == std::string::npos)
      node = &node->at(std::stoul(step));
    else
      node = &(*node)[step];  // creates objects along the way
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  const std::string value = assignment.substr(eq + 1);
  json parsed = json::parse(value, nullptr, /*allow_exceptions=*/false);
  *node = parsed.is_discarded() ? json(value) : parsed;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: mlsim_ina_run SCENARIO.json [--set path=value]...\n";
    return 2;
  }
  try {
    const std::filesystem::path file = argv[1];
    json doc = load(file);
    for (int i = 2; i < argc; ++i) {
      if (std::string(argv[i]) == "--set" && i + 1 < argc)
        apply_override(doc, argv[++i]);
      else
        throw mlsim::InputError(argv[i], "unknown argument");
    }
    mlsim::HardwareCatalog hardware;
    if (doc.contains("hardware")) {
      mlsim::JsonReader hw(doc["hardware"], "hardware");
      hardware.add_from_json(hw);
    }
    const std::uint64_t seed = doc.value("seed", std::uint64_t{1});
    mlsim::JsonReader system(doc["system"], "system");
    system.ignore("model");
    mlsim::JsonReader workload(doc["workload"], "workload");
    mlsim::JsonReader topo(doc["topology"], "topology");
    const mlsim::TopologySpec topology_spec = mlsim::parse_topology_spec(topo);
    const mlsim::Topology topology = mlsim::build_topology(topology_spec);
    // The workers' GPUs (topology.hardware), as `mlsim run` builds them.
    const mlsim::NodeHardware node_hardware = mlsim::build_node_hardware(
        topology, topology_spec, mlsim::parse_topology_hardware(topo, topology_spec, hardware),
        hardware);
    // This runner has the flow backend only (for system.data_path "network"); `mlsim run` has
    // every backend.
    mlsim::NetworkSpec network;
    network.hosts_switch_programs = true;
    if (doc.contains("network")) {
      mlsim::JsonReader net(doc["network"], "network");
      network.backend_explicit = net.has("backend");
      if (network.backend_explicit && net.choice("backend", {"flow"}) != "flow")
        throw mlsim::InputError("network.backend", "mlsim_ina_run has the flow backend only");
      net.finish();
    }
    auto params = mlsim::ina::parse_cluster_params(
        system, workload, hardware, topology, node_hardware, network, file.parent_path(), seed);
    system.finish();
    workload.finish();

    const auto t0 = std::chrono::steady_clock::now();
    mlsim::Engine engine;
    mlsim::FluidNetwork flow(engine, topology, mlsim::Sharing::kMaxMin);
    mlsim::ina::InaCluster cluster(engine, params, &flow, &topology);
    cluster.start();
    engine.run();
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    mlsim::Results results;
    cluster.report(results);
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    json out;
    out["scenario"] = file.string();
    out["policy"] = doc["system"]["policy"];
    out["aggregator_memory"] = doc["system"]["aggregator_memory"];
    out["metrics"] = results.metrics();
    out["jobs"] = results.details()["jobs"];
    out["wall_s"] = wall;
    out["events"] = engine.events_processed();
    out["events_per_s"] = static_cast<double>(engine.events_processed()) / wall;
    out["peak_rss_mib"] = static_cast<double>(usage.ru_maxrss) / 1024.0;
    std::cout << out.dump(1) << "\n";
    return cluster.all_finished() ? 0 : 1;
  } catch (const mlsim::InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return 1;
  }
}
