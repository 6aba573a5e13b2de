#include "sim_core/experiments/claims.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "sim_core/base/error.hpp"
#include "sim_core/base/input_file.hpp"
#include "sim_core/base/units.hpp"
#include "sim_core/experiments/expression.hpp"
#include "sim_core/experiments/overrides.hpp"
#include "sim_core/scenario/strict_json.hpp"

namespace mlsim {

bool Band::contains(double v) const {
  if (std::isnan(v)) return false;
  return (!min || v >= *min) && (!max || v <= *max);
}

std::string Band::describe() const {
  if (min && max) return fmt::format("[{:.4g}, {:.4g}]", *min, *max);
  if (min) return fmt::format(">= {:.4g}", *min);
  return fmt::format("<= {:.4g}", *max);
}

std::string_view figure_kind_name(FigureKind k) {
  switch (k) {
    case FigureKind::value:
      return "value";
    case FigureKind::ratio:
      return "ratio";
    case FigureKind::speedup:
      return "speedup";
    case FigureKind::reduction_pct:
      return "reduction_pct";
    case FigureKind::relative_error:
      return "relative_error";
  }
  return "?";
}

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::pass:
      return "pass";
    case Verdict::fail:
      return "FAIL";
    case Verdict::known_gap:
      return "not reproduced (known)";
    case Verdict::now_in_band:
      return "in band (marked not reproduced)";
    case Verdict::in_band_by_chance:
      return "not reproduced (in band by chance)";
    case Verdict::error:
      return "ERROR";
  }
  return "?";
}

bool verdict_fails(Verdict v) {
  return v == Verdict::fail || v == Verdict::error;
}

