#include "cli/commands.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "cli/progress_line.hpp"
#include "models/serving/model_catalog.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/hardware/hardware.hpp"
#include "sim_core/run/budget.hpp"
#include "sim_core/run/results_writer.hpp"
#include "sim_core/run/runner.hpp"
#include "sim_core/run/scenario.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim {
namespace {

ScenarioRequest request_of(const ScenarioArgs& a) {
  ScenarioRequest r;
  r.file = a.scenario;
  r.variant = a.variant;
  for (const auto& s : a.sets) r.overrides.push_back(parse_set_option(s));
  return r;
}

RunBudget budget_of(const ScenarioArgs& a) {
  RunBudget b;
  if (a.max_events) {
    if (*a.max_events == 0) throw InputError("--max-events", "expected at least 1 event");
    b.max_events = *a.max_events;
  }
  if (a.max_memory) {
    const Bytes bytes = parse_bytes(*a.max_memory, "--max-memory");
    if (bytes.count <= 0) throw InputError("--max-memory", "expected a size above 0, e.g. 8GiB");
    b.max_memory_bytes = bytes.count;
  }
  return b;
}

void print_summary(const RunOutput& out, const std::filesystem::path& dir,
                   const std::vector<std::filesystem::path>& files) {
  const auto& info = out.info;
  fmt::print("{}{}: model {}, backend {}, seed {}\n", info.name,
             info.variant ? " (variant " + *info.variant + ")" : "", info.model, info.backend,
             info.seed);
  std::size_t width = 6;
  for (const auto& [k, v] : out.results.metrics()) width = std::max(width, k.size());
  fmt::print("  {:<{}}  {}\n", "metric", width, "value");
  for (const auto& [k, v] : out.results.metrics()) fmt::print("  {:<{}}  {:.6g}\n", k, width, v);
  fmt::print(
      "  {} events in {:.3f} s wall ({:.2f} M events/s, peak RSS {:.0f} MiB), simulated {}{}\n",
      info.events_processed, out.wall_seconds,
      out.wall_seconds > 0 ? static_cast<double>(info.events_processed) / out.wall_seconds / 1e6
                           : 0.0,
      static_cast<double>(peak_resident_bytes()) / (1 << 20), to_string(info.simulated_time),
      info.hit_time_limit ? " (time limit reached)" : "");
  fmt::print("  results: {} ({} files)\n", (dir / "summary.json").string(), files.size());
}

}  // namespace

int run_command(const RunArgs& args, const Registries& registries) {
  const auto scenario = load_scenario(request_of(args.input), registries);
  const std::filesystem::path dir =
      args.out ? std::filesystem::path(*args.out) : scenario.output.dir;
  // Created and checked writable before anything is simulated; removed again if the run fails.
  OutputFolder folder(dir, args.out ? "--out" : "output.dir");
  PreparedRun prepared(scenario, registries, budget_of(args.input));

  ProgressLine progress(!args.quiet && ProgressLine::stderr_is_terminal());
  RunOptions options;
  options.progress_every = 1 << 16;
  options.on_progress = [&progress](const ProgressReport& r) { progress.update(r); };
  const auto out = prepared.run(options);
  progress.clear();

  const auto files = write_results(out, dir, WriteOptions{scenario.output.csv});
  folder.keep();
  if (!args.quiet) print_summary(out, dir, files);
  return 0;
}

int validate_command(const ScenarioArgs& args, const Registries& registries) {
  const auto base = load_scenario(request_of(args), registries);
  const RunBudget budget = budget_of(args);
  { PreparedRun prepared(base, registries, budget); }
  std::vector<std::string> checked;
  // Each variant is a whole load: many variants of a large document would take hours.
  constexpr std::uintmax_t kMaxValidateBytes = std::uintmax_t{1} << 30;  // [assumed] ~1 min
  std::error_code ec;
  const auto doc_bytes = std::filesystem::file_size(args.scenario, ec);
  if (!args.variant && !ec && base.variant_names.size() * doc_bytes > kMaxValidateBytes)
    throw InputError(
        "--variant",
        fmt::format("validating all {} variants would read the {} MiB scenario {} "
                    "times; validate one at a time with --variant NAME",
                    base.variant_names.size(), doc_bytes >> 20, base.variant_names.size()));
  if (!args.variant) {
    for (const auto& v : base.variant_names) {
      auto req = request_of(args);
      req.variant = v;
      const auto loaded = load_scenario(req, registries);
      PreparedRun prepared(loaded, registries, budget);
      checked.push_back(v);
    }
  }
  fmt::print(
      "ok: {} ({}{}){}\n", args.scenario, base.name,
      args.variant ? ", variant " + *args.variant : "",
      checked.empty() ? "" : fmt::format("; variants {} also valid", fmt::join(checked, ", ")));
  return 0;
}

