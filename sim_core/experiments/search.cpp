#include "sim_core/experiments/search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "sim_core/base/error.hpp"
#include "sim_core/base/input_file.hpp"
#include "sim_core/experiments/expression.hpp"
#include "sim_core/scenario/json_reader.hpp"
#include "sim_core/scenario/strict_json.hpp"

namespace mlsim {
namespace {

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t");
  const auto e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

bool identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

const nlohmann::json* parameter(const SweepPoint& p, const std::string& path) {
  for (const auto& [name, value] : p.parameters)
    if (name == path) return &value;
  return nullptr;
}

}  // namespace

Constraint parse_constraint(const std::string& text, const std::string& where) {
  for (const char* op : {">=", "<=", ">", "<"}) {
    const auto at = text.find(op);
    if (at == std::string::npos) continue;
    Constraint c{text, trim(text.substr(0, at)), op,
                 trim(text.substr(at + std::string_view(op).size()))};
    if (c.lhs.empty() || c.rhs.empty() || c.lhs.find_first_of("<>=") != std::string::npos ||
        c.rhs.find_first_of("<>=") != std::string::npos)
      break;
    check_expression_syntax(c.lhs, where);
    check_expression_syntax(c.rhs, where);
    return c;
  }
  throw InputError(where, fmt::format("expected \"METRIC_EXPRESSION OP VALUE_EXPRESSION\" with OP "
                                      "one of >=, <=, >, < (e.g. \"serving_slo_attainment >= "
                                      "0.9\"), got \"{}\"",
                                      text));
}

bool constraint_holds(const Constraint& c, const std::map<std::string, double>& metrics,
                      const std::string& where) {
  const double l = evaluate_expression(c.lhs, metrics, where);
  const double r = evaluate_expression(c.rhs, metrics, where);
  if (c.op == ">=") return l >= r;
  if (c.op == "<=") return l <= r;
  if (c.op == ">") return l > r;
  return l < r;
}

SearchSpec parse_search_text(const std::string& text, const std::filesystem::path& file) {
  nlohmann::ordered_json doc = parse_strict_ordered_json(text, file.string());
  if (!doc.is_object() || !doc.contains("search"))
    throw InputError(file.string(), "(root)",
                     "expected a sweep file (scenario, grid, ...) with a \"search\" section");
  nlohmann::json section = nlohmann::json::parse(doc["search"].dump());
  doc.erase("search");
  SearchSpec spec;
  spec.configurations = parse_sweep_text(doc.dump(), file);
  try {
    JsonReader s(section, "search");
    JsonReader load = s.object("load");
    spec.load_path = load.string("path");
    spec.low = load.number("low", 1e-12, 1e12);
    spec.high = load.number("high", 1e-12, 1e12);
    if (!(spec.high > spec.low)) throw InputError(load.path_of("high"), "must be above low");
    spec.tolerance = load.number_or("tolerance", 0.05, 1e-6, 10);
    load.finish();
    const std::vector<std::string> constraints = s.strings("constraints");
    if (constraints.empty())
      throw InputError(s.path_of("constraints"), "expected at least one constraint");
    for (std::size_t i = 0; i < constraints.size(); ++i)
      spec.constraints.push_back(
          parse_constraint(constraints[i], fmt::format("{}[{}]", s.path_of("constraints"), i)));
    if (s.has("cost")) {
      spec.cost = s.string("cost");
      check_expression_syntax(*spec.cost, s.path_of("cost"));
    }
    if (s.has("names")) {
      const nlohmann::json& names = s.raw("names");
      if (!names.is_object())
        throw InputError(s.path_of("names"), "expected {\"alias\": \"parameter path\"}");
      const auto columns = parameter_columns(spec.configurations);
      for (const auto& [alias, path] : names.items()) {
        const std::string where = s.path_of("names") + "." + alias;
        if (!identifier(alias))
          throw InputError(where, "an alias must be a name (letters, digits, _)");
        if (!path.is_string()) throw InputError(where, "expected a parameter path");
        const std::string p = path.get<std::string>();
        if (std::find(columns.begin(), columns.end(), p) == columns.end())
          throw InputError(where, fmt::format("\"{}\" is not a parameter of the grid or points "
                                              "({})",
                                              p, fmt::join(columns, ", ")));
        spec.names[alias] = p;
      }
    }
    if (s.has("target_load")) spec.target_load = s.number("target_load", 0, 1e12);
    s.finish();
  } catch (const InputError& e) {
    if (!e.file().empty()) throw;
    throw InputError(file.string(), e.path(), e.message());
  }
  return spec;
}

SearchSpec read_search_file(const std::filesystem::path& file) {
  return parse_search_text(read_input_file(file, "", "search file"), file);
}

LoadBisection::LoadBisection(double low, double high, double tolerance)
    : low_(low), high_(high), tolerance_(tolerance), lo_(low), hi_(high) {
  MLSIM_CHECK(low > 0 && high > low && tolerance > 0, "bad bisection range");
}

std::optional<double> LoadBisection::next() const {
  if (!low_known_) return low_;
  if (!low_holds_) return std::nullopt;
  if (!high_known_) return high_;
  if (high_holds_ || hi_ / lo_ <= 1 + tolerance_) return std::nullopt;
  return std::sqrt(lo_ * hi_);  // the geometric middle: loads span orders of magnitude
}

void LoadBisection::record(double load, bool holds) {
  if (!low_known_) {
    MLSIM_CHECK(load == low_, "the low end is run first");
    low_known_ = true;
    low_holds_ = holds;
  } else if (!high_known_) {
    MLSIM_CHECK(load == high_, "the high end is run second");
    high_known_ = true;
    high_holds_ = holds;
  } else if (holds) {
    lo_ = load;
  } else {
    hi_ = load;
  }
}

std::optional<double> LoadBisection::capacity() const {
  if (!low_known_ || !low_holds_) return std::nullopt;
  if (high_holds_) return high_;
  return lo_;
}

SearchResult run_search(const SearchSpec& spec, const BatchRunner& run_batch) {
  const std::vector<SweepPoint> configs = expand_sweep(spec.configurations);
  std::vector<LoadBisection> bisections(configs.size(),
                                        LoadBisection(spec.low, spec.high, spec.tolerance));
  std::vector<std::map<double, std::map<std::string, double>>> seen(configs.size());
  SearchResult result;
  result.rows.resize(configs.size());
  for (;;) {
    std::vector<std::size_t> which;
    std::vector<double> loads;
    std::vector<RunRequest> batch;
    for (std::size_t i = 0; i < configs.size(); ++i) {
      const auto load = bisections[i].next();
      if (!load) continue;
      RunRequest r = configs[i].request;
      r.overrides.emplace_back(spec.load_path, *load);
      which.push_back(i);
      loads.push_back(*load);
      batch.push_back(std::move(r));
    }
    if (batch.empty()) break;
    const std::vector<RunOutcome> outcomes = run_batch(batch);
    MLSIM_CHECK(outcomes.size() == batch.size(), "one outcome per run");
    for (std::size_t k = 0; k < batch.size(); ++k) {
      bool holds = true;
      for (std::size_t c = 0; c < spec.constraints.size(); ++c)
        holds = holds && constraint_holds(spec.constraints[c], outcomes[k].metrics,
                                          fmt::format("search.constraints[{}]", c));
      bisections[which[k]].record(loads[k], holds);
      seen[which[k]][loads[k]] = outcomes[k].metrics;
      ++result.rows[which[k]].runs;
    }
  }
  for (std::size_t i = 0; i < configs.size(); ++i) {
    SearchRow& row = result.rows[i];
    row.configuration = configs[i];
    row.capacity = bisections[i].capacity();
    row.bound = !row.capacity                   ? "below_low"
                : bisections[i].at_least_high() ? "at_least_high"
                                                : "bisected";
    if (row.capacity) row.metrics = seen[i].at(*row.capacity);
    if (spec.cost) {
      std::map<std::string, double> vars = row.metrics;
      for (const auto& [alias, path] : spec.names) {
        const nlohmann::json* v = parameter(configs[i], path);
        if (!v || !v->is_number())
          throw InputError(
              "search.names." + alias,
              fmt::format("the parameter {} of configuration {} is not a number", path, i));
        vars[alias] = v->get<double>();
      }
      try {
        row.cost = evaluate_expression(*spec.cost, vars, "search.cost");
      } catch (const InputError&) {
        if (row.capacity) throw;  // with a run to read, an unknown name is an error
      }
    }
  }
  if (spec.target_load) {
    for (std::size_t i = 0; i < result.rows.size(); ++i) {
      const SearchRow& r = result.rows[i];
      if (!r.capacity || *r.capacity < *spec.target_load || !r.cost) continue;
      // The cheapest; at equal cost, the one with the larger capacity (headroom).
      const SearchRow* best = result.cheapest ? &result.rows[*result.cheapest] : nullptr;
      if (!best || *r.cost < *best->cost ||
          (*r.cost == *best->cost && *r.capacity > *best->capacity))
        result.cheapest = i;
    }
  }
  return result;
}

namespace {

std::vector<std::string> row_cells(const SearchSpec& spec, const SearchRow& r) {
  std::vector<std::string> cells;
  for (const auto& c : parameter_columns(spec.configurations)) {
    const nlohmann::json* v = parameter(r.configuration, c);
    cells.push_back(v ? value_cell(*v) : "");
  }
  auto num = [](std::optional<double> v) { return v ? fmt::format("{}", *v) : std::string(); };
  cells.push_back(num(r.capacity));
  cells.push_back(r.bound);
  cells.push_back(num(r.cost));
  cells.push_back(r.capacity && r.cost && *r.cost > 0 ? fmt::format("{}", *r.capacity / *r.cost)
                                                      : "");
  cells.push_back(fmt::format("{}", r.runs));
  for (const auto& c : spec.constraints) {
    std::string v;
    if (!r.metrics.empty()) v = fmt::format("{}", evaluate_expression(c.lhs, r.metrics, c.text));
    cells.push_back(v);
  }
  return cells;
}

}  // namespace

std::string search_csv(const SearchSpec& spec, const SearchResult& result) {
  std::vector<std::string> header = parameter_columns(spec.configurations);
  for (const char* c : {"capacity", "bound", "cost", "capacity_per_cost", "runs"})
    header.emplace_back(c);
  for (const auto& c : spec.constraints) header.push_back("at_capacity: " + c.lhs);
  std::string out;
  for (std::size_t k = 0; k < header.size(); ++k) out += (k ? "," : "") + csv_cell(header[k]);
  out += "\n";
  for (const auto& r : result.rows) {
    const auto cells = row_cells(spec, r);
    for (std::size_t k = 0; k < cells.size(); ++k) out += (k ? "," : "") + csv_cell(cells[k]);
    out += "\n";
  }
  return out;
}

nlohmann::json search_json(const SearchSpec& spec, const SearchResult& result) {
  nlohmann::json j;
  j["load"] = {{"path", spec.load_path},
               {"low", spec.low},
               {"high", spec.high},
               {"tolerance", spec.tolerance}};
  j["constraints"] = nlohmann::json::array();
  for (const auto& c : spec.constraints) j["constraints"].push_back(c.text);
  j["cost"] = spec.cost ? nlohmann::json(*spec.cost) : nlohmann::json();
  j["target_load"] = spec.target_load ? nlohmann::json(*spec.target_load) : nlohmann::json();
  j["configurations"] = nlohmann::json::array();
  for (const auto& r : result.rows) {
    nlohmann::json row;
    row["id"] = r.configuration.id;
    row["parameters"] = nlohmann::json::object();
    for (const auto& [path, value] : r.configuration.parameters) row["parameters"][path] = value;
    row["capacity"] = r.capacity ? nlohmann::json(*r.capacity) : nlohmann::json();
    row["bound"] = r.bound;
    row["cost"] = r.cost ? nlohmann::json(*r.cost) : nlohmann::json();
    row["runs"] = r.runs;
    row["metrics_at_capacity"] = r.metrics;
    j["configurations"].push_back(row);
  }
  j["cheapest"] = result.cheapest ? nlohmann::json(result.rows[*result.cheapest].configuration.id)
                                  : nlohmann::json();
  return j;
}

std::string search_table(const SearchSpec& spec, const SearchResult& result) {
  std::vector<std::string> header = parameter_columns(spec.configurations);
  for (const char* c : {"capacity", "bound", "cost", "capacity/cost", "runs"})
    header.emplace_back(c);
  std::vector<std::vector<std::string>> rows{header};
  // Cheapest first; rows without a cost keep their order at the end.
  std::vector<std::size_t> order(result.rows.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const auto& ca = result.rows[a].cost;
    const auto& cb = result.rows[b].cost;
    if (ca && cb) return *ca < *cb;
    return ca.has_value() && !cb.has_value();
  });
  for (std::size_t i : order) {
    auto cells = row_cells(spec, result.rows[i]);
    cells.resize(header.size());
    if (result.cheapest == i) cells.back() += "  <- cheapest at the target load";
    rows.push_back(cells);
  }
  std::vector<std::size_t> width(header.size(), 0);
  for (const auto& r : rows)
    for (std::size_t k = 0; k < r.size(); ++k) width[k] = std::max(width[k], r[k].size());
  std::string out;
  for (const auto& r : rows) {
    for (std::size_t k = 0; k < r.size(); ++k)
      out += fmt::format("{:<{}}{}", r[k], width[k], k + 1 < r.size() ? "  " : "\n");
  }
  if (spec.target_load && !result.cheapest)
    out += fmt::format("no configuration sustains the target load {}\n", *spec.target_load);
  return out;
}

}  // namespace mlsim
