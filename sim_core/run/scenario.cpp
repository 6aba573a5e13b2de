#include "sim_core/run/scenario.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>

#include "sim_core/base/error.hpp"
#include "sim_core/network/topology_spec.hpp"
#include "sim_core/run/compute_section.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim {
namespace {

// Names become folder names (results/<name>) and CLI arguments (--variant NAME).
void check_plain_name(const std::string& name, const std::string& path, const char* what) {
  const bool ok =
      !name.empty() && name.size() <= 128 && name[0] != '.' &&
      std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
      });
  if (!ok)
    throw InputError(path, fmt::format("expected a {} of letters, digits, '-', '_' and '.' (at "
                                       "most 128, not starting with '.'), got \"{}\"",
                                       what, name));
}

template <typename Registry>
std::vector<std::string> names_of(const Registry& r) {
  std::vector<std::string> out;
  for (const auto& e : r.all()) out.push_back(e.name);
  return out;
}

void read_network(JsonReader& root, const Registries& registries, LoadedScenario& s) {
  auto net = root.object_or_empty("network");
  const auto backends = names_of(registries.backends);
  MLSIM_CHECK(!backends.empty(), "no network backend is registered");
  s.network.backend_explicit = net.has("backend");
  if (!s.network.backend_explicit) root.raw("network")["backend"] = "flow";
  s.network.backend = net.choice("backend", backends);
  const BackendInfo* backend = registries.backends.find(s.network.backend);
  s.network.hosts_switch_programs = backend->hosts_switch_programs;
  s.make_network = backend->configure(net);
  net.finish();
  s.network.options = root.raw("network");
  s.network.options.erase("backend");
}

void read_system(JsonReader& root, const Registries& registries, LoadedScenario& s) {
  auto& system = root.raw("system");
  // The model's factory reads the rest of "system" (and "workload") strictly; here only the
  // model's name, so that an unknown model is reported with the list of known ones.
  JsonReader r(system, "system");
  const auto models = names_of(registries.models);
  if (models.empty())
    throw InputError(r.path_of("model"), "no model is registered in this program");
  s.model = r.choice("model", models);
  if (root.has("workload")) {
    auto& w = root.raw("workload");
    if (!w.is_object())
      throw InputError("workload", "expected an object, got " + json_type_name(w));
  } else {
    root.ignore("workload");
  }
}

void read_run(JsonReader& root, LoadedScenario& s) {
  auto run = root.object_or_empty("run");
  if (!run.has("time_limit")) root.raw("run")["time_limit"] = "none";
  auto& limit = run.raw("time_limit");
  if (!(limit.is_string() && limit.get<std::string>() == "none")) {
    const auto t = run.duration("time_limit");
    if (t <= Time::zero())
      throw InputError(run.path_of("time_limit"),
                       "expected a duration greater than zero, or \"none\" to run until idle");
    s.run.time_limit = t;
  }
  run.finish();
}

void read_variants(JsonReader& root, LoadedScenario& s) {
  if (!root.has("variants")) {
    root.ignore("variants");
  } else {
    auto& vars = root.raw("variants");
    if (!vars.is_object())
      throw InputError("variants",
                       "expected an object of named override sets, got " + json_type_name(vars));
    if (vars.size() > kMaxVariants)
      throw InputError("variants",
                       fmt::format("{} variants, at most {} (a sweep file expands a grid of "
                                   "overrides without listing every point: docs/sweeps.md)",
                                   vars.size(), kMaxVariants));
    for (auto it = vars.begin(); it != vars.end(); ++it) {
      if (it.key() == "comment" || (!it.key().empty() && it.key()[0] == '_')) continue;
      const auto where = "variants." + it.key();
      check_plain_name(it.key(), where, "variant name");
      if (!it.value().is_object())
        throw InputError(where, "expected an object of \"path\": value overrides, got " +
                                    json_type_name(it.value()));
      // Each override must at least apply to this document; its values are checked when the
      // variant is loaded (mlsim validate loads every variant). Checked in place first: a copy
      // of the document per variant made 300k variants quadratic (issue 17). Only a variant that
      // fails in place (or builds on its own earlier overrides) is replayed on a copy, for the
      // exact error.
      bool in_place = true;
      for (auto o = it.value().begin(); o != it.value().end(); ++o) {
        if (o.key() == "comment" || (!o.key().empty() && o.key()[0] == '_')) continue;
        if (parse_json_path(o.key(), where + "." + o.key()).front() ==
            JsonPathStep{std::string("include")})
          throw InputError(where + "." + o.key(), "a variant cannot change includes");
        in_place = in_place && override_applies(
                                   s.resolved, Override{o.key(), o.value(), where + "." + o.key()});
      }
      if (!in_place) {
        nlohmann::json probe = s.resolved;
        for (auto o = it.value().begin(); o != it.value().end(); ++o) {
          if (o.key() == "comment" || (!o.key().empty() && o.key()[0] == '_')) continue;
          apply_override(probe, Override{o.key(), o.value(), where + "." + o.key()});
        }
      }
      s.variant_names.push_back(it.key());
    }
  }
  if (root.has("baseline")) {
    const auto b = root.string("baseline");
    if (std::find(s.variant_names.begin(), s.variant_names.end(), b) == s.variant_names.end())
      throw InputError("baseline", fmt::format("\"{}\" is not one of the scenario's variants", b));
    s.baseline = b;
  } else {
    root.ignore("baseline");
  }
}