int list_command(const std::filesystem::path& catalog_dir,
                 const std::filesystem::path& llm_catalog_dir, const Registries& registries) {
  fmt::print("models (each with its registered policies):\n");
  for (const auto& m : registries.models.all()) {
    fmt::print("  {:<14} {}\n", m.name, m.description);
    for (const PolicyInfo& p : m.policies)
      fmt::print("    {:<12} {:<26} {}\n", p.kind, p.name, p.description);
  }
  if (registries.models.all().empty()) fmt::print("  (none registered)\n");
  fmt::print("network backends:\n");
  for (const auto& b : registries.backends.all())
    fmt::print("  {:<14} {}\n", b.name, b.description);

  // Every catalog file in the folder, read with the same strict parser a scenario uses.
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(catalog_dir, ec))
    if (e.path().extension() == ".json") files.push_back(e.path());
  if (ec)
    throw InputError("--catalog",
                     fmt::format("cannot read {}: {}", catalog_dir.string(), ec.message()));
  std::sort(files.begin(), files.end());
  HardwareCatalog catalog;
  for (const auto& f : files) {
    auto doc = read_scenario_document(f);
    if (!doc.json.contains("hardware")) continue;
    try {
      JsonReader hw(doc.json["hardware"], "hardware");
      catalog.add_from_json(hw);
    } catch (const InputError& e) {
      throw doc.provenance.attribute(e);
    }
  }
  fmt::print("GPUs ({}):\n", catalog_dir.string());
  for (const auto& [name, g] : catalog.gpus()) {
    std::string rates;
    for (const auto& [d, r] : g.peak) rates += fmt::format(" {} {}", dtype_name(d), to_string(r));
    fmt::print("  {:<16} HBM {} at {:.4g} GB/s, NVLink {};{}\n", name, to_string(g.hbm_capacity),
               g.hbm_bandwidth.bytes_per_s / 1e9,
               g.nvlink_bandwidth
                   ? fmt::format("{:.4g} GB/s", g.nvlink_bandwidth->bytes_per_s / 1e9)
                   : std::string("none"),
               rates);
  }
  fmt::print("NICs:\n");
  for (const auto& [name, n] : catalog.nics())
    fmt::print("  {:<24} {} x {}\n", name, n.ports, to_string(n.bandwidth));
  fmt::print("switches:\n");
  for (const auto& [name, s] : catalog.switches())
    fmt::print("  {:<24} {} x {}, pipeline {}{}\n", name, s.ports, to_string(s.port_bandwidth),
               to_string(s.pipeline_latency),
               s.aggregators ? fmt::format(", {} aggregators of {}", s.aggregators->count,
                                           to_string(s.aggregators->bytes_per_slot))
                             : "");

  // Transformer shapes for the serving model, from every catalog file in the models folder.
  std::vector<std::filesystem::path> model_files;
  for (const auto& e : std::filesystem::directory_iterator(llm_catalog_dir, ec))
    if (e.path().extension() == ".json") model_files.push_back(e.path());
  if (ec)
    throw InputError("--models",
                     fmt::format("cannot read {}: {}", llm_catalog_dir.string(), ec.message()));
  std::sort(model_files.begin(), model_files.end());
  fmt::print("LLM models ({}):\n", llm_catalog_dir.string());
  for (const auto& f : model_files) {
    const serving::ModelCatalog models = serving::ModelCatalog::load(f);
    for (const auto& [name, m] : models.all())
      fmt::print("  {:<16} {} layers, hidden {}, {} heads ({} KV), {:.1f} B parameters, {}\n", name,
                 m.layers, m.hidden, m.heads, m.kv_heads, static_cast<double>(m.params()) / 1e9,
                 f.filename().string());
  }
  return 0;
}

}  // namespace mlsim