namespace {

FigureKind parse_kind(const std::string& s) {
  if (s == "value") return FigureKind::value;
  if (s == "ratio") return FigureKind::ratio;
  if (s == "speedup") return FigureKind::speedup;
  if (s == "reduction_pct") return FigureKind::reduction_pct;
  return FigureKind::relative_error;
}

Band parse_band(JsonReader r) {
  Band b;
  const double inf = std::numeric_limits<double>::infinity();
  if (r.has("min")) b.min = r.number("min", -inf, inf);
  if (r.has("max")) b.max = r.number("max", -inf, inf);
  r.ignore("min");
  r.ignore("max");
  if (!b.min && !b.max) throw InputError(r.path(), "expected \"min\", \"max\" or both");
  if (b.min && b.max && *b.min > *b.max)
    throw InputError(r.path(), fmt::format("min {} is greater than max {}", *b.min, *b.max));
  r.finish();
  return b;
}

std::vector<std::pair<std::string, nlohmann::json>> parse_set(JsonReader& parent,
                                                              std::string_view key) {
  std::vector<std::pair<std::string, nlohmann::json>> out;
  auto r = parent.object_or_empty(key);
  // Every key is an override path; read them all so finish() has nothing to reject.
  nlohmann::json& obj = parent.raw(key);
  for (const auto& [path, value] : obj.items()) {
    if (path == "comment" || path.starts_with('_')) continue;
    parse_override_path(path, r.path_of(path));
    out.emplace_back(path, value);
    r.ignore(path);
  }
  r.finish();
  return out;
}

std::string case_label(const std::vector<std::pair<std::string, nlohmann::json>>& overrides) {
  std::string out;
  for (const auto& [path, value] : overrides) {
    if (!out.empty()) out += ", ";
    out += set_argument(path, value);
  }
  return out;
}

void check_id(const std::string& id, const std::string& where) {
  const bool ok = !id.empty() && std::all_of(id.begin(), id.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
  if (!ok)
    throw InputError(where,
                     "expected an id of letters, digits, '-', '_' and '.', got \"" + id + "\"");
}

}  // namespace

Claim parse_claim(JsonReader& r, const std::filesystem::path& base_dir,
                  const std::optional<std::filesystem::path>& default_scenario) {
  Claim c;
  c.id = r.string("id");
  check_id(c.id, r.path_of("id"));
  {
    auto p = r.object("paper");
    c.paper_title = p.string("title");
    c.paper_venue = p.string("venue");
    if (p.has("year")) p.integer("year", 1950, 2100);
    if (p.has("url")) p.string("url");
    p.finish();
  }
  c.figure = r.string("figure");
  c.conditions = r.string("conditions");
  c.claim = r.string_or("claim", "");
  if (r.has("paper_figure"))
    c.paper_figure = r.number("paper_figure", -std::numeric_limits<double>::infinity(),
                              std::numeric_limits<double>::infinity());
  if (r.has("scenario") || !default_scenario) {
    const std::filesystem::path s = r.string("scenario");
    c.scenario = (s.is_absolute() ? s : base_dir / s).lexically_normal();
  } else {
    c.scenario = *default_scenario;
  }
  c.scale = r.string_or("scale", "");
  if (r.has("set")) c.set = parse_set(r, "set");
  if (r.has("cases")) {
    auto cases = r.objects("cases");
    if (cases.empty()) throw InputError(r.path_of("cases"), "expected at least one case");
    for (auto& cr : cases) {
      ClaimCase k;
      k.overrides = parse_set(cr, "set");
      k.label = cr.string_or("label", case_label(k.overrides));
      cr.finish();
      c.cases.push_back(std::move(k));
    }
  } else {
    c.cases.push_back(ClaimCase{});
  }
  c.metric = r.string("metric");
  c.kind = parse_kind(
      r.choice("compute", {"value", "ratio", "speedup", "reduction_pct", "relative_error"}));
  if (r.has("variant")) c.variant = r.string("variant");
  if (r.has("baseline")) c.baseline = r.string("baseline");
  const bool needs_baseline = c.kind == FigureKind::ratio || c.kind == FigureKind::speedup ||
                              c.kind == FigureKind::reduction_pct;
  if (needs_baseline && !c.baseline)
    throw InputError(r.path_of("baseline"), fmt::format("compute \"{}\" needs a baseline variant",
                                                        figure_kind_name(c.kind)));
  if (!needs_baseline && c.baseline)
    throw InputError(r.path_of("baseline"), fmt::format("compute \"{}\" does not use a baseline",
                                                        figure_kind_name(c.kind)));
  if (auto cf = r.optional_object("closed_form")) {
    if (c.kind != FigureKind::relative_error)
      throw InputError(cf->path(), "a closed form is only used by compute \"relative_error\"");
    ClosedForm f;
    f.expression = cf->string("expression");
    auto vars = cf->object("variables");
    for (const auto& [name, path] : cf->raw("variables").items()) {
      if (name == "comment" || name.starts_with('_')) continue;
      f.variables[name] = vars.string(name);
      parse_override_path(f.variables[name], vars.path_of(name));
    }
    vars.finish();
    // Every variable the expression uses must be defined: evaluate once with dummy values.
    std::map<std::string, double> probe;
    for (const auto& [name, path] : f.variables) probe[name] = 1.0;
    evaluate_expression(f.expression, probe, cf->path_of("expression"));
    cf->finish();
    c.closed_form = std::move(f);
  } else if (c.kind == FigureKind::relative_error) {
    throw InputError(r.path_of("closed_form"), "compute \"relative_error\" needs a closed form");
  }
  if (!r.has("aggregate") && c.cases.size() > 1)
    throw InputError(r.path_of("aggregate"),
                     "a claim with several cases must say how to aggregate them: max, min or mean");
  const auto agg = r.choice_or("aggregate", {"only", "max", "min", "mean"}, "only");
  c.aggregate = agg == "max"    ? Aggregate::max
                : agg == "min"  ? Aggregate::min
                : agg == "mean" ? Aggregate::mean
                                : Aggregate::only;
  if (c.aggregate == Aggregate::only && c.cases.size() > 1)
    throw InputError(r.path_of("aggregate"), "\"only\" needs exactly one case");
  {
    auto b = r.object("band");
    c.band = parse_band(std::move(b));
  }
  c.status = r.choice("status", {"reproduced", "not_reproduced"}) == "reproduced"
                 ? ClaimStatus::reproduced
                 : ClaimStatus::not_reproduced;
  c.why = r.string_or("why", "");
  if (c.status == ClaimStatus::not_reproduced && c.why.empty())
    throw InputError(r.path_of("why"),
                     "a claim that is not reproduced must say why, with the figure mlsim gets");
  c.in_band_by_chance = r.boolean_or("in_band_by_chance", false);
  if (c.in_band_by_chance && c.status != ClaimStatus::not_reproduced)
    throw InputError(r.path_of("in_band_by_chance"),
                     "only a claim marked not_reproduced can be in its band by chance");
  if (auto rec = r.optional_object("recorded")) {
    Recorded v;
    v.value = rec->number("value", -std::numeric_limits<double>::infinity(),
                          std::numeric_limits<double>::infinity());
    v.date = rec->string("date");
    v.commit = rec->string("commit");
    rec->finish();
    if (c.status == ClaimStatus::reproduced && !c.band.contains(v.value))
      throw InputError(rec->path_of("value"),
                       fmt::format("the recorded figure {} is outside the band {} of a claim "
                                   "marked reproduced",
                                   v.value, c.band.describe()));
    c.recorded = std::move(v);
  }
  r.finish();
  return c;
}

ClaimsFile parse_claims_document(nlohmann::json doc, const std::filesystem::path& file) {
  ClaimsFile out;
  out.file = file;
  out.document = doc;
  try {
    JsonReader root(doc, "");
    auto claims = root.objects("claims");
    std::set<std::string> ids;
    for (auto& r : claims) {
      out.claims.push_back(parse_claim(r, file.parent_path()));
      if (!ids.insert(out.claims.back().id).second)
        throw InputError(r.path_of("id"), "duplicate claim id \"" + out.claims.back().id + "\"");
    }
    root.finish();
  } catch (const InputError& e) {
    throw in_file(e, file);
  }
  return out;
}

ClaimsFile read_claims_file(const std::filesystem::path& file) {
  return parse_claims_document(
      parse_strict_json(read_input_file(file, "", "claims file"), file.string()), file);
}

namespace {

RunRequest case_request(const Claim& c, const ClaimCase& k, const std::optional<std::string>& v) {
  RunRequest r;
  r.scenario = c.scenario;
  r.variant = v;
  r.overrides = c.set;
  r.overrides.insert(r.overrides.end(), k.overrides.begin(), k.overrides.end());
  return r;
}

double metric_of(const RunOutcome& run, const std::string& metric, const std::string& which) {
  const auto it = run.metrics.find(metric);
  if (it == run.metrics.end())
    throw InputError("metric", fmt::format("the {} run has no metric \"{}\"", which, metric));
  return it->second;
}

}  // namespace

std::vector<RunRequest> runs_needed(const Claim& c) {
  std::vector<RunRequest> out;
  std::set<std::string> seen;
  auto add = [&](RunRequest r) {
    if (seen.insert(r.key()).second) out.push_back(std::move(r));
  };
  for (const auto& k : c.cases) {
    add(case_request(c, k, c.variant));
    if (c.baseline) add(case_request(c, k, c.baseline));
  }
  return out;
}

double scenario_quantity(const nlohmann::json& scenario, const std::string& path) {
  const nlohmann::json* v = lookup_json_path(scenario, path);
  if (!v) throw InputError(path, "not present in the run's resolved scenario");
  if (v->is_number()) return v->get<double>();
  if (!v->is_string()) throw InputError(path, "expected a number or a quantity, got " + v->dump());
  const auto& s = v->get_ref<const std::string&>();
  // A quantity's unit says what it is; try each family in turn.
  try {
    return parse_time(s, path).seconds();
  } catch (const InputError&) {
  }
  try {
    return parse_bandwidth(s, path).bytes_per_s;
  } catch (const InputError&) {
  }
  try {
    return static_cast<double>(parse_bytes(s, path).count);
  } catch (const InputError&) {
  }
  try {
    return parse_flop_rate(s, path).flops_per_s;
  } catch (const InputError&) {
  }
  throw InputError(path, "expected a number or a quantity with a unit, got \"" + s + "\"");
}

double case_figure(const Claim& c, const RunOutcome& run, const RunOutcome* baseline) {
  const double m = metric_of(run, c.metric, c.variant ? "variant \"" + *c.variant + "\"" : "");
  auto base = [&] {
    MLSIM_CHECK(baseline != nullptr, "claim " + c.id + " needs its baseline run");
    return metric_of(*baseline, c.metric, "baseline \"" + c.baseline.value_or("") + "\"");
  };
  switch (c.kind) {
    case FigureKind::value:
      return m;
    case FigureKind::ratio:
      return m / base();
    case FigureKind::speedup:
      return base() / m;
    case FigureKind::reduction_pct: {
      const double b = base();
      return 100.0 * (b - m) / b;
    }
    case FigureKind::relative_error: {
      MLSIM_CHECK(c.closed_form.has_value(), "claim " + c.id + " has no closed form");
      if (run.scenario.is_null())
        throw InputError("closed_form", "the run did not echo its resolved scenario");
      std::map<std::string, double> vars;
      for (const auto& [name, path] : c.closed_form->variables)
        vars[name] = scenario_quantity(run.scenario, path);
      const double expected =
          evaluate_expression(c.closed_form->expression, vars, "closed_form.expression");
      return std::abs(m - expected) / std::abs(expected);
    }
  }
  return std::nan("");
}

ClaimResult evaluate_claim(const Claim& c, const OutcomeLookup& outcome) {
  ClaimResult res;
  res.id = c.id;
  try {
    for (const auto& k : c.cases) {
      const RunOutcome& run = outcome(case_request(c, k, c.variant));
      const RunOutcome* base = c.baseline ? &outcome(case_request(c, k, c.baseline)) : nullptr;
      res.case_figures.push_back(case_figure(c, run, base));
    }
  } catch (const std::exception& e) {
    res.verdict = Verdict::error;
    res.message = e.what();
    return res;
  }
  const auto& f = res.case_figures;
  double v = f.front();
  switch (c.aggregate) {
    case Aggregate::only:
      break;
    case Aggregate::max:
      v = *std::max_element(f.begin(), f.end());
      break;
    case Aggregate::min:
      v = *std::min_element(f.begin(), f.end());
      break;
    case Aggregate::mean: {
      double sum = 0;
      for (double x : f) sum += x;
      v = sum / static_cast<double>(f.size());
      break;
    }
  }
  res.figure = v;
  const bool in = c.band.contains(v);
  if (c.status == ClaimStatus::reproduced)
    res.verdict = in ? Verdict::pass : Verdict::fail;
  else
    res.verdict = !in                   ? Verdict::known_gap
                  : c.in_band_by_chance ? Verdict::in_band_by_chance
                                        : Verdict::now_in_band;
  return res;
}

}  // namespace mlsim