void read_output(JsonReader& root, LoadedScenario& s) {
  auto out = root.object_or_empty("output");
  // Each variant gets its own folder by default, so comparing variants never overwrites.
  const auto dir =
      out.string_or("dir", "results/" + s.name + (s.variant ? "/" + *s.variant : std::string()));
  if (dir.empty()) throw InputError(out.path_of("dir"), "expected a non-empty folder name");
  s.output.dir = dir;
  s.output.csv = out.boolean_or("csv", true);
  s.output.trace = out.boolean_or("trace", false);
  out.finish();
}

}  // namespace

LoadedScenario load_scenario_document(ScenarioDocument doc, const std::filesystem::path& file,
                                      std::optional<std::string> variant,
                                      const Registries& registries) {
  LoadedScenario s;
  s.file = file;
  s.variant = std::move(variant);
  s.provenance = std::move(doc.provenance);
  s.resolved = std::move(doc.json);
  try {
    JsonReader root(s.resolved, "");
    s.name = root.string("name");
    check_plain_name(s.name, "name", "name");
    s.description = root.string_or("description", "");
    s.seed = static_cast<std::uint64_t>(
        root.integer_or("seed", 1, 0, std::numeric_limits<std::int64_t>::max()));
    if (auto hw = root.optional_object("hardware")) s.hardware.add_from_json(*hw);
    {
      auto topo = root.object("topology");
      s.topology = parse_topology_spec(topo);
      JsonReader topo_hardware(root.raw("topology"), "topology");
      s.topology_hardware = parse_topology_hardware(topo_hardware, s.topology, s.hardware);
    }
    if (auto compute = root.optional_object("compute"))
      s.costs = parse_compute_section(*compute, s.hardware, s.dir());
    else
      s.costs = std::make_shared<const CostModel>();
    read_network(root, registries, s);
    read_system(root, registries, s);
    read_run(root, s);
    s.events = read_events_section(root, s.dir(), s.run.time_limit);
    read_variants(root, s);
    // Reserved for `mlsim sweep` and `mlsim check`, which validate them; kept in the echo.
    root.ignore("sweep");
    root.ignore("expect");
    read_output(root, s);
    root.finish();
  } catch (const InputError& e) {
    throw s.provenance.attribute(e);
  }
  return s;
}

namespace {
LoadedScenario finish_loading(ScenarioDocument doc, const ScenarioRequest& request,
                              const Registries& registries) {
  if (request.variant) apply_variant(doc, *request.variant);
  apply_overrides(doc, request.overrides);
  return load_scenario_document(std::move(doc), request.file, request.variant, registries);
}
}  // namespace

LoadedScenario load_scenario(const ScenarioRequest& request, const Registries& registries) {
  return finish_loading(read_scenario_document(request.file), request, registries);
}

LoadedScenario load_scenario_text(std::string_view text, const ScenarioRequest& request,
                                  const Registries& registries) {
  return finish_loading(read_scenario_text(text, request.file), request, registries);
}

}  // namespace mlsim
